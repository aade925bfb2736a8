// The fusion compiler's kernels launched on the GPU (issue 24): every named
// chain (and three backward graphs) and random expression graphs of fixed
// seeds (with table lookups too), through compile::call_gpu, equal the
// float64 interpreter within its bound on f32 rounding, as the CPU kernels
// do (tests/compile/compiled_vs_interpreter_test.cpp).
//
// The GPU machine's build has no MLIR: the kernels come from the folder
// $LT_GPU_KERNELS (else ~/.cache/lazytrain/kernels), filled ahead by a
// build with MLIR (LT_PREBUILD_GPU_KERNELS=<folder> test_compile
// --gtest_filter=GpuKernelPrebuild.*; docs/compiler.md). A kernel missing
// from it fails its case with a message naming the entry.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "compile/col_sum_cases.h"
#include "compile/gpu_kernel.h"
#include "compile/gpu_kernel_cache.h"
#include "compile/interpret.h"
#include "compile/jit_harness.h"
#include "core/error.h"
#include "core/random.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "gpu_test_support.h"
#include "support/gpu_kernel_cases.h"

namespace lt::compile {
namespace {

constexpr double kUnitRoundoff = 0x1.0p-24;

GpuKernelCache& cache() {
  static GpuKernelCache kernels(testing::gpu_test_kernel_folder());
  return kernels;
}

// The elementwise kernels with four elements a thread (PtxTarget).
GpuKernelCache& cache_by_four() {
  static GpuKernelCache kernels(testing::gpu_test_kernel_folder(), testing::four_elements_target());
  return kernels;
}

// The packed form, eight consecutive elements a thread (GpuForms::packed).
GpuKernelCache& cache_packed() {
  static GpuKernelCache kernels(testing::gpu_test_kernel_folder(), testing::packed_eight_target());
  return kernels;
}

// AdamW takes square roots of its state and divides by its scalars:
// positive inputs keep it finite; every other case takes [-2, 2].
std::pair<double, double> input_range(const testing::GpuKernelCase& c) {
  return c.name.rfind("adamw", 0) == 0 ? std::pair{0.01, 1.0} : std::pair{-2.0, 2.0};
}

// The bytes of a device tensor, for comparing two runs bit for bit.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor host = t.contiguous().to(Device::cpu());
  const auto* data = static_cast<const unsigned char*>(host.data_ptr());
  return {data, data + host.nbytes()};
}

// The number of elements off by more than the tolerance (the first few
// printed), so that one case's report says how wrong it is.
// `misaligned`: each Full input starts one element past its allocation.
// `twice`: the kernel runs a second time on the same inputs and must give
// the same bits (the col sums' fixed order of additions).
void expect_equals_interpreter(const testing::GpuKernelCase& c, GpuKernelCache& kernels,
                               bool misaligned = false, bool twice = false) {
  SCOPED_TRACE(c.name + " [" + std::to_string(c.rows) + ", " + std::to_string(c.cols) + "] " +
               c.graph.key() + (misaligned ? " misaligned" : ""));
  Generator gen(0x5eed);
  const auto [lo, hi] = input_range(c);
  std::vector<Values> inputs;
  std::vector<Tensor> device_inputs;
  for (const InputSpec& in : c.graph.inputs()) {
    const int64_t count = input_count(in, c.rows, c.cols);
    inputs.push_back(testing::draw_values(count, in.dtype, lo, hi, gen));
    if (in.shape == ShapeClass::Full && !in.map.identity()) {
      // Rows pitch * cols apart in a buffer of whole rows (RowMap).
      const int64_t entries = (count - c.cols) / (in.map.pitch * c.cols) + 1;
      Values whole(static_cast<size_t>(entries * in.map.pitch * c.cols), 0.0);
      std::copy(inputs.back().begin(), inputs.back().end(), whole.begin());
      const Tensor storage = Tensor::from_doubles(whole, {entries, in.map.pitch * c.cols}, in.dtype)
                                 .to(Device::cuda(0));
      device_inputs.push_back(storage.slice(1, 0, c.cols));
      continue;
    }
    if (misaligned && in.shape == ShapeClass::Full) {
      Values padded = inputs.back();
      padded.insert(padded.begin(), 0.0);
      const Tensor whole = Tensor::from_doubles(padded, {count + 1}, in.dtype).to(Device::cuda(0));
      device_inputs.push_back(whole.slice(0, 1, count + 1).reshape({c.rows, c.cols}));
      continue;
    }
    device_inputs.push_back(Tensor::from_doubles(inputs.back(),
                                                 testing::class_shape(in.shape, c.rows, c.cols),
                                                 in.dtype)
                                .to(Device::cuda(0)));
  }
  const Reference ref = interpret(c.graph, c.rows, c.cols, inputs);
  std::vector<Tensor> outputs;
  try {
    outputs = call_gpu(kernels, c.graph, device_inputs);
  } catch (const Error& e) {
    ADD_FAILURE() << e.what();
    return;
  }
  ASSERT_EQ(outputs.size(), ref.outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    const std::vector<double> got = outputs[o].contiguous().to(Device::cpu()).to_doubles();
    ASSERT_EQ(got.size(), ref.outputs[o].size());
    int64_t wrong = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double want = ref.outputs[o][i];
      ASSERT_TRUE(std::isfinite(want)) << "output " << o << " element " << i;
      const double tolerance = kBoundSlack * kUnitRoundoff * ref.rounding_bound[o][i] + 1e-30;
      if (std::abs(got[i] - want) <= tolerance) continue;
      if (++wrong <= 3) {
        ADD_FAILURE() << "output " << o << " element " << i << ": GPU " << got[i] << ", float64 "
                      << want << ", tolerance " << tolerance;
      }
    }
    EXPECT_EQ(wrong, 0) << "of " << got.size() << " elements of output " << o;
  }
  if (!twice) return;
  const std::vector<Tensor> again = call_gpu(kernels, c.graph, device_inputs);
  for (size_t o = 0; o < outputs.size(); ++o) {
    EXPECT_TRUE(bytes_of(again[o]) == bytes_of(outputs[o])) << "output " << o << " changed";
  }
}

