// The kernel cache: one compile per key in a process; with a folder, a
// second cache (a second run) compiles nothing; damaged entries are
// compiled again and rewritten, never run. Results are checked against the
// float64 interpreter, so a wrongly loaded kernel fails too.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "compile/chains.h"
#include "compile/compiler_info.h"
#include "compile/interpret.h"
#include "compile/jit_harness.h"
#include "compile/kernel_cache.h"
#include "support/scoped_env.h"
#include "train/train_helpers.h"

namespace lt::compile {
namespace {

namespace fs = std::filesystem;
using train::testing::TempDir;

class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  }

  // Runs the kernel on fixed inputs and compares with the interpreter.
  static void expect_computes(const CpuKernel& kernel, const KernelGraph& graph) {
    const int64_t rows = 3, cols = 17;
    Generator gen(5);
    std::vector<Values> inputs;
    for (const InputSpec& in : graph.inputs()) {
      inputs.push_back(
          testing::draw_values(element_count(in.shape, rows, cols), in.dtype, -2, 2, gen));
    }
    const Reference ref = interpret(graph, rows, cols, inputs);
    const std::vector<Values> got = testing::run_compiled(kernel, graph, rows, cols, inputs);
    for (size_t o = 0; o < got.size(); ++o) {
      for (size_t i = 0; i < got[o].size(); ++i) {
        EXPECT_LE(std::abs(got[o][i] - ref.outputs[o][i]),
                  kBoundSlack * 0x1.0p-24 * ref.rounding_bound[o][i] + 1e-30)
            << "output " << o << " element " << i;
      }
    }
  }

  static std::vector<fs::path> entries(const fs::path& folder) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(folder)) out.push_back(e.path());
    return out;
  }

  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void write(const fs::path& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
};

TEST_F(KernelCacheTest, InMemoryCompilesEachKeyOnce) {
  KernelCache cache;
  const KernelGraph f32 = swiglu_forward(DType::F32);
  auto a = cache.get(f32);
  auto b = cache.get(swiglu_forward(DType::F32));
  EXPECT_EQ(a.get(), b.get());
  auto c = cache.get(swiglu_forward(DType::BF16));
  EXPECT_NE(a.get(), c.get());
  const KernelCacheStats s = cache.stats();
  EXPECT_EQ(s.compiled, 2);
  EXPECT_EQ(s.memory_hits, 1);
  EXPECT_GT(s.compile_seconds, 0.0);
  expect_computes(*a, f32);
}

TEST_F(KernelCacheTest, ASecondRunCompilesNothing) {
  TempDir dir("kernel_cache_second_run");
  const KernelGraph graph = residual_rms_norm_forward(DType::BF16, 1e-5);
  {
    KernelCache first(dir.path().string());
    first.get(graph);
    EXPECT_EQ(first.stats().compiled, 1);
    EXPECT_EQ(first.stats().loaded_from_disk, 0);
  }
  ASSERT_EQ(entries(dir.path()).size(), 1u);
  KernelCache second(dir.path().string());
  auto kernel = second.get(graph);
  EXPECT_EQ(second.stats().compiled, 0);
  EXPECT_EQ(second.stats().loaded_from_disk, 1);
  expect_computes(*kernel, graph);
}

TEST_F(KernelCacheTest, DamagedEntriesAreRebuiltNotTrusted) {
  TempDir dir("kernel_cache_damaged");
  const KernelGraph graph = residual_rms_norm_forward(DType::F32, 1e-5);
  KernelCache(dir.path().string()).get(graph);
  const fs::path entry = entries(dir.path()).at(0);
  const std::string whole = read(entry);
  // The object starts after the four header lines.
  size_t object_at = 0;
  for (int line = 0; line < 4; ++line) object_at = whole.find('\n', object_at) + 1;
  const std::string header = whole.substr(0, object_at);

  std::string flipped = whole;
  flipped[object_at + (whole.size() - object_at) / 2] ^= 0x10;
  std::string other_key = whole;
  other_key.replace(whole.find('\n') + 1, 3, "xyz");
  // A header whose checksum matches an object that is not one.
  std::string garbage(whole.size() - object_at, 'x');
  std::ostringstream fake_header;
  {
    std::istringstream lines(header);
    std::string magic, key, size, checksum;
    std::getline(lines, magic);
    std::getline(lines, key);
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char ch : garbage) h = (h ^ ch) * 0x100000001b3ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    fake_header << magic << '\n' << key << '\n' << garbage.size() << '\n' << hex << '\n';
  }
  const std::vector<std::pair<const char*, std::string>> damages = {
      {"a flipped byte", flipped},
      {"truncated", whole.substr(0, whole.size() - 100)},
      {"only the header", header},
      {"another key", other_key},
      {"trailing bytes", whole + "x"},
      {"an object that does not link", fake_header.str() + garbage},
      {"empty", ""},
  };
  for (const auto& [what, bytes] : damages) {
    SCOPED_TRACE(what);
    write(entry, bytes);
    KernelCache cache(dir.path().string());
    auto kernel = cache.get(graph);
    EXPECT_EQ(cache.stats().rebuilt, 1);
    EXPECT_EQ(cache.stats().compiled, 1);
    EXPECT_EQ(cache.stats().loaded_from_disk, 0);
    expect_computes(*kernel, graph);
    EXPECT_EQ(read(entry), whole);  // rewritten whole
    KernelCache after(dir.path().string());
    after.get(graph);
    EXPECT_EQ(after.stats().loaded_from_disk, 1);
  }
}

TEST_F(KernelCacheTest, ThreadsAskingAtOnceShareOneCompile) {
  KernelCache cache;
  const KernelGraph graph = softmax_forward(DType::F32);
  std::vector<std::shared_ptr<const CpuKernel>> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = cache.get(graph); });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(cache.stats().compiled, 1);
  EXPECT_EQ(cache.stats().memory_hits, 3);
  for (const auto& k : got) EXPECT_EQ(k.get(), got[0].get());
  expect_computes(*got[0], graph);
}

TEST(KernelCacheFolder, FollowsXdgCacheHomeElseHome) {
  {
    lt::testing::ScopedEnv xdg("XDG_CACHE_HOME", "/somewhere/cache");
    EXPECT_EQ(KernelCache::default_folder(), "/somewhere/cache/lazytrain/kernels");
  }
  lt::testing::ScopedEnv xdg("XDG_CACHE_HOME", nullptr);
  lt::testing::ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(KernelCache::default_folder(), "/home/someone/.cache/lazytrain/kernels");
}

}  // namespace
}  // namespace lt::compile
