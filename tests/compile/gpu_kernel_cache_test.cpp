// The cubins' disk cache (compile/gpu_kernel_cache.h), no GPU needed: a
// kernel is compiled (MLIR, then CUDA's ptxas) once, written, and loaded
// back by a later cache; a damaged entry is compiled again, never trusted;
// a build that cannot compile names the entry it could not find.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "autograd/fused_rope.h"
#include "col_sum_cases.h"
#include "compile/cache_entry.h"
#include "compile/chains.h"
#include "compile/compiler_info.h"
#include "compile/cross_entropy_chain.h"
#include "compile/cubin.h"
#include "compile/gpu_kernel_cache.h"
#include "core/error.h"
#include "models/compiled_blocks.h"
#include "optim/compiled_adamw8bit.h"
#include "support/fused_program_cases.h"
#include "support/gpu_kernel_cases.h"
#include "support/unfused_graphs.h"
#include "train/train_helpers.h"

namespace lt::compile {
namespace {

namespace fs = std::filesystem;

bool can_compile_gpu_kernels(std::string& why) {
  if (!compiler_info().built_in) {
    why = "built without MLIR (-DLT_MLIR=OFF)";
  } else if (!fs::exists(PtxTarget{}.libdevice)) {
    why = "no CUDA libdevice";
  } else {
    try {
      find_ptxas();
      return true;
    } catch (const Error& e) {
      why = e.what();
    }
  }
  return false;
}

#define LT_REQUIRE_GPU_COMPILER()                           \
  do {                                                      \
    std::string why;                                        \
    if (!can_compile_gpu_kernels(why)) GTEST_SKIP() << why; \
  } while (0)

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(GpuKernelCache, CompilesOnceWritesTheCubinAndALaterCacheLoadsIt) {
  LT_REQUIRE_GPU_COMPILER();
  train::testing::TempDir dir("gpu_cache");
  const KernelGraph softmax = softmax_forward(DType::BF16);
  std::string cubin;
  fs::path entry;
  {
    GpuKernelCache cache(dir.path().string());
    const auto binary = cache.binary(softmax);
    EXPECT_EQ(binary->form, GpuLaunchForm::RowPerBlock);
    EXPECT_EQ(binary->cubin.compare(0, 4,
                                    "\x7f"
                                    "ELF"),
              0);
    EXPECT_EQ(cache.binary(softmax), binary);  // in memory the second time
    EXPECT_EQ(cache.stats().compiled, 1);
    EXPECT_EQ(cache.stats().memory_hits, 1);
    cubin = binary->cubin;
    entry = cache.entry_path(softmax);
  }
  EXPECT_EQ(entry.extension(), ".cubin");
  ASSERT_TRUE(fs::exists(entry));
  GpuKernelCache later(dir.path().string());
  EXPECT_EQ(later.binary(softmax)->cubin, cubin);
  EXPECT_EQ(later.stats().compiled, 0);
  EXPECT_EQ(later.stats().loaded_from_disk, 1);

  // The key holds the chip and the PTX ISA: another target is another entry.
  PtxTarget sm80;
  sm80.chip = "sm_80";
  EXPECT_NE(GpuKernelCache(dir.path().string(), sm80).entry_path(softmax), entry);
  PtxTarget ptx80;
  ptx80.features = "+ptx80";
  EXPECT_NE(GpuKernelCache(dir.path().string(), ptx80).entry_path(softmax), entry);
  // Elements per thread shape elementwise kernels only: a softmax is the same.
  PtxTarget four;
  four.forms.elements_per_thread = 4;
  GpuKernelCache by_four(dir.path().string(), four);
  EXPECT_EQ(by_four.entry_path(softmax), entry);
  const KernelGraph swiglu = swiglu_forward(DType::BF16);
  EXPECT_NE(by_four.entry_path(swiglu), later.entry_path(swiglu));
  EXPECT_EQ(by_four.binary(swiglu)->elements_per_thread, 4);
}

// The ColSums form's entry: read back as that form, with the buffers its
// launch replaces by partials taken from the graph (the bias's gradient,
// after the two inputs and dx); an entry of another form for that graph
// is compiled again.
TEST(GpuKernelCache, AColSumKernelRoundTripsWithItsForm) {
  LT_REQUIRE_GPU_COMPILER();
  train::testing::TempDir dir("gpu_cache_col_sums");
  const KernelGraph backward = testing::bias_gelu_backward(DType::BF16);
  std::string cubin;
  {
    GpuKernelCache cache(dir.path().string());
    const auto binary = cache.binary(backward);
    EXPECT_EQ(binary->form, GpuLaunchForm::ColSums);
    EXPECT_EQ(binary->col_sum_buffers, std::vector<size_t>{4});
    cubin = binary->cubin;
    write_cache_entry(cache.entry_path(backward), cache.disk_key(backward),
                      "row_per_block 256 1\n" + cubin);
  }
  {
    GpuKernelCache cache(dir.path().string());
    EXPECT_EQ(cache.binary(backward)->form, GpuLaunchForm::ColSums);
    EXPECT_EQ(cache.stats().rebuilt, 1);
  }
  GpuKernelCache later(dir.path().string());
  const auto binary = later.binary(backward);
  EXPECT_EQ(later.stats().loaded_from_disk, 1);
  EXPECT_EQ(binary->form, GpuLaunchForm::ColSums);
  EXPECT_EQ(binary->col_sum_buffers, std::vector<size_t>{4});
  EXPECT_EQ(binary->cubin, cubin);
  EXPECT_NE(later.disk_key(backward).find(kGpuAbi), std::string::npos);
}

TEST(GpuKernelCache, ADamagedEntryIsCompiledAgainAndRewritten) {
  LT_REQUIRE_GPU_COMPILER();
  train::testing::TempDir dir("gpu_cache_damaged");
  const KernelGraph swiglu = swiglu_forward(DType::F32);
  fs::path entry;
  std::string key, whole, cubin;
  {
    GpuKernelCache cache(dir.path().string());
    cubin = cache.binary(swiglu)->cubin;
    entry = cache.entry_path(swiglu);
    key = cache.disk_key(swiglu);
    whole = read_bytes(entry);
  }
  // Damage to the bytes (the checksum or the size catches it), and whole
  // entries, checksum and all, that hold something other than a kernel.
  const std::vector<std::pair<const char*, std::function<void()>>> damages = {
      {"a flipped byte in the cubin",
       [&] {
         std::string b = whole;
         b[b.size() - 100] ^= 0x55;
         write_bytes(entry, b);
       }},
      {"cut short", [&] { write_bytes(entry, whole.substr(0, whole.size() / 2)); }},
      {"an unknown launch form", [&] { write_cache_entry(entry, key, "tiled 256 1\n" + cubin); }},
      {"another block size", [&] { write_cache_entry(entry, key, "elementwise 128 1\n" + cubin); }},
      {"no elements per thread",
       [&] { write_cache_entry(entry, key, "elementwise 256 0\n" + cubin); }},
      {"not an ELF file", [&] { write_cache_entry(entry, key, "elementwise 256 1\nPTX"); }}};
  for (const auto& [what, damage] : damages) {
    SCOPED_TRACE(what);
    damage();
    GpuKernelCache cache(dir.path().string());
    EXPECT_EQ(cache.binary(swiglu)->cubin, cubin);
    EXPECT_EQ(cache.stats().rebuilt, 1);
    EXPECT_EQ(cache.stats().compiled, 1);
    EXPECT_EQ(cache.stats().loaded_from_disk, 0);
    EXPECT_EQ(read_bytes(entry), whole);  // rewritten whole
  }
}

TEST(GpuKernelCache, AKernelThatIsNotThereAndCannotBeCompiledNamesItsEntry) {
  // Without MLIR (the GPU machine's build) compiling fails for any kernel;
  // with it, a chip that neither MLIR nor ptxas knows does the same.
  train::testing::TempDir dir("gpu_cache_missing");
  PtxTarget unknown;
  unknown.chip = "sm_1";
  GpuKernelCache cache(dir.path().string(), unknown);
  const KernelGraph gelu = gelu_tanh_forward(DType::BF16);
  try {
    cache.binary(gelu);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("is not in the kernel cache"), std::string::npos) << message;
    EXPECT_NE(message.find(cache.entry_path(gelu).string()), std::string::npos) << message;
    EXPECT_NE(message.find(gelu.key()), std::string::npos) << message;
  }
}

// Not a check: with LT_PREBUILD_GPU_KERNELS=<folder>, compiles every kernel
// the GPU tests and the benchmark run (tests/support/gpu_kernel_cases.h,
// tests/support/fused_program_cases.h, col_sum_cases.h)
// into <folder>, for a GPU machine whose build has no MLIR
// (docs/compiler.md, "Kernels for a machine without MLIR").
TEST(GpuKernelPrebuild, FillsTheFolderNamedByLtPrebuildGpuKernels) {
  const char* folder = std::getenv("LT_PREBUILD_GPU_KERNELS");
  if (folder == nullptr || *folder == '\0') GTEST_SKIP() << "LT_PREBUILD_GPU_KERNELS is not set";
  LT_REQUIRE_GPU_COMPILER();
  GpuKernelCache cache(folder);
  GpuKernelCache by_four(folder, testing::four_elements_target());
  GpuKernelCache packed(folder, testing::packed_eight_target());
  std::vector<testing::GpuKernelCase> cases = testing::named_chain_cases();
  for (testing::GpuKernelCase& c : testing::random_chain_cases()) cases.push_back(std::move(c));
  for (testing::GpuKernelCase& c : testing::random_lookup_chain_cases()) {
    cases.push_back(std::move(c));
  }
  for (testing::GpuKernelCase& c : testing::random_half_chain_cases()) {
    cases.push_back(std::move(c));
  }
  cases.push_back({"division", testing::division_graph(), 0, 0});
  // tests/gpu/compiled_kernels_gpu_test.cpp's col sums (ColSums form)
  for (testing::ColSumCase& c : testing::col_sum_cases()) {
    cases.push_back({c.name, std::move(c.graph), 0, 0});
  }
  for (DType dtype : {DType::F32, DType::BF16}) {  // tests/gpu/fused_programs_gpu_test.cpp's
    for (KernelGraph& g : testing::gpt2_mlp_program_graphs(dtype)) {
      cases.push_back({"GPT-2's MLP program", std::move(g), 0, 0});
    }
  }
  // tests/gpu/compiled_kernels_gpu_bench.cpp's per-op sequences: one kernel
  // per op of each named chain without row maps
  for (const testing::GpuKernelCase& c : testing::named_chain_cases()) {
    const std::vector<InputSpec>& inputs = c.graph.inputs();
    if (std::any_of(inputs.begin(), inputs.end(),
                    [](const InputSpec& in) { return !in.map.identity(); })) {
      continue;
    }
    for (testing::UnfusedKernel& k : testing::one_kernel_per_op(c.graph).kernels) {
      cases.push_back({c.name + ", one op", std::move(k.graph), 0, 0});
    }
  }
  // tests/gpu/compiled_kernels_gpu_bench.cpp's RoPE (32 heads)
  cases.push_back({"the chain bench's RoPE", autograd::rope_kernel_graph(DType::BF16, 32), 0, 0});
  for (DType dtype : {DType::F32, DType::BF16}) {  // tests/gpu/fused_programs_gpu_test.cpp's
    for (KernelGraph& g : autograd::testing::fused_program_kernel_graphs(dtype)) {
      cases.push_back({"a fused program's chain", std::move(g), 0, 0});
    }
    // tests/gpu/compiled_adamw8bit_gpu_test.cpp's
    cases.push_back({"8-bit AdamW", optim::adamw8bit_kernel_graph(dtype, true), 0, 0});
    // tests/gpu/cross_entropy_chain_gpu_test.cpp's
    cases.push_back({"cross-entropy forward", cross_entropy_forward_graph(dtype), 0, 0});
    cases.push_back({"cross-entropy backward", cross_entropy_backward_graph(dtype), 0, 0});
  }
  for (const testing::GpuKernelCase& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_NO_THROW(cache.binary(c.graph));
  }
  // The elementwise ones' second and third forms, and the training path's
  // target (KernelCache::gpu() reads those: the fused programs' GPU test).
  GpuKernelCache training(folder, training_gpu_target());
  for (const testing::GpuKernelCase& c : cases) {
    SCOPED_TRACE(c.name + ", four elements a thread");
    ASSERT_NO_THROW(by_four.binary(c.graph));
    ASSERT_NO_THROW(packed.binary(c.graph));
    ASSERT_NO_THROW(training.binary(c.graph));
  }
  // The col sums with two and four rows an iteration (the GPU test and the
  // bench compare them with one).
  GpuKernelCache two_rows(folder, testing::col_sum_rows_target(2));
  GpuKernelCache four_rows(folder, testing::col_sum_rows_target(4));
  for (const testing::ColSumCase& c : testing::col_sum_cases()) {
    SCOPED_TRACE(c.name + ", two and four rows an iteration");
    ASSERT_NO_THROW(two_rows.binary(c.graph));
    ASSERT_NO_THROW(four_rows.binary(c.graph));
  }
  uintmax_t bytes = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(folder)) {
    if (e.path().extension() == ".cubin") bytes += e.file_size();
  }
  KernelCacheStats stats = cache.stats();
  stats.compiled += by_four.stats().compiled;
  stats.loaded_from_disk += by_four.stats().loaded_from_disk;
  stats.compile_seconds += by_four.stats().compile_seconds;
  for (const GpuKernelCache* more : {&packed, &training, &two_rows, &four_rows}) {
    stats.compiled += more->stats().compiled;
    stats.loaded_from_disk += more->stats().loaded_from_disk;
    stats.compile_seconds += more->stats().compile_seconds;
  }
  std::printf(
      "%zu graphs (elementwise ones in three forms) in %s: %lld kernels compiled (%.1f s), %lld "
      "already there; %.1f MB of cubins\n",
      cases.size(), folder, static_cast<long long>(stats.compiled), stats.compile_seconds,
      static_cast<long long>(stats.loaded_from_disk), static_cast<double>(bytes) / 1e6);
}

