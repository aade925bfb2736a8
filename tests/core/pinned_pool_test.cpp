// The pinned pool's policy with ordinary host memory (the CPU build's
// stand-in): size classes, reuse, the limit and its error. Reuse guarded by
// events on CUDA streams is tested on the GPU (tests/gpu).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "core/pinned_pool.h"
#include "core/tensor.h"

namespace lt {
namespace {

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

PinnedHostPool host_pool(size_t limit = 0) {
  PinnedPoolConfig config;
  config.limit_bytes = limit;
  return PinnedHostPool(false, config);
}

TEST(PinnedHostPool, SizeClassesArePowersOfTwoThenSixteenMiBSteps) {
  PinnedHostPool pool(false, {});
  EXPECT_EQ(pool.class_size(0), 4 * KiB);
  EXPECT_EQ(pool.class_size(1), 4 * KiB);
  EXPECT_EQ(pool.class_size(4 * KiB), 4 * KiB);
  EXPECT_EQ(pool.class_size(4 * KiB + 1), 8 * KiB);
  EXPECT_EQ(pool.class_size(5 * MiB), 8 * MiB);
  EXPECT_EQ(pool.class_size(64 * MiB), 64 * MiB);
  EXPECT_EQ(pool.class_size(64 * MiB + 1), 80 * MiB);
  EXPECT_EQ(pool.class_size(1000 * MiB), 1008 * MiB);
}

TEST(PinnedHostPool, ReusesAFreedBufferOfTheSameClass) {
  PinnedHostPool pool(false, {});
  EXPECT_FALSE(pool.page_locked());
  void* a = pool.allocate(5000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 0x5a, 5000);  // really memory
  pool.deallocate(a, 5000);
  void* b = pool.allocate(8000);  // same 8 KiB class
  EXPECT_EQ(b, a);
  void* c = pool.allocate(5000);  // the class's only buffer is taken
  EXPECT_NE(c, a);
  CachingStats s = pool.pool_stats();
  EXPECT_EQ(s.raw_mallocs, 2);
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_EQ(s.allocated_bytes, static_cast<int64_t>(16 * KiB));
  EXPECT_EQ(s.requested_bytes, 13000);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(16 * KiB));
  EXPECT_EQ(pool.stats().current_bytes, 13000);
  EXPECT_EQ(pool.stats().live_allocations, 2);
  pool.deallocate(b, 8000);
  pool.deallocate(c, 5000);
  EXPECT_EQ(pool.pool_stats().reserved_bytes, static_cast<int64_t>(16 * KiB)) << "cached";
  EXPECT_EQ(pool.stats().peak_bytes, 13000);
  pool.empty_cache();
  s = pool.pool_stats();
  EXPECT_EQ(s.reserved_bytes, 0);
  EXPECT_EQ(s.raw_frees, 2);
  EXPECT_EQ(s.peak_reserved_bytes, static_cast<int64_t>(16 * KiB));
}

TEST(PinnedHostPool, CpuStreamUseDoesNotDelayReuse) {
  PinnedHostPool pool(false, {});
  void* a = pool.allocate(100);
  pool.record_stream(a, Stream());
  pool.deallocate(a, 100);
  EXPECT_EQ(pool.pool_stats().blocks_awaiting_events, 0);
  EXPECT_EQ(pool.allocate(100), a);
  pool.deallocate(a, 100);
  int x = 0;
  EXPECT_THROW(pool.record_stream(&x, Stream()), Error);
  EXPECT_THROW(pool.deallocate(&x, 4), Error);
}

TEST(PinnedHostPool, ReachingTheLimitEmptiesTheCacheThenReports) {
  PinnedHostPool pool = host_pool(12 * MiB);
  void* a = pool.allocate(4 * MiB);
  void* b = pool.allocate(2 * MiB);
  pool.deallocate(b, 2 * MiB);       // cached: 6 MiB held
  void* c = pool.allocate(5 * MiB);  // 8 MiB class: fits only once the 2 MiB go
  CachingStats s = pool.pool_stats();
  EXPECT_EQ(s.cache_flushes, 1);
  EXPECT_EQ(s.raw_frees, 1);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(12 * MiB));
  pool.deallocate(c, 5 * MiB);
  void* d = pool.allocate(7 * MiB);  // the cached 8 MiB buffer
  EXPECT_EQ(d, c);
  try {
    (void)pool.allocate(3 * MiB);  // 4 MiB class: 4 + 8 + 4 > 12, nothing cached
    FAIL() << "expected the limit to be reached";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(),
                testing::HasSubstr("host pool out of memory: tried to allocate 3.00 MiB"));
    EXPECT_THAT(e.what(), testing::HasSubstr("12.00 MiB held of a limit of 12.00 MiB"));
  }
  EXPECT_EQ(pool.pool_stats().ooms, 1);
  pool.deallocate(a, 4 * MiB);
  pool.deallocate(d, 7 * MiB);
}

TEST(PinnedHostPool, TensorsCanLiveInIt) {
  PinnedHostPool pool(false, {});
  {
    Tensor t = Tensor::empty({16, 16}, DType::F32, pool);
    EXPECT_TRUE(t.device().is_cpu());
    EXPECT_EQ(pool.stats().current_bytes, 1024);
  }
  EXPECT_EQ(pool.stats().current_bytes, 0);
  EXPECT_EQ(pool.pool_stats().reserved_bytes, static_cast<int64_t>(4 * KiB));
}

}  // namespace
}  // namespace lt
