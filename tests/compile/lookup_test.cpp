// The IR's table lookup (compile/graph.h's Lookup): its key holds the
// table's values, the float64 interpreter reads the table as the graph says
// (truncated, clamped index; NaN reads entry 0), and the compiled kernel
// reads what a direct index into the table gives, for every u8 code and
// for indices out of the table, NaN and infinities. Two tables are two
// kernels in the cache, each reading its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "compile/compiler_info.h"
#include "compile/interpret.h"
#include "compile/jit_harness.h"
#include "compile/kernel_cache.h"
#include "train/train_helpers.h"

namespace lt::compile {
namespace {

namespace fs = std::filesystem;

// 0.5 * k - 3 for k = 0..size-1: every entry distinct and exact in f32.
std::vector<float> ramp(size_t size) {
  std::vector<float> table(size);
  for (size_t k = 0; k < size; ++k) table[k] = 0.5f * static_cast<float>(k) - 3.0f;
  return table;
}

KernelGraph lookup_graph(const std::vector<float>& table, DType index_dtype) {
  KernelGraph g;
  g.output(g.lookup(table, g.input(ShapeClass::Full, index_dtype)), DType::F32);
  return g;
}

// Indices in and out of a table of `size` entries, and the entry each reads.
struct IndexCase {
  double index;
  size_t entry;
};
std::vector<IndexCase> index_cases(size_t size) {
  const double inf = std::numeric_limits<double>::infinity();
  const double last = static_cast<double>(size - 1);
  std::vector<IndexCase> cases = {{0, 0},
                                  {0.999, 0},
                                  {1, 1},
                                  {2.5, 2},
                                  {last, size - 1},
                                  {last + 0.5, size - 1},
                                  {last + 1, size - 1},
                                  {1e30, size - 1},
                                  {inf, size - 1},
                                  {-0.5, 0},
                                  {-7, 0},
                                  {-inf, 0},
                                  {std::nan(""), 0}};
  for (IndexCase& c : cases) c.entry = std::min(c.entry, size - 1);  // 1 and 2 past a short table
  return cases;
}

TEST(KernelGraphLookup, KeyHoldsTheTableValues) {
  const std::vector<float> table = ramp(5);
  std::vector<float> other = table;
  other[3] = std::nextafter(other[3], 10.0f);  // one ulp apart
  std::vector<float> negative_zero = {0.0f}, zero = {-0.0f};
  EXPECT_EQ(lookup_graph(table, DType::U8).key(), lookup_graph(ramp(5), DType::U8).key());
  EXPECT_NE(lookup_graph(table, DType::U8).key(), lookup_graph(other, DType::U8).key());
  EXPECT_NE(lookup_graph(table, DType::U8).key(), lookup_graph(ramp(6), DType::U8).key());
  EXPECT_NE(lookup_graph(zero, DType::U8).key(), lookup_graph(negative_zero, DType::U8).key());
  // A table looked up twice is held once; another is a second table.
  KernelGraph g;
  const Value i = g.input(ShapeClass::Full, DType::U8);
  g.output(g.add(g.lookup(table, i), g.lookup(ramp(5), i)), DType::F32);
  EXPECT_EQ(g.tables().size(), 1u);
  g.output(g.lookup(other, i), DType::F32);
  EXPECT_EQ(g.tables().size(), 2u);
  EXPECT_THROW(g.lookup(std::vector<float>{}, i), Error);
}

TEST(KernelGraphLookup, InterpreterReadsTheClampedTruncatedIndex) {
  const std::vector<float> table = ramp(7);
  const std::vector<IndexCase> cases = index_cases(table.size());
  Values indices;
  for (const IndexCase& c : cases) indices.push_back(c.index);
  const Reference ref = interpret(lookup_graph(table, DType::F32), 1,
                                  static_cast<int64_t>(indices.size()), {indices});
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(ref.outputs[0][i], table[cases[i].entry]) << "index " << cases[i].index;
    // An exact index adds no error: the bound is the f32 store's only.
    EXPECT_LE(ref.rounding_bound[0][i], std::abs(table[cases[i].entry]))
        << "index " << cases[i].index;
  }
}

TEST(KernelGraphLookup, ComputedIndexNearAnEntryBoundBothEntries) {
  // 3 * (1/3) lands within rounding of 1: entry 0 or 1, 0.5 apart.
  const std::vector<float> table = ramp(4);
  KernelGraph g;
  const Value x = g.input(ShapeClass::Full, DType::F32);
  g.output(g.lookup(table, g.mul(x, g.constant(3.0))), DType::F32);
  const Reference ref = interpret(g, 1, 1, {{1.0 / 3.0}});
  EXPECT_GE(ref.rounding_bound[0][0] * 0x1.0p-24, 0.5);
}

class CompiledLookup : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  }
};

TEST_F(CompiledLookup, ReadsEveryCodesEntry) {
  const std::vector<float> table = ramp(256);
  const KernelGraph g = lookup_graph(table, DType::U8);
  Values codes;
  for (int k = 255; k >= 0; --k) codes.push_back(k);
  const std::vector<Values> got =
      testing::run_compiled(*compile_cpu(g), g, 16, 16, std::vector<Values>{codes});
  for (size_t i = 0; i < codes.size(); ++i) {
    ASSERT_EQ(got[0][i], table[static_cast<size_t>(codes[i])]) << "code " << codes[i];
  }
}

TEST_F(CompiledLookup, ClampsIndicesOutsideTheTable) {
  for (size_t size : {1u, 3u, 300u}) {
    const std::vector<float> table = ramp(size);
    const std::vector<IndexCase> cases = index_cases(size);
    Values indices;
    for (const IndexCase& c : cases) indices.push_back(c.index);
    const KernelGraph g = lookup_graph(table, DType::F32);
    const std::vector<Values> got = testing::run_compiled(
        *compile_cpu(g), g, 1, static_cast<int64_t>(indices.size()), {indices});
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(got[0][i], table[cases[i].entry]) << "size " << size << " index " << indices[i];
    }
  }
}

TEST_F(CompiledLookup, TwoTablesAreTwoCacheEntriesEachReadingItsOwn) {
  train::testing::TempDir dir("lookup-cache");
  const std::vector<float> first = ramp(16);
  std::vector<float> second = first;
  second[5] = 100.0f;
  const KernelGraph a = lookup_graph(first, DType::U8), b = lookup_graph(second, DType::U8);
  const Values codes = {5, 4, 5, 15};
  for (int run = 0; run < 2; ++run) {  // the second run loads both from the folder
    KernelCache cache(dir.path().string());
    const std::vector<Values> got_a = testing::run_compiled(*cache.get(a), a, 1, 4, {codes});
    const std::vector<Values> got_b = testing::run_compiled(*cache.get(b), b, 1, 4, {codes});
    EXPECT_EQ(got_a[0], (Values{-0.5, -1, -0.5, 4.5})) << "run " << run;
    EXPECT_EQ(got_b[0], (Values{100, -1, 100, 4.5})) << "run " << run;
    EXPECT_EQ(cache.stats().compiled, run == 0 ? 2 : 0);
    EXPECT_EQ(cache.stats().loaded_from_disk, run == 0 ? 0 : 2);
  }
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path()))
    entries += e.path().extension() == ".kernel";
  EXPECT_EQ(entries, 2u);
}

}  // namespace
}  // namespace lt::compile