void expect_all_equal_interpreter(const std::vector<testing::GpuKernelCase>& cases,
                                  GpuKernelCache& kernels, bool misaligned = false) {
  for (const testing::GpuKernelCase& c : cases) expect_equals_interpreter(c, kernels, misaligned);
}

TEST(CompiledKernelsGpu, NamedChainsEqualFloat64Interpreter) {
  LT_REQUIRE_GPU();
  for (const testing::GpuKernelCase& c : testing::named_chain_cases()) {
    expect_equals_interpreter(c, cache());
  }
}

TEST(CompiledKernelsGpu, RandomChainsOfFixedSeedsEqualFloat64Interpreter) {
  LT_REQUIRE_GPU();
  for (const testing::GpuKernelCase& c : testing::random_chain_cases()) {
    expect_equals_interpreter(c, cache());
  }
}

// Table lookups (compile/graph.h's Lookup: a constant array of the module)
// at computed indices, clamped, and at u8 codes.
TEST(CompiledKernelsGpu, RandomChainsWithLookupsEqualFloat64Interpreter) {
  LT_REQUIRE_GPU();
  for (const testing::GpuKernelCase& c : testing::random_lookup_chain_cases()) {
    expect_equals_interpreter(c, cache());
    expect_equals_interpreter(c, cache_by_four());
  }
}

// f16 storage and casts and int8 inputs (RandomChain's `halves`), in the
// plain and packed forms; the named f16 and int8 chains run in every test
// of the named chains.
TEST(CompiledKernelsGpu, RandomChainsOfF16AndInt8EqualFloat64Interpreter) {
  LT_REQUIRE_GPU();
  expect_all_equal_interpreter(testing::random_half_chain_cases(), cache());
  expect_all_equal_interpreter(testing::random_half_chain_cases(), cache_packed());
}

// The same cases with the elementwise kernels' four-elements form (their
// whole steps and their checked last steps: the shapes are not multiples
// of a step's 1024 elements).
TEST(CompiledKernelsGpu, FourElementsPerThreadEqualFloat64Interpreter) {
  LT_REQUIRE_GPU();
  expect_all_equal_interpreter(testing::named_chain_cases(), cache_by_four());
  expect_all_equal_interpreter(testing::random_chain_cases(), cache_by_four());
}

// The packed form: the named chains' 1000 columns (and AdamW's one row of
// 67,000) take its vector path, the random chains' columns mostly its
// one-element loop (not multiples of 8), and a case whose buffers start
// one element past an aligned address takes that loop too.
TEST(CompiledKernelsGpu, PackedEightPerThreadEqualFloat64Interpreter) {
  LT_REQUIRE_GPU();
  expect_all_equal_interpreter(testing::named_chain_cases(), cache_packed());
  expect_all_equal_interpreter(testing::random_chain_cases(), cache_packed());
  expect_all_equal_interpreter(testing::random_lookup_chain_cases(), cache_packed());
  expect_all_equal_interpreter(testing::named_chain_cases(), cache_packed(), /*misaligned=*/true);
}

// Gradients of [cols] inputs summed in the kernel (compile/gpu_mlir.h's
// ColSums form: blocks of rows, then the partials summed in block order):
// the bias + GELU and norm backward graphs and a graph with a pitched input,
// a row reduction and a row output beside two col sums, on rows 0, 1, a
// few, not a multiple of a block's, and 16384, columns fewer than a warp,
// 768, not a multiple of 8 and more than one tile; each twice, bit for bit.
TEST(CompiledKernelsGpu, ColSumsEqualFloat64InterpreterAndRepeatBitForBit) {
  LT_REQUIRE_GPU();
  for (const testing::ColSumCase& c : testing::col_sum_cases()) {
    for (const auto& [rows, cols] : c.shapes) {
      expect_equals_interpreter({c.name, c.graph, rows, cols}, cache_packed(), false, true);
    }
  }
}

