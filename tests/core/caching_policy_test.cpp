// The caching allocator's policy on a fake device: raw memory is a range of
// fake addresses (never dereferenced) under a capacity, and events complete
// when the test finishes their stream, so every interleaving the GPU can
// produce is reproducible here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <thread>

#include "core/caching_policy.h"
#include "core/error.h"

namespace lt {
namespace {

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;

class FakeDevice final : public RawMemory {
 public:
  explicit FakeDevice(size_t capacity) : capacity_(capacity) {}

  void* malloc(size_t bytes) override {
    if (used_ + bytes > capacity_) {
      ++failed_mallocs;
      return nullptr;
    }
    uintptr_t address = next_address_;
    // A gap between segments, so that a merge across segments would show.
    next_address_ += bytes + 64 * KiB;
    segments[address] = bytes;
    used_ += bytes;
    return reinterpret_cast<void*>(address);
  }
  void free(void* ptr) override {
    auto it = segments.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == segments.end()) throw Error("fake device: free of a pointer it never gave out");
    used_ -= it->second;
    segments.erase(it);
  }
  EventHandle record_event(StreamId stream) override {
    EventHandle id = ++last_event;
    events[id] = {stream, false};
    ++live_events;
    return id;
  }
  bool event_done(EventHandle event) override { return events.at(event).done; }
  // The host waited until the stream reached the event.
  void wait_event(EventHandle event) override {
    events.at(event).done = true;
    ++waits;
  }
  void release_event(EventHandle event) override {
    if (events.count(event) == 0) throw Error("fake device: release of an unknown event");
    --live_events;
  }
  DeviceMemoryInfo memory_info() override { return {capacity_ - used_, capacity_}; }

  // All work enqueued on `stream` so far has finished.
  void finish_stream(StreamId stream) {
    for (auto& [id, event] : events) {
      if (event.stream == stream) event.done = true;
    }
  }
  size_t used() const { return used_; }

  struct FakeEvent {
    StreamId stream;
    bool done;
  };
  std::map<uintptr_t, size_t> segments;     // live raw allocations
  std::map<EventHandle, FakeEvent> events;  // every event ever recorded
  EventHandle last_event = 0;
  int live_events = 0;
  int failed_mallocs = 0;
  int waits = 0;

