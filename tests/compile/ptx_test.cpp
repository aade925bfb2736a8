// The GPU path without a GPU: kernel graphs (elementwise, row reductions,
// row outputs, u8 buffers) lowered to PTX and held to CUDA's own assembler (ptxas,
// which CI has with nvcc), and the cubins' disk cache. Launching them is
// tests/gpu/compiled_kernels_gpu_test.cpp.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "col_sum_cases.h"
#include "compile/chains.h"
#include "compile/compiler_info.h"
#include "compile/gpu_mlir.h"
#include "compile/gradient.h"
#include "compile/ptx.h"
#include "core/error.h"
#include "optim/compiled_adamw8bit.h"
#include "train/train_helpers.h"

namespace lt::compile {
namespace {

namespace fs = std::filesystem;

const char* kPtxas = "/usr/local/cuda/bin/ptxas";

size_t global_loads(const std::string& ptx) {
  size_t count = 0;
  for (size_t at = ptx.find("ld.global"); at != std::string::npos;
       at = ptx.find("ld.global", at + 1)) {
    ++count;
  }
  return count;
}

size_t reduction_count(const KernelGraph& graph) {
  return static_cast<size_t>(std::count_if(graph.nodes().begin(), graph.nodes().end(),
                                           [](const Node& n) { return is_reduction(n.op); }));
}

class PtxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
    if (!fs::exists(PtxTarget{}.libdevice)) GTEST_SKIP() << "no CUDA libdevice";
  }