// Two or four rows an iteration (GpuForms::col_sum_rows) add every term
// in the same order as one: the same bits as the one-row kernels, and so
// the interpreter's bound too.
TEST(CompiledKernelsGpu, ColSumsSeveralRowsAnIterationEqualOneRowBitForBit) {
  LT_REQUIRE_GPU();
  for (int rows_at_once : {2, 4}) {
    GpuKernelCache several(testing::gpu_test_kernel_folder(),
                           testing::col_sum_rows_target(rows_at_once));
    for (const testing::ColSumCase& c : testing::col_sum_cases()) {
      // A graph with row reductions keeps one row (GpuForms::col_sum_rows):
      // the same kernel.
      if (gpu_forms_for(c.graph, several.target().forms).col_sum_rows == 1) continue;
      for (const auto& [rows, cols] : c.shapes) {
        SCOPED_TRACE(c.name + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "], " +
                     std::to_string(rows_at_once) + " rows an iteration");
        Generator gen(11);
        std::vector<Tensor> in;
        for (const InputSpec& spec : c.graph.inputs()) {
          const int64_t pitch = spec.shape == ShapeClass::Full ? spec.map.pitch : 1;
          const Tensor whole = Tensor::uniform(testing::class_shape(spec.shape, rows, cols * pitch),
                                               gen, -1, 1, spec.dtype)
                                   .to(Device::cuda(0));
          in.push_back(pitch == 1 ? whole : whole.slice(1, 0, cols));
        }
        const std::vector<Tensor> one = call_gpu(cache_packed(), c.graph, in);
        const std::vector<Tensor> two = call_gpu(several, c.graph, in);
        ASSERT_EQ(one.size(), two.size());
        for (size_t o = 0; o < one.size(); ++o) {
          EXPECT_EQ(one[o].to(Device::cpu()).to_doubles(), two[o].to(Device::cpu()).to_doubles())
              << "output " << o;
        }
      }
      for (const auto& [rows, cols] : c.shapes) {
        expect_equals_interpreter({c.name, c.graph, rows, cols}, several, false, false);
      }
    }
  }
}

// A division is a product with rcp.approx.ftz of the divisor, scaled by
// 2^64 or 2^-64 where ftz would flush it or its reciprocal (subnormal and
// huge divisors: 8-bit AdamW's subnormal absmax): within three roundings of
// f32's x / y (and the subnormal results' spacing), the same infinities.
TEST(CompiledKernelsGpu, DividesBySubnormalAndHugeValuesWithinThreeRoundings) {
  LT_REQUIRE_GPU();
  const KernelGraph g = testing::division_graph();
  const std::vector<float> divisors = {1e-39f, -3e-40f,     1.2e-38f,   0x1.0p-126f,
                                       3e38f,  -0x1.0p127f, 0x1.0p126f, 1.5f,
                                       -7.0f,  1e-30f,      1e30f,      0.3f};
  std::vector<double> x, y;
  Generator gen(17);
  for (int repeat = 0; repeat < 100; ++repeat) {
    for (float d : divisors) {
      x.push_back(static_cast<float>(gen.uniform() * 4 - 2));
      y.push_back(d);
    }
  }
  const int64_t cols = static_cast<int64_t>(divisors.size()), rows = 100;
  const Tensor xs = Tensor::from_doubles(x, {rows, cols}, DType::F32).to(Device::cuda(0));
  const Tensor ys = Tensor::from_doubles(y, {rows, cols}, DType::F32).to(Device::cuda(0));
  for (GpuKernelCache* kernels : {&cache(), &cache_packed()}) {
    const std::vector<double> got =
        call_gpu(*kernels, g, {xs, ys})[0].to(Device::cpu()).to_doubles();
    for (size_t i = 0; i < got.size(); ++i) {
      const float want = static_cast<float>(x[i]) / static_cast<float>(y[i]);
      if (std::isinf(want)) {
        EXPECT_EQ(got[i], static_cast<double>(want)) << x[i] << " / " << y[i];
      } else {
        EXPECT_NEAR(got[i], want, 3 * 0x1.0p-24 * std::abs(want) + 0x1.0p-149)
            << x[i] << " / " << y[i];
      }
    }
  }
}

TEST(CompiledKernelsGpu, RunsOnTheCurrentStream) {
  LT_REQUIRE_GPU();
  const testing::GpuKernelCase c = testing::named_chain_cases().front();  // swiglu f32
  const Stream stream = Stream::create(Device::cuda(0));
  StreamGuard guard(stream);
  Generator gen(3);
  std::vector<Tensor> in;
  for (const InputSpec& spec : c.graph.inputs()) {
    in.push_back(
        Tensor::uniform(testing::class_shape(spec.shape, c.rows, c.cols), gen, -1, 1, spec.dtype)
            .to(Device::cuda(0)));
  }
  const std::vector<Tensor> first = call_gpu(cache(), c.graph, in);
  const std::vector<Tensor> second = call_gpu(cache(), c.graph, in);
  stream.synchronize();
  EXPECT_EQ(first[0].to(Device::cpu()).to_doubles(), second[0].to(Device::cpu()).to_doubles());
  EXPECT_GE(cache().stats().memory_hits, 1);
}

}  // namespace
}  // namespace lt::compile