 private:
  size_t capacity_;
  size_t used_ = 0;
  uintptr_t next_address_ = uintptr_t{1} << 40;
};

constexpr StreamId kS1 = 0x1000;
constexpr StreamId kS2 = 0x2000;
constexpr StreamId kS3 = 0x3000;

uintptr_t addr(void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

TEST(CachingPolicy, RoundsTo512BytesAndCountsRequestedAndRoundedBytes) {
  FakeDevice dev(1024 * MiB);
  CachingPolicy policy(dev, "fake:0");
  EXPECT_EQ(policy.round_size(0), 512u);
  EXPECT_EQ(policy.round_size(1), 512u);
  EXPECT_EQ(policy.round_size(512), 512u);
  EXPECT_EQ(policy.round_size(513), 1024u);
  void* a = policy.allocate(1000, kS1);
  void* b = policy.allocate(0, kS1);
  EXPECT_EQ(policy.block_size(a), 1024u);
  EXPECT_EQ(policy.block_size(b), 512u);
  EXPECT_NE(a, b);
  EXPECT_EQ(addr(a) % 512, 0u);
  EXPECT_EQ(addr(b) % 512, 0u);
  CachingStats s = policy.stats();
  EXPECT_EQ(s.allocated_bytes, 1536);
  EXPECT_EQ(s.requested_bytes, 1000);
  EXPECT_EQ(s.live_allocations, 2);
  policy.deallocate(a);
  policy.deallocate(b);
  EXPECT_EQ(policy.stats().allocated_bytes, 0);
  EXPECT_EQ(policy.stats().requested_bytes, 0);
}

TEST(CachingPolicy, ChoosesSmallOrLargePoolAndSegmentSize) {
  FakeDevice dev(1024 * MiB);
  CachingPolicy policy(dev, "fake:0");
  EXPECT_EQ(policy.segment_size(512), 2 * MiB);
  EXPECT_EQ(policy.segment_size(1 * MiB), 2 * MiB);
  EXPECT_EQ(policy.segment_size(1 * MiB + 512), 20 * MiB);
  EXPECT_EQ(policy.segment_size(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(policy.segment_size(10 * MiB), 10 * MiB);
  EXPECT_EQ(policy.segment_size(11 * MiB + 512), 12 * MiB);

  void* small = policy.allocate(1 * MiB, kS1);
  void* large = policy.allocate(1 * MiB + 1, kS1);
  // Another stream, or it would be split from the large segment's 19 MiB rest.
  void* huge = policy.allocate(11 * MiB + 1, kS2);
  auto segs = policy.segments();
  ASSERT_EQ(segs.size(), 3u);
  std::map<uintptr_t, SegmentInfo> by_address;
  for (auto& s : segs) by_address[s.address] = s;
  EXPECT_TRUE(by_address.at(addr(small)).small_pool);
  EXPECT_EQ(by_address.at(addr(small)).size, 2 * MiB);
  EXPECT_FALSE(by_address.at(addr(large)).small_pool);
  EXPECT_EQ(by_address.at(addr(large)).size, 20 * MiB);
  EXPECT_EQ(by_address.at(addr(huge)).size, 12 * MiB);
  void* rest = policy.allocate(11 * MiB + 1, kS1);
  EXPECT_EQ(addr(rest), addr(large) + 1 * MiB + 512) << "from the 20 MiB segment's rest";
  // A small request never comes from a large segment, even with room there.
  policy.deallocate(small);
  void* small2 = policy.allocate(4 * KiB, kS1);
  EXPECT_TRUE(by_address.count(addr(small2)));  // the start of the small segment
  EXPECT_EQ(policy.stats().raw_mallocs, 3);
  for (void* p : {small2, large, huge, rest}) policy.deallocate(p);
}

TEST(CachingPolicy, BestFitPicksTheSmallestFreeBlockThatFits) {
  FakeDevice dev(1024 * MiB);
  CachingPolicy policy(dev, "fake:0");
  // One 20 MiB segment: x(4) sep(1.5) y(2) sep(1.5) rest(11).
  void* x = policy.allocate(4 * MiB, kS1);
  void* sep1 = policy.allocate(1 * MiB + 512 * KiB, kS1);
  void* y = policy.allocate(2 * MiB, kS1);
  void* sep2 = policy.allocate(1 * MiB + 512 * KiB, kS1);
  ASSERT_EQ(policy.segments().size(), 1u);
  policy.deallocate(x);
  policy.deallocate(y);
  // Free: x (4 MiB), y (2 MiB), the tail (11 MiB).
  void* fits_y = policy.allocate(1 * MiB + 512 * KiB, kS1);
  EXPECT_EQ(fits_y, y);
  // 0.5 MiB would remain: a large block is split only above 1 MiB.
  EXPECT_EQ(policy.block_size(fits_y), 2 * MiB);
  void* fits_x = policy.allocate(3 * MiB, kS1);
  EXPECT_EQ(fits_x, x);
  EXPECT_EQ(policy.block_size(fits_x), 4 * MiB) << "1 MiB would remain: not split";
  EXPECT_EQ(policy.stats().raw_mallocs, 1);
  EXPECT_EQ(policy.stats().cache_hits, 5);
  for (void* p : {sep1, sep2, fits_x, fits_y}) policy.deallocate(p);
}

TEST(CachingPolicy, LargeSplitNeedsMoreThanOneMiBLeft) {
  FakeDevice dev(1024 * MiB);
  CachingPolicy policy(dev, "fake:0");
  // 20 MiB segment; 19 MiB leaves exactly 1 MiB: no split.
  void* a = policy.allocate(19 * MiB, kS1);
  EXPECT_EQ(policy.block_size(a), 20 * MiB);
  policy.deallocate(a);
  void* b = policy.allocate(19 * MiB - 512 * KiB, kS1);
  EXPECT_EQ(b, a);
  EXPECT_EQ(policy.block_size(b), 19 * MiB - 512 * KiB) << "1.5 MiB remains: split";
  policy.deallocate(b);
}

TEST(CachingPolicy, SplitsAndMergesFreedNeighbours) {
  FakeDevice dev(1024 * MiB);
  CachingPolicy policy(dev, "fake:0");
  void* a = policy.allocate(1000, kS1);
  void* b = policy.allocate(2000, kS1);
  void* c = policy.allocate(3000, kS1);
  ASSERT_EQ(policy.stats().raw_mallocs, 1);
  EXPECT_EQ(addr(b), addr(a) + 1024);
  EXPECT_EQ(addr(c), addr(b) + 2048);
  policy.deallocate(b);
  policy.deallocate(a);
  auto seg = policy.segments().at(0);
  ASSERT_EQ(seg.blocks.size(), 3u) << "a+b merged, c, the tail";
  EXPECT_EQ(seg.blocks[0].size, 1024u + 2048u);
  EXPECT_FALSE(seg.blocks[0].allocated);
  // The merged block serves a request of a+b with no new malloc.
  void* ab = policy.allocate(1024 + 2048, kS1);
  EXPECT_EQ(ab, a);
  EXPECT_EQ(policy.stats().raw_mallocs, 1);
  policy.deallocate(c);
  policy.deallocate(ab);
  seg = policy.segments().at(0);
  ASSERT_EQ(seg.blocks.size(), 1u) << "everything merged back into one block";
  EXPECT_EQ(seg.blocks[0].size, 2 * MiB);
  policy.empty_cache();
  EXPECT_TRUE(dev.segments.empty());
  EXPECT_EQ(policy.stats().raw_frees, 1);
  EXPECT_EQ(policy.stats().reserved_bytes, 0);
}

TEST(CachingPolicy, ReusesABlockOnlyOnItsOwnStream) {
  FakeDevice dev(1024 * MiB);
  CachingPolicy policy(dev, "fake:0");
  void* p = policy.allocate(4096, kS1);
  policy.deallocate(p);
  void* q = policy.allocate(4096, kS2);
  EXPECT_NE(q, p);
  EXPECT_EQ(policy.stats().raw_mallocs, 2) << "stream 2 gets its own segment";
  void* r = policy.allocate(4096, kS1);
  EXPECT_EQ(r, p) << "stream 1 reuses its block at once, without an event";
  EXPECT_EQ(dev.last_event, 0u);
  policy.deallocate(q);
  policy.deallocate(r);
}

TEST(CachingPolicy, BlockUsedOnAnotherStreamWaitsForItsEvent) {
  FakeDevice dev(1024 * MiB);
  CachingPolicy policy(dev, "fake:0");
  void* p = policy.allocate(4096, kS1);
  policy.record_stream(p, kS1);  // its own stream: nothing to record
  policy.record_stream(p, kS2);
  policy.record_stream(p, kS3);
  policy.record_stream(p, kS2);  // once per stream
  policy.deallocate(p);
  EXPECT_EQ(dev.live_events, 2);
  EXPECT_EQ(policy.stats().blocks_awaiting_events, 1);

  void* q = policy.allocate(4096, kS1);
  EXPECT_NE(q, p) << "stream 2 and 3 may still use p";
  dev.finish_stream(kS2);
  void* r = policy.allocate(4096, kS1);
  EXPECT_NE(r, p) << "stream 3 may still use p";
  dev.finish_stream(kS3);
  void* s = policy.allocate(4096, kS1);
  EXPECT_EQ(s, p);
  EXPECT_EQ(dev.live_events, 0) << "every event released";
  EXPECT_EQ(policy.stats().blocks_awaiting_events, 0);
  EXPECT_EQ(dev.waits, 0) << "the host never waited";
  for (void* x : {q, r, s}) policy.deallocate(x);
}

TEST(CachingPolicy, ABlockAwaitingEventsIsNotMergedUntilTheyComplete) {
  FakeDevice dev(1024 * MiB);
  CachingPolicy policy(dev, "fake:0");
  void* a = policy.allocate(1024, kS1);
  void* b = policy.allocate(1024, kS1);
  policy.record_stream(b, kS2);
  policy.deallocate(b);
  policy.deallocate(a);
  auto seg = policy.segments().at(0);
  ASSERT_EQ(seg.blocks.size(), 3u);
  EXPECT_TRUE(seg.blocks[1].awaiting_events);
  // A request for a+b cannot use the awaiting block: it is split from the tail.
  void* ab = policy.allocate(2048, kS1);
  EXPECT_EQ(addr(ab), addr(b) + 1024);
  dev.finish_stream(kS2);
  policy.deallocate(policy.allocate(512, kS3));  // any allocation polls the events
  seg = policy.segments().at(0);
  ASSERT_EQ(seg.blocks.size(), 3u) << "a+b merged, ab, the tail";
  EXPECT_EQ(seg.blocks[0].size, 2048u);
  policy.deallocate(ab);
}

TEST(CachingPolicy, OutOfMemoryEmptiesTheCacheAndRetries) {
  FakeDevice dev(40 * MiB);
  CachingPolicy policy(dev, "fake:0");
  void* p = policy.allocate(15 * MiB, kS1);  // a 16 MiB segment
  policy.deallocate(p);
  EXPECT_EQ(policy.stats().reserved_bytes, static_cast<int64_t>(16 * MiB));
  // 30 MiB on another stream does not fit beside the cached 16 MiB.
  void* q = policy.allocate(30 * MiB, kS2);
  ASSERT_NE(q, nullptr);
  CachingStats s = policy.stats();
  EXPECT_EQ(s.cache_flushes, 1);
  EXPECT_EQ(s.raw_frees, 1);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(30 * MiB));
  EXPECT_EQ(s.peak_reserved_bytes, static_cast<int64_t>(30 * MiB));
  EXPECT_EQ(dev.failed_mallocs, 1);
  policy.deallocate(q);
}

TEST(CachingPolicy, OutOfMemoryWaitsForPendingEventsAndUsesTheFreedBlock) {
  FakeDevice dev(20 * MiB);
  CachingPolicy policy(dev, "fake:0");
  void* keep = policy.allocate(1 * MiB, kS1);  // small segment: 2 MiB
  void* p = policy.allocate(15 * MiB, kS1);    // 16 MiB segment
  policy.record_stream(p, kS2);
  policy.deallocate(p);
  // No room for a second 16 MiB segment: wait for stream 2, reuse p.
  void* q = policy.allocate(15 * MiB, kS1);
  EXPECT_EQ(q, p);
  EXPECT_EQ(dev.waits, 1);
  EXPECT_EQ(policy.stats().raw_frees, 0) << "the pool had the block once the event completed";
  EXPECT_EQ(dev.live_events, 0);
  policy.deallocate(q);
  policy.deallocate(keep);
}

TEST(CachingPolicy, OutOfMemoryAfterTheFlushSaysWhatWasAskedHeldAndFree) {
  FakeDevice dev(64 * MiB);
  CachingPolicy policy(dev, "fake:0");
  void* live = policy.allocate(30 * MiB, kS1);
  void* cached = policy.allocate(4 * MiB, kS1);  // a 20 MiB segment, then freed
  policy.deallocate(cached);
  try {
    policy.allocate(40 * MiB, kS1);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_THAT(msg, testing::HasSubstr("out of memory on fake:0"));
    EXPECT_THAT(msg, testing::HasSubstr("tried to allocate 40.00 MiB (41943040 bytes)"));
    EXPECT_THAT(msg, testing::HasSubstr("30.00 MiB (31457280 bytes) allocated"));
    EXPECT_THAT(msg, testing::HasSubstr("30.00 MiB (31457280 bytes) reserved"));
    EXPECT_THAT(msg, testing::HasSubstr("34.00 MiB (35651584 bytes) of 64.00 MiB"));
    EXPECT_THAT(msg, testing::HasSubstr("free"));
  }
  CachingStats s = policy.stats();
  EXPECT_EQ(s.ooms, 1);
  EXPECT_EQ(s.raw_frees, 1) << "the cached 20 MiB segment went back before the retry";
  EXPECT_EQ(s.live_allocations, 1);
  // The allocator still works.
  void* small = policy.allocate(1000, kS1);
  policy.deallocate(small);
  policy.deallocate(live);
}

TEST(CachingPolicy, StatisticsTrackPeaksReservedAndCalls) {
  FakeDevice dev(1024 * MiB);
  CachingPolicy policy(dev, "fake:0");
  void* a = policy.allocate(12 * MiB, kS1);  // segment 12 MiB
  void* b = policy.allocate(100, kS1);       // segment 2 MiB
  void* c = policy.allocate(200, kS1);       // same small segment
  CachingStats s = policy.stats();
  EXPECT_EQ(s.allocated_bytes, static_cast<int64_t>(12 * MiB + 1024));
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(14 * MiB));
  EXPECT_EQ(s.raw_mallocs, 2);
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_EQ(s.allocation_count, 3);
  policy.deallocate(a);
  s = policy.stats();
  EXPECT_EQ(s.allocated_bytes, 1024);
  EXPECT_EQ(s.peak_allocated_bytes, static_cast<int64_t>(12 * MiB + 1024));
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(14 * MiB)) << "cached, not returned";
  policy.reset_peak();
  EXPECT_EQ(policy.stats().peak_allocated_bytes, 1024);
  EXPECT_EQ(policy.stats().peak_requested_bytes, 300);
  policy.empty_cache();
  s = policy.stats();
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(2 * MiB));
  EXPECT_EQ(s.peak_reserved_bytes, static_cast<int64_t>(14 * MiB));
  EXPECT_EQ(s.raw_frees, 1);
  policy.deallocate(b);
  policy.deallocate(c);
}