  // ptxas's exit status on `ptx` for sm_90, and its messages.
  // `flags`: more ptxas options ("-v": each entry's registers in `messages`).
  static int assemble(const std::string& ptx, std::string& messages,
                      const std::string& flags = "") {
    train::testing::TempDir dir("ptx");
    std::ofstream(dir / "k.ptx") << ptx;
    const std::string command = std::string(kPtxas) + " -arch=sm_90 " + flags + " " +
                                (dir / "k.ptx").string() + " -o " + (dir / "k.cubin").string() +
                                " > " + (dir / "log").string() + " 2>&1";
    const int status = std::system(command.c_str());
    std::ifstream log(dir / "log");
    messages.assign(std::istreambuf_iterator<char>(log), {});
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

TEST_F(PtxTest, KernelsOfEveryFormAssembleWithPtxas) {
  if (!fs::exists(kPtxas)) GTEST_SKIP() << "no " << kPtxas;
  KernelGraph mixed;  // every elementwise op, row and col broadcasts, both dtypes, 2 outputs
  {
    const Value x = mixed.input(ShapeClass::Full, DType::BF16);
    const Value row = mixed.input(ShapeClass::Row, DType::F32);
    const Value col = mixed.input(ShapeClass::Col, DType::BF16);
    const Value y = mixed.div(mixed.sub(x, row), mixed.add(mixed.constant(1), mixed.abs(col)));
    const Value z = mixed.select(mixed.less(y, mixed.constant(0)), mixed.erf(y),
                                 mixed.log(mixed.add(mixed.constant(1), mixed.exp(mixed.neg(y)))));
    mixed.output(mixed.cast(mixed.max(z, mixed.rsqrt(mixed.add(y, mixed.mul(y, y)))), DType::BF16),
                 DType::F32);
    mixed.output(mixed.mul(mixed.sigmoid(x), mixed.tanh(row)), DType::BF16);
  }
  KernelGraph row_only;  // a row output and no reduction: still one row per block
  row_only.output(row_only.exp(row_only.input(ShapeClass::Row, DType::F32)), DType::F32);
  KernelGraph lookups;  // table lookups at a u8 code and at a computed index: global constants
  {
    std::vector<float> codes(256), small = {-1.0f, 0.5f, 2.0f};
    for (size_t k = 0; k < codes.size(); ++k) codes[k] = std::ldexp(static_cast<float>(k), -7);
    const Value code = lookups.input(ShapeClass::Full, DType::U8);
    const Value x = lookups.input(ShapeClass::Full, DType::F32);
    lookups.output(lookups.add(lookups.lookup(codes, code), lookups.lookup(small, x)), DType::BF16);
  }
  const GpuLaunchForm elementwise = GpuLaunchForm::Elementwise, rows = GpuLaunchForm::RowPerBlock;
  const std::vector<std::tuple<const char*, KernelGraph, GpuLaunchForm>> graphs = {
      {"swiglu bf16", swiglu_forward(DType::BF16), elementwise},
      {"gelu f32", gelu_tanh_forward(DType::F32), elementwise},
      {"mixed", mixed, elementwise},
      {"softmax bf16", softmax_forward(DType::BF16), rows},
      {"residual rms_norm bf16", residual_rms_norm_forward(DType::BF16, 1e-5), rows},
      {"layer_norm f32", layer_norm_forward(DType::F32, 1e-5), rows},
      {"row output", row_only, rows},
      {"lookups", lookups, elementwise},
      {"8-bit AdamW (u8 codes in and out)", optim::adamw8bit_kernel_graph(DType::BF16, true),
       rows}};
  std::string messages;
  ASSERT_NE(assemble(".version 8.5\n.target sm_90\nnot ptx", messages), 0);  // it can fail
  for (const auto& [what, graph, form] : graphs) {
    SCOPED_TRACE(what);
    const PtxKernel kernel = compile_ptx(graph);
    EXPECT_NE(kernel.ptx.find(".version 8.5"), std::string::npos);
    EXPECT_NE(kernel.ptx.find(".target sm_90"), std::string::npos);
    EXPECT_NE(kernel.ptx.find(".entry " + kernel.entry), std::string::npos) << kernel.entry;
    EXPECT_EQ(kernel.entry, kGpuEntry);
    EXPECT_EQ(kernel.threads_per_block, kGpuThreadsPerBlock);
    EXPECT_EQ(kernel.form, form);
    // A reduction is a block-level tree (warp shuffles, then partials in
    // shared memory), not a loop over a host buffer.
    const bool reduces = graph.key().find("row_") != std::string::npos;
    EXPECT_EQ(kernel.ptx.find("shfl.sync.bfly") != std::string::npos, reduces);
    EXPECT_EQ(kernel.ptx.find("bar.sync") != std::string::npos, reduces);
    EXPECT_EQ(kernel.ptx.find("malloc"), std::string::npos);
    // Each table is one constant array of the module.
    for (size_t t = 0; t < graph.tables().size(); ++t) {
      EXPECT_NE(kernel.ptx.find("lt_table" + std::to_string(t) + "["), std::string::npos);
    }
    EXPECT_EQ(assemble(kernel.ptx, messages), 0) << messages;
  }
  // Four elements a thread: each whole step loads all eight bf16 values of
  // SwiGLU's two inputs before its first store.
  PtxTarget four;
  four.forms.elements_per_thread = 4;
  const PtxKernel swiglu = compile_ptx(swiglu_forward(DType::BF16), four);
  EXPECT_EQ(swiglu.elements_per_thread, 4);
  const size_t first_store = swiglu.ptx.find("st.global");
  size_t loads_before = 0;
  for (size_t at = swiglu.ptx.find("ld.global"); at < first_store;
       at = swiglu.ptx.find("ld.global", at + 1)) {
    ++loads_before;
  }
  EXPECT_EQ(loads_before, 8u);
  EXPECT_EQ(assemble(swiglu.ptx, messages), 0) << messages;

  // Packed, eight a thread: SwiGLU's two bf16 inputs are one 16-byte load
  // each (ld.global.v4.b32) and its output one 16-byte store, on the path
  // taken when the buffers are aligned; the kernel keeps a one-element
  // loop for the rest. Every form of graph assembles.
  PtxTarget packed;
  packed.forms.elements_per_thread = 8;
  packed.forms.packed = true;
  const PtxKernel swiglu8 = compile_ptx(swiglu_forward(DType::BF16), packed);
  EXPECT_EQ(swiglu8.elements_per_thread, 8);
  const auto count = [](const std::string& ptx, const std::string& what) {
    size_t n = 0;
    for (size_t at = ptx.find(what); at != std::string::npos; at = ptx.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(swiglu8.ptx, "ld.global.v4"), 2u) << swiglu8.ptx;
  EXPECT_EQ(count(swiglu8.ptx, "st.global.v4"), 1u) << swiglu8.ptx;
  EXPECT_EQ(assemble(swiglu8.ptx, messages), 0) << messages;
  for (const auto& [what, graph, form] : graphs) {
    SCOPED_TRACE(std::string("packed ") + what);
    const PtxKernel kernel = compile_ptx(graph, packed);
    EXPECT_EQ(assemble(kernel.ptx, messages), 0) << messages;
  }
}

// The ColSums form (compile/gpu_mlir.h): the partials' kernel and the one
// that sums them, in one module; deterministic by construction, so no
// atomic anywhere. A graph with row reductions reduces in blocks as the
// row form does.
TEST_F(PtxTest, ColSumKernelsAssembleWithPtxasWithoutAtomics) {
  if (!fs::exists(kPtxas)) GTEST_SKIP() << "no " << kPtxas;
  const std::vector<std::pair<const char*, KernelGraph>> graphs = {
      {"bias + gelu backward bf16", testing::bias_gelu_backward(DType::BF16)},
      {"layer_norm backward bf16",
       gradient_graph(layer_norm_forward(DType::BF16, 1e-5), {true, true, true})},
      {"mixed", testing::mixed_col_sums()}};
  PtxTarget packed;
  packed.forms.elements_per_thread = 8;
  packed.forms.packed = true;
  PtxTarget two_rows;  // rows an iteration (gpu_mlir.h's to_gpu_mlir)
  two_rows.forms.col_sum_rows = 2;
  std::string messages;
  for (const auto& [what, graph] : graphs) {
    SCOPED_TRACE(what);
    for (const PtxTarget& target : {PtxTarget{}, packed, two_rows}) {
      const PtxKernel kernel = compile_ptx(graph, target);
      EXPECT_EQ(kernel.form, GpuLaunchForm::ColSums);
      EXPECT_EQ(kernel.elements_per_thread, 1);
      EXPECT_NE(kernel.ptx.find(std::string(".entry ") + kGpuEntry), std::string::npos);
      EXPECT_NE(kernel.ptx.find(std::string(".entry ") + kGpuColSumEntry), std::string::npos);
      EXPECT_EQ(kernel.ptx.find("atom."), std::string::npos);
      EXPECT_EQ(kernel.ptx.find("\tred."), std::string::npos);
      const bool reduces = graph.key().find("row_") != std::string::npos;
      EXPECT_EQ(kernel.ptx.find("shfl.sync.bfly") != std::string::npos, reduces);
      EXPECT_EQ(assemble(kernel.ptx, messages, "-v"), 0) << messages;
      // Held to kGpuColSumBlocksPerSm blocks an SM (gpu_mlir.h): the grid
      // assumes as many resident.
      EXPECT_NE(kernel.ptx.find(".minnctapersm " + std::to_string(kGpuColSumBlocksPerSm)),
                std::string::npos);
      const size_t entry = messages.find(std::string("entry function '") + kGpuEntry + "'");
      const size_t used = messages.find("Used ", entry);
      ASSERT_TRUE(entry != std::string::npos && used != std::string::npos) << messages;
      const int registers = std::atoi(messages.c_str() + used + 5);
      EXPECT_GT(registers, 0) << messages;
      EXPECT_LE(registers * kGpuThreadsPerBlock * kGpuColSumBlocksPerSm, 65536) << messages;
    }
  }
  // Two rows an iteration: the second row's loads go with the first's, so
  // the loop holds twice the loads of each slot's inputs. A graph with row
  // reductions keeps one row (GpuForms::col_sum_rows).
  for (const auto& [what, graph] : graphs) {
    const std::string one = compile_ptx(graph, PtxTarget{}).ptx;
    const std::string two = compile_ptx(graph, two_rows).ptx;
    if (reduction_count(graph) > 0) {
      EXPECT_EQ(two, one) << what;
    } else {
      EXPECT_GT(global_loads(two), global_loads(one)) << what;
    }
  }
  EXPECT_THROW(to_gpu_mlir(testing::mixed_col_sums(), GpuForms{.col_sum_rows = 0}), Error);
  EXPECT_THROW(to_gpu_mlir(testing::mixed_col_sums(), GpuForms{.col_sum_rows = 9}), Error);
  // A graph without col sums keeps its form.
  EXPECT_EQ(
      gpu_launch_form(gradient_graph(layer_norm_forward(DType::BF16, 1e-5), {true, false, false})),
      GpuLaunchForm::RowPerBlock);
}

// The ColSums form's grid: a function of rows alone (the order of the
// additions so repeats), every row in a block of ceil(rows / blocks) rows,
// at most 3 blocks per SM of an H200 and at most one per 16 rows.
TEST(GpuColSumBlocks, DependOnRowsAloneAndCoverEveryRow) {
  EXPECT_EQ(gpu_col_sum_blocks(0), 0);
  for (int64_t rows : {1, 7, 16, 17, 1000, 6336, 6337, 16384, 16389, 1 << 20}) {
    SCOPED_TRACE(rows);
    const int64_t blocks = gpu_col_sum_blocks(rows);
    EXPECT_GE(blocks, 1);
    EXPECT_LE(blocks, kGpuColSumMostBlocks);
    EXPECT_LE(blocks, (rows + kGpuColSumLeastRows - 1) / kGpuColSumLeastRows);
    const int64_t per_block = (rows + blocks - 1) / blocks;  // as the kernel takes it
    EXPECT_GE(blocks * per_block, rows);
    EXPECT_EQ(gpu_col_sum_blocks(rows), blocks);
  }
}

TEST(PtxIsa, TheLowerOfWhatLlvmWritesAndPtxasReads) {
  EXPECT_EQ(ptx_isa_for(11, 8), "+ptx78");
  EXPECT_EQ(ptx_isa_for(12, 0), "+ptx80");
  EXPECT_EQ(ptx_isa_for(12, 4), "+ptx84");
  EXPECT_EQ(ptx_isa_for(12, 6), "+ptx85");
  EXPECT_EQ(ptx_isa_for(13, 0), "+ptx85");  // ptxas reads 9.0, LLVM 19 writes 8.5
  EXPECT_THROW(ptx_isa_for(10, 2), Error);
}

}  // namespace
}  // namespace lt::compile
