#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace lt {
namespace {

TEST(CpuAllocator, CountsCurrentPeakAndCalls) {
  CpuAllocator alloc;
  void* a = alloc.allocate(1000);
  void* b = alloc.allocate(24);
  EXPECT_EQ(alloc.stats().current_bytes, 1024);
  EXPECT_EQ(alloc.stats().live_allocations, 2);
  alloc.deallocate(a, 1000);
  EXPECT_EQ(alloc.stats().current_bytes, 24);
  EXPECT_EQ(alloc.stats().peak_bytes, 1024);
  EXPECT_EQ(alloc.stats().allocation_count, 2);
  alloc.reset_peak();
  EXPECT_EQ(alloc.stats().peak_bytes, 24);
  alloc.deallocate(b, 24);
  EXPECT_EQ(alloc.stats().current_bytes, 0);
  EXPECT_EQ(alloc.stats().live_allocations, 0);
}

TEST(CpuAllocator, AlignsTo64BytesEvenForOddAndZeroSizes) {
  CpuAllocator alloc;
  for (size_t bytes : {0, 1, 3, 63, 65, 4097}) {
    void* p = alloc.allocate(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    alloc.deallocate(p, bytes);
  }
}

// The VmFlags of the mapping that holds `p` in /proc/self/smaps ("" when
// none does).
std::string vm_flags_of(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// Note [Huge pages for large host tensors]: blocks from 32 MiB are aligned
// to 2 MiB and advised for transparent huge pages (VmFlags "hg"); smaller
// ones are left alone.
TEST(CpuAllocator, LargeBlocksAskForHugePages) {
  CpuAllocator alloc;
  const size_t large = (size_t{32} << 20) + 12345;
  void* p = alloc.allocate(large);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u);
  const std::string flags = vm_flags_of(p);
  ASSERT_FALSE(flags.empty()) << "no mapping holds the block";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  alloc.deallocate(p, large);
  void* small = alloc.allocate(size_t{1} << 20);
  EXPECT_EQ(vm_flags_of(small).find(" hg"), std::string::npos);
  alloc.deallocate(small, size_t{1} << 20);
}

TEST(CpuAllocator, TensorsReturnTheirStorage) {
  CpuAllocator alloc;
  {
    Tensor t = Tensor::empty({10, 10}, DType::F32, alloc);
    Tensor view = t.slice(0, 2, 5);
    EXPECT_EQ(alloc.stats().current_bytes, 400);
    t = Tensor();
    EXPECT_EQ(alloc.stats().current_bytes, 400) << "a view keeps the storage alive";
  }
  EXPECT_EQ(alloc.stats().current_bytes, 0);
}

TEST(ThreadPool, CoversEveryIndexOnceAndPropagatesErrors) {
  ThreadPool pool(4);
  std::vector<int> hits(100003, 0);
  pool.parallel_for(0, static_cast<int64_t>(hits.size()), 100, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (int h : hits) ASSERT_EQ(h, 1);
  EXPECT_THROW(pool.parallel_for(0, 1000, 1,
                                 [](int64_t b, int64_t) {
                                   if (b >= 500) throw Error("boom");
                                 }),
               Error);
  // Nested calls run inline and still cover their range.
  std::atomic<int64_t> total{0};
  pool.parallel_for(0, 8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.parallel_for(0, 10, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });
    }
  });
  EXPECT_EQ(total.load(), 80);
}

// The workers take chunks without a lock: jobs queued back to back from
// several threads, at ranges that start anywhere, each cover their range
// exactly once, in chunks of at least the grain (but the last).
TEST(ThreadPool, JobsFromSeveralThreadsCoverTheirRangesOnce) {
  ThreadPool pool(4);
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&, t] {
      for (int job = 0; job < 200; ++job) {
        const int64_t begin = 7 * job + t, end = begin + 1 + (job * 37 + t * 11) % 5000;
        const int64_t grain = 1 + job % 13;
        std::vector<std::atomic<int>> hits(static_cast<size_t>(end - begin));
        pool.parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
          if (e - b < grain && e != end) failures++;
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i - begin)]++;
        });
        for (const auto& h : hits)
          if (h.load() != 1) failures++;
      }
    });
  }
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace lt