TEST(CachingPolicy, RejectsForeignPointers) {
  FakeDevice dev(64 * MiB);
  CachingPolicy policy(dev, "fake:0");
  int x = 0;
  EXPECT_THROW(policy.deallocate(&x), Error);
  EXPECT_THROW(policy.record_stream(&x, kS2), Error);
  void* p = policy.allocate(10, kS1);
  policy.deallocate(p);
  EXPECT_THROW(policy.deallocate(p), Error) << "double free";
  policy.deallocate(nullptr);
}

TEST(CachingPolicy, DestructionReturnsEverySegment) {
  FakeDevice dev(64 * MiB);
  {
    CachingPolicy policy(dev, "fake:0");
    policy.allocate(3 * MiB, kS1);
    void* p = policy.allocate(100, kS2);
    policy.record_stream(p, kS1);
    policy.deallocate(p);
  }
  EXPECT_TRUE(dev.segments.empty());
  EXPECT_EQ(dev.live_events, 0);
}

TEST(CachingPolicy, ConcurrentThreadsOnTheirOwnStreams) {
  FakeDevice dev(4096 * MiB);
  CachingPolicy policy(dev, "fake:0");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&policy, t] {
      std::mt19937 rng(t);
      std::vector<void*> live;
      for (int i = 0; i < 2000; ++i) {
        if (live.size() < 20 && rng() % 2) {
          live.push_back(policy.allocate(rng() % (3 * MiB), kS1 * (t + 1)));
        } else if (!live.empty()) {
          size_t k = rng() % live.size();
          policy.deallocate(live[k]);
          live.erase(live.begin() + static_cast<ptrdiff_t>(k));
        }
      }
      for (void* p : live) policy.deallocate(p);
    });
  }
  for (auto& t : threads) t.join();
  CachingStats s = policy.stats();
  EXPECT_EQ(s.live_allocations, 0);
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.allocation_count, s.cache_hits + s.raw_mallocs);
}