// The bf16 kernels of training with train.compile on a GPU
// (models::block_kernel_graphs): the model fixtures' (for
// tests/gpu/train_compile_gpu_test.cpp) and those of each model folder
// listed in LT_PREBUILD_MODELS (':'-separated, with a config.json; for
// bench/compile_e2e.sh).
TEST(GpuKernelPrebuild, TrainingKernelsOfTheFixturesAndLtPrebuildModels) {
  const char* folder = std::getenv("LT_PREBUILD_GPU_KERNELS");
  if (folder == nullptr || *folder == '\0') GTEST_SKIP() << "LT_PREBUILD_GPU_KERNELS is not set";
  LT_REQUIRE_GPU_COMPILER();
  std::vector<fs::path> models;
  for (const char* family : {"llama", "mistral", "qwen2", "qwen3", "gpt2"}) {
    models.push_back(fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families" / family);
  }
  if (const char* listed = std::getenv("LT_PREBUILD_MODELS")) {
    std::istringstream in(listed);
    for (std::string path; std::getline(in, path, ':');) {
      if (!path.empty()) models.emplace_back(path);
    }
  }
  // The training path's target (KernelCache::gpu()).
  GpuKernelCache cache(folder, training_gpu_target());
  for (const fs::path& model : models) {
    SCOPED_TRACE(model.string());
    const models::ModelConfig config = models::ModelConfig::from_file(model / "config.json");
    const std::vector<KernelGraph> graphs = models::block_kernel_graphs(config, DType::BF16);
    EXPECT_FALSE(graphs.empty());
    for (const KernelGraph& g : graphs) ASSERT_NO_THROW(cache.binary(g)) << g.key();
  }
  const KernelCacheStats stats = cache.stats();
  std::printf("training kernels of %zu models in %s: %lld compiled (%.1f s), %lld already there\n",
              models.size(), folder, static_cast<long long>(stats.compiled), stats.compile_seconds,
              static_cast<long long>(stats.loaded_from_disk));
}

}  // namespace
}  // namespace lt::compile
