#pragma once
// The block-management policy of the CUDA caching allocator, in plain C++ so
// that it compiles in every build and is tested on the CPU against a fake
// backend. The design follows PyTorch's CUDACachingAllocator: requests are
// rounded, served best-fit from cached segments of raw memory, split and
// merged, and reused only on the stream they were allocated on. The raw
// memory and the events come from a RawMemory backend: cudaMalloc and CUDA
// events for the GPU (core/cuda/caching_allocator.cu), a fake in tests.
//
// Configuration, statistics and the policy are separate types.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace lt {

// A stream as the allocator sees it: an opaque value, equal for the same
// stream (the cudaStream_t bits on CUDA; 0 is the default stream).
using StreamId = uintptr_t;
// An event recorded on a stream: opaque to the policy (a cudaEvent_t on CUDA).
using EventHandle = uintptr_t;

struct DeviceMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

// Where a caching allocator gets its memory and its events from.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  // Returns nullptr when the memory is exhausted; throws lt::Error on any
  // other failure.
  virtual void* malloc(size_t bytes) = 0;
  virtual void free(void* ptr) = 0;
  // Records an event on `stream` that completes when the work enqueued on
  // it so far has finished.
  virtual EventHandle record_event(StreamId stream) = 0;
  // Non-blocking: has the event completed?
  virtual bool event_done(EventHandle event) = 0;
  // Blocks until the event has completed.
  virtual void wait_event(EventHandle event) = 0;
  // The policy is done with the event (a backend may reuse it).
  virtual void release_event(EventHandle event) = 0;
  virtual DeviceMemoryInfo memory_info() = 0;
};

// Tuning constants. The defaults are PyTorch's, which were tuned on real
// training workloads; change them only with a measurement.
struct CachingConfig {
  // Every block is a multiple of this, so every pointer handed out is
  // 512-byte aligned (enough for any vector load or cuBLAS operand) and
  // near-equal requests share blocks.
  size_t round_bytes = 512;
  // Requests up to this size come from the small pool. Small tensors
  // (norm weights, biases, scalars) churn a lot; keeping them apart stops
  // them from pinning down pieces of the large segments.
  size_t small_request_max = size_t{1} << 20;  // 1 MiB
  // Small-pool segments: one cudaMalloc serves many small blocks.
  size_t small_segment_bytes = size_t{2} << 20;  // 2 MiB
  // Large requests below this share a segment of large_segment_bytes ...
  size_t large_shared_max = size_t{10} << 20;     // 10 MiB
  size_t large_segment_bytes = size_t{20} << 20;  // 20 MiB
  // ... and larger ones get a segment of their own, rounded to this so that
  // a slightly larger request later can reuse it.
  size_t large_round_bytes = size_t{2} << 20;  // 2 MiB
  // A large block is split only when more than this would remain; smaller
  // remainders stay attached (fragments under 1 MiB in the large pool could
  // only serve large requests, which they never fit).
  size_t large_split_min_remainder = size_t{1} << 20;  // 1 MiB
};

// Bytes count block sizes (after rounding) unless named "requested".
struct CachingStats {
  int64_t allocated_bytes = 0;  // in blocks handed out and not yet freed
  int64_t peak_allocated_bytes = 0;
  int64_t requested_bytes = 0;  // what callers asked for, before rounding
  int64_t peak_requested_bytes = 0;
  int64_t reserved_bytes = 0;  // in segments held from the backend
  int64_t peak_reserved_bytes = 0;
  int64_t allocation_count = 0;  // successful allocate() calls, ever
  int64_t live_allocations = 0;
  int64_t cache_hits = 0;              // allocations served without a raw malloc
  int64_t raw_mallocs = 0;             // successful backend malloc calls (segments)
  int64_t raw_frees = 0;               // segments returned to the backend
  int64_t cache_flushes = 0;           // times a failed malloc emptied the cache
  int64_t ooms = 0;                    // allocations that failed after the flush
  int64_t blocks_awaiting_events = 0;  // freed blocks still in use on other streams
};

// One segment and the blocks that tile it, for tests and debugging.
struct SegmentInfo {
  struct BlockInfo {
    uintptr_t address = 0;
    size_t size = 0;
    bool allocated = false;
    bool awaiting_events = false;
  };
  uintptr_t address = 0;
  size_t size = 0;
  StreamId stream = 0;
  bool small_pool = false;
  std::vector<BlockInfo> blocks;  // in address order
};

class CachingPolicy {
 public:
  // `device_name` appears in error messages ("cuda:0").
  CachingPolicy(RawMemory& raw, std::string device_name, CachingConfig config = {});
  // Returns every segment to the backend, whether or not blocks in it are
  // still allocated: the owner destroys the policy only when nothing uses
  // its memory any more.
  ~CachingPolicy();
  CachingPolicy(const CachingPolicy&) = delete;
  CachingPolicy& operator=(const CachingPolicy&) = delete;

  // A block of at least `bytes` bytes, for use on `stream`. Throws lt::Error
  // (with the numbers) when the backend is out of memory even after the
  // cache was emptied.
  void* allocate(size_t bytes, StreamId stream);
  void deallocate(void* ptr);
  // Declares that `ptr` is also used by work on `stream`. When it is freed,
  // the block is not reused until the work enqueued on `stream` by then
  // has finished.
  void record_stream(void* ptr, StreamId stream);
  // Waits for pending events and returns every unused segment to the backend.
  void empty_cache();

  CachingStats stats() const;
  void reset_peak();
  std::vector<SegmentInfo> segments() const;
  // Size of the block behind a live pointer (the rounded request, or more
  // when the remainder was too small to split off).
  size_t block_size(void* ptr) const;

  // The size a request is rounded to, and the size of the segment a request
  // that finds no cached block gets; public so tests can check the policy.
  size_t round_size(size_t bytes) const;
  size_t segment_size(size_t rounded) const;
  bool is_small(size_t rounded) const { return rounded <= config_.small_request_max; }

 private:
  struct Block;
  // Free blocks ordered by (stream, size, address): lower_bound on
  // (stream, size) is the best fit on that stream.
  struct ByStreamSizeAddress {
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, ByStreamSizeAddress>;

  Pool& pool_for(const Block* block);
  Block* find_free_block(Pool& pool, StreamId stream, size_t size);
  Block* new_segment(size_t size, bool small, StreamId stream);
  void* hand_out(Block* block, size_t rounded, size_t requested);
  void return_to_pool(Block* block);
  void process_events();
  void wait_all_events();
  void release_unused_segments();
  [[noreturn]] void fail_out_of_memory(size_t bytes, size_t rounded, size_t segment,
                                       StreamId stream);
  static void raise_peak(int64_t now, int64_t& peak) {
    if (now > peak) peak = now;
  }

  RawMemory& raw_;
  const std::string device_name_;
  const CachingConfig config_;

  mutable std::mutex mutex_;
  Pool small_pool_;
  Pool large_pool_;
  std::unordered_map<void*, Block*> live_;
  // The first block of every segment, by address. Merging always keeps the
  // lower block, so a segment's first block lives as long as the segment.
  std::map<uintptr_t, Block*> segments_;
  // Events recorded at free time, per stream in recording order: events on
  // one stream complete in order, so polling stops at the first that has
  // not.
  std::map<StreamId, std::deque<std::pair<EventHandle, Block*>>> pending_;
  CachingStats stats_;
};

}  // namespace lt