// ---- randomized interleavings against a model ----

struct LiveAllocation {
  size_t requested;
  StreamId stream;
};

// A freed range that a stream may still use: it must not be handed out
// while any of the events recorded when it was freed is incomplete.
struct InFlight {
  uintptr_t begin, end;
  std::vector<EventHandle> events;
};

void check_invariants(const CachingPolicy& policy, const FakeDevice& dev,
                      const std::map<uintptr_t, LiveAllocation>& live) {
  auto segments = policy.segments();
  CachingStats s = policy.stats();
  // Segments are exactly the backend's live allocations.
  ASSERT_EQ(segments.size(), dev.segments.size());
  int64_t reserved = 0, allocated = 0, awaiting = 0, live_blocks = 0;
  for (const auto& seg : segments) {
    ASSERT_EQ(dev.segments.at(seg.address), seg.size);
    reserved += static_cast<int64_t>(seg.size);
    uintptr_t at = seg.address;
    bool prev_free = false;
    for (const auto& b : seg.blocks) {
      ASSERT_EQ(b.address, at) << "blocks tile their segment";
      ASSERT_GT(b.size, 0u);
      ASSERT_EQ(b.size % 512, 0u);
      at += b.size;
      bool free = !b.allocated && !b.awaiting_events;
      ASSERT_FALSE(free && prev_free) << "two free neighbours were not merged";
      prev_free = free;
      if (b.awaiting_events) ++awaiting;
      if (b.allocated) {
        ++live_blocks;
        allocated += static_cast<int64_t>(b.size);
        auto it = live.find(b.address);
        ASSERT_NE(it, live.end()) << "an allocated block the model does not know";
        ASSERT_GE(b.size, it->second.requested);
        ASSERT_EQ(seg.stream, it->second.stream) << "a block handed to another stream";
      }
    }
    ASSERT_EQ(at, seg.address + seg.size);
  }
  ASSERT_EQ(live_blocks, static_cast<int64_t>(live.size()))
      << "every live allocation lies in a segment";
  ASSERT_EQ(s.reserved_bytes, reserved);
  ASSERT_EQ(static_cast<size_t>(reserved), dev.used());
  ASSERT_EQ(s.allocated_bytes, allocated);
  ASSERT_EQ(s.live_allocations, static_cast<int64_t>(live.size()));
  int64_t requested = 0;
  for (const auto& [p, a] : live) requested += static_cast<int64_t>(a.requested);
  ASSERT_EQ(s.requested_bytes, requested);
  ASSERT_EQ(s.blocks_awaiting_events, awaiting);
  ASSERT_LE(s.allocated_bytes, s.peak_allocated_bytes);
  ASSERT_LE(s.reserved_bytes, s.peak_reserved_bytes);
  ASSERT_EQ(s.allocation_count, s.cache_hits + s.raw_mallocs);
}

void run_random_interleaving(uint32_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  FakeDevice dev(96 * MiB);
  CachingPolicy policy(dev, "fake:0");
  const StreamId streams[] = {kS1, kS2, kS3};
  std::map<uintptr_t, LiveAllocation> live;
  std::vector<InFlight> in_flight;
  std::map<uintptr_t, std::vector<StreamId>> uses;
  auto pick_size = [&]() -> size_t {
    switch (rng() % 4) {
      case 0:
        return rng() % 2048;  // tiny
      case 1:
        return rng() % (1 * MiB) + 1;  // small pool
      case 2:
        return rng() % (9 * MiB) + 1 * MiB;  // large, shared segments
      default:
        return rng() % (30 * MiB) + 10 * MiB;
    }
  };
  for (int step = 0; step < 3000; ++step) {
    int op = static_cast<int>(rng() % 100);
    if (op < 45) {
      size_t bytes = pick_size();
      StreamId stream = streams[rng() % 3];
      EventHandle events_before = dev.last_event;
      void* p = nullptr;
      try {
        p = policy.allocate(bytes, stream);
      } catch (const Error& e) {
        ASSERT_THAT(e.what(), testing::HasSubstr("out of memory on fake:0"));
        // Every unused segment went back: what is reserved holds a live block.
        for (const auto& seg : policy.segments()) {
          bool used = false;
          for (const auto& b : seg.blocks) used = used || b.allocated;
          ASSERT_TRUE(used) << "an unused segment survived the flush";
        }
      }
      ASSERT_EQ(dev.last_event, events_before) << "allocation records no events";
      if (p != nullptr) {
        uintptr_t begin = addr(p), end = begin + std::max<size_t>(bytes, 1);
        // No overlap with a live allocation.
        auto next = live.lower_bound(begin);
        if (next != live.end()) {
          ASSERT_LE(end, next->first);
        }
        if (next != live.begin()) {
          auto prev = std::prev(next);
          ASSERT_LE(prev->first + std::max<size_t>(prev->second.requested, 1), begin);
        }
        // No overlap with memory another stream may still use.
        for (const auto& f : in_flight) {
          bool pending = false;
          for (EventHandle e : f.events) pending = pending || !dev.events.at(e).done;
          if (pending) {
            ASSERT_TRUE(end <= f.begin || f.end <= begin) << "reused too early";
          }
        }
        live[begin] = {bytes, stream};
      }
    } else if (op < 80 && !live.empty()) {
      auto it = std::next(live.begin(), static_cast<ptrdiff_t>(rng() % live.size()));
      uintptr_t p = it->first;
      EventHandle before = dev.last_event;
      size_t size = policy.block_size(reinterpret_cast<void*>(p));
      policy.deallocate(reinterpret_cast<void*>(p));
      std::vector<StreamId>& u = uses[p];
      ASSERT_EQ(dev.last_event - before, u.size()) << "one event per other stream";
      if (dev.last_event != before) {
        InFlight f{p, p + size, {}};
        for (EventHandle e = before + 1; e <= dev.last_event; ++e) f.events.push_back(e);
        in_flight.push_back(f);
      }
      uses.erase(p);
      live.erase(it);
    } else if (op < 92 && !live.empty()) {
      auto it = std::next(live.begin(), static_cast<ptrdiff_t>(rng() % live.size()));
      StreamId s = streams[rng() % 3];
      policy.record_stream(reinterpret_cast<void*>(it->first), s);
      auto& u = uses[it->first];
      if (s != it->second.stream && std::find(u.begin(), u.end(), s) == u.end()) u.push_back(s);
    } else if (op < 99) {
      dev.finish_stream(streams[rng() % 3]);
    } else {
      policy.empty_cache();
    }
    check_invariants(policy, dev, live);
    if (testing::Test::HasFatalFailure()) return;
  }
  for (const auto& [p, a] : live) policy.deallocate(reinterpret_cast<void*>(p));
  for (StreamId s : streams) dev.finish_stream(s);
  policy.empty_cache();
  EXPECT_TRUE(dev.segments.empty());
  EXPECT_EQ(dev.live_events, 0);
  CachingStats s = policy.stats();
  EXPECT_EQ(s.reserved_bytes, 0);
  EXPECT_EQ(s.allocated_bytes, 0);
  EXPECT_EQ(s.raw_mallocs, s.raw_frees);
  EXPECT_GT(s.cache_hits, 0);
  EXPECT_GT(s.cache_flushes, 0) << "the capacity should have been reached";
}

TEST(CachingPolicy, RandomInterleavingsKeepEveryInvariant) {
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u}) {
    run_random_interleaving(seed);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace lt
