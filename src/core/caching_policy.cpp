#include "core/caching_policy.h"

#include <cstdio>
#include <limits>

#include "core/error.h"

namespace lt {

// Note [Blocks, segments and streams]
// A segment is one raw malloc. It is tiled by blocks, linked in address
// order through prev/next; a block is allocated, free (in its pool), or
// waiting for events (neither: see below). Two free neighbours never
// coexist: returning a block to its pool merges it with free neighbours,
// always into the lower block, so a segment's first block lives as long
// as the segment and the segment is unused exactly when that first block
// is free and has no next.
//
// Every block of a segment belongs to the stream that allocated the
// segment, and a free block is handed out only to a request on that same
// stream. That is what makes freeing cheap: work on one stream runs in
// order, so a block freed on stream S (with the kernels that used it still
// queued on S) may be handed to the next request on S at once, since any
// kernel that request launches on S runs after them. The host never waits.
//
// Note [Use on other streams]
// When a block's memory is also used by work on another stream T (a copy
// stream reading a buffer that compute wrote, say), the owner says so with
// record_stream(ptr, T). Reusing that block on S right after the free would
// let S overwrite it while T's work still reads or writes it. So at free
// time the policy records an event on every such stream, and the block
// stays out of its pool (and is not merged) until all of them have
// completed. Events on one stream complete in recording order, which lets
// process_events() poll each stream's queue only up to its first
// incomplete event. Polling happens at every allocation; nothing waits
// except the out-of-memory path.
//
// Note [Out of memory]
// A failed raw malloc is not yet an out-of-memory error: the cache may hold
// enough unused memory in segments of the wrong size or on other streams.
// The policy then (1) waits for every pending event, which returns those
// blocks to their pools, (2) retries the pool, (3) returns every wholly
// unused segment to the backend and (4) retries the malloc. Only when that
// fails too does it throw, with the request, what this allocator holds and
// what the device has free. Freeing segments with cudaFree synchronizes
// the device, so no queued kernel can still be using them.

struct CachingPolicy::Block {
  char* ptr = nullptr;
  size_t size = 0;
  StreamId stream = 0;
  bool small = false;
  bool allocated = false;
  size_t requested = 0;        // bytes asked for, while allocated
  int pending_events = 0;      // events recorded at free time, not yet complete
  std::vector<StreamId> uses;  // other streams the block is used on (record_stream)
  Block* prev = nullptr;       // neighbours in the segment, by address
  Block* next = nullptr;

  bool in_pool() const { return !allocated && pending_events == 0; }
};

bool CachingPolicy::ByStreamSizeAddress::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

namespace {

std::string format_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char buf[64];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s (%zu bytes)", value, units[unit], bytes);
  }
  return buf;
}

std::string format_stream(StreamId stream) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%#zx", static_cast<size_t>(stream));
  return buf;
}

size_t round_up(size_t bytes, size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

}  // namespace

CachingPolicy::CachingPolicy(RawMemory& raw, std::string device_name, CachingConfig config)
    : raw_(raw), device_name_(std::move(device_name)), config_(config) {
  LT_CHECK(config_.round_bytes > 0 && config_.small_segment_bytes >= config_.small_request_max &&
               config_.large_segment_bytes >= config_.large_shared_max &&
               config_.large_round_bytes % config_.round_bytes == 0,
           "inconsistent caching allocator configuration for ", device_name_);
}

CachingPolicy::~CachingPolicy() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [stream, queue] : pending_) {
    for (auto& [event, block] : queue) {
      try {
        raw_.wait_event(event);
        raw_.release_event(event);
      } catch (...) {
        // Teardown after the device context is gone: nothing left to wait for.
      }
    }
  }
  for (auto& [address, head] : segments_) {
    try {
      raw_.free(head->ptr);
    } catch (...) {
    }
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
}

size_t CachingPolicy::round_size(size_t bytes) const {
  LT_CHECK(bytes <= std::numeric_limits<size_t>::max() - config_.large_round_bytes,
           "allocation of ", bytes, " bytes on ", device_name_, " is too large to represent");
  if (bytes == 0) return config_.round_bytes;  // still a unique pointer
  return round_up(bytes, config_.round_bytes);
}

size_t CachingPolicy::segment_size(size_t rounded) const {
  if (is_small(rounded)) return config_.small_segment_bytes;
  if (rounded < config_.large_shared_max) return config_.large_segment_bytes;
  return round_up(rounded, config_.large_round_bytes);
}

CachingPolicy::Pool& CachingPolicy::pool_for(const Block* block) {
  return block->small ? small_pool_ : large_pool_;
}

void* CachingPolicy::allocate(size_t bytes, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t rounded = round_size(bytes);
  bool small = is_small(rounded);
  Pool& pool = small ? small_pool_ : large_pool_;
  process_events();
  if (Block* block = find_free_block(pool, stream, rounded)) {
    ++stats_.cache_hits;
    return hand_out(block, rounded, bytes);
  }
  size_t segment = segment_size(rounded);
  Block* block = new_segment(segment, small, stream);
  if (block == nullptr) {
    // Note [Out of memory]
    ++stats_.cache_flushes;
    wait_all_events();
    if (Block* cached = find_free_block(pool, stream, rounded)) {
      ++stats_.cache_hits;
      return hand_out(cached, rounded, bytes);
    }
    release_unused_segments();
    block = new_segment(segment, small, stream);
    if (block == nullptr) {
      ++stats_.ooms;
      fail_out_of_memory(bytes, rounded, segment, stream);
    }
  }
  return hand_out(block, rounded, bytes);
}

CachingPolicy::Block* CachingPolicy::find_free_block(Pool& pool, StreamId stream, size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  pool.erase(it);
  return block;
}

CachingPolicy::Block* CachingPolicy::new_segment(size_t size, bool small, StreamId stream) {
  void* ptr = raw_.malloc(size);
  if (ptr == nullptr) return nullptr;
  auto* block = new Block;
  block->ptr = static_cast<char*>(ptr);
  block->size = size;
  block->stream = stream;
  block->small = small;
  segments_[reinterpret_cast<uintptr_t>(ptr)] = block;
  ++stats_.raw_mallocs;
  stats_.reserved_bytes += static_cast<int64_t>(size);
  raise_peak(stats_.reserved_bytes, stats_.peak_reserved_bytes);
  return block;
}

void* CachingPolicy::hand_out(Block* block, size_t rounded, size_t requested) {
  size_t remainder = block->size - rounded;
  bool split = block->small ? remainder >= config_.round_bytes
                            : remainder > config_.large_split_min_remainder;
  if (split) {
    auto* rest = new Block;
    rest->ptr = block->ptr + rounded;
    rest->size = remainder;
    rest->stream = block->stream;
    rest->small = block->small;
    rest->prev = block;
    rest->next = block->next;
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = rounded;
    // `block` came from the pool or a fresh segment, so its old next
    // neighbour was not free: `rest` has no free neighbour to merge with.
    pool_for(rest).insert(rest);
  }
  block->allocated = true;
  block->requested = requested;
  live_[block->ptr] = block;
  stats_.allocated_bytes += static_cast<int64_t>(block->size);
  raise_peak(stats_.allocated_bytes, stats_.peak_allocated_bytes);
  stats_.requested_bytes += static_cast<int64_t>(requested);
  raise_peak(stats_.requested_bytes, stats_.peak_requested_bytes);
  ++stats_.allocation_count;
  ++stats_.live_allocations;
  return block->ptr;
}

void CachingPolicy::deallocate(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  LT_CHECK(it != live_.end(), "free of ", ptr, " on ", device_name_,
           ": not a live allocation of this allocator");
  Block* block = it->second;
  live_.erase(it);
  block->allocated = false;
  stats_.allocated_bytes -= static_cast<int64_t>(block->size);
  stats_.requested_bytes -= static_cast<int64_t>(block->requested);
  block->requested = 0;
  --stats_.live_allocations;
  if (block->uses.empty()) {
    return_to_pool(block);
    return;
  }
  // Note [Use on other streams]
  for (StreamId use : block->uses) {
    pending_[use].emplace_back(raw_.record_event(use), block);
    ++block->pending_events;
  }
  block->uses.clear();
  ++stats_.blocks_awaiting_events;
}

void CachingPolicy::return_to_pool(Block* block) {
  Pool& pool = pool_for(block);
  if (Block* prev = block->prev; prev != nullptr && prev->in_pool()) {
    pool.erase(prev);
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (Block* next = block->next; next != nullptr && next->in_pool()) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    delete next;
  }
  pool.insert(block);
}

void CachingPolicy::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  LT_CHECK(it != live_.end(), "record_stream on ", ptr, " on ", device_name_,
           ": not a live allocation of this allocator");
  Block* block = it->second;
  if (stream == block->stream) return;
  for (StreamId use : block->uses) {
    if (use == stream) return;
  }
  block->uses.push_back(stream);
}

void CachingPolicy::process_events() {
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto& queue = it->second;
    while (!queue.empty() && raw_.event_done(queue.front().first)) {
      auto [event, block] = queue.front();
      queue.pop_front();
      raw_.release_event(event);
      if (--block->pending_events == 0) {
        --stats_.blocks_awaiting_events;
        return_to_pool(block);
      }
    }
    it = queue.empty() ? pending_.erase(it) : std::next(it);
  }
}

void CachingPolicy::wait_all_events() {
  for (auto& [stream, queue] : pending_) {
    for (auto& [event, block] : queue) {
      raw_.wait_event(event);
      raw_.release_event(event);
      if (--block->pending_events == 0) {
        --stats_.blocks_awaiting_events;
        return_to_pool(block);
      }
    }
  }
  pending_.clear();
}

void CachingPolicy::release_unused_segments() {
  for (auto it = segments_.begin(); it != segments_.end();) {
    Block* head = it->second;
    if (head->next != nullptr || !head->in_pool()) {
      ++it;
      continue;
    }
    pool_for(head).erase(head);
    raw_.free(head->ptr);
    ++stats_.raw_frees;
    stats_.reserved_bytes -= static_cast<int64_t>(head->size);
    delete head;
    it = segments_.erase(it);
  }
}

void CachingPolicy::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  wait_all_events();
  release_unused_segments();
}

void CachingPolicy::fail_out_of_memory(size_t bytes, size_t rounded, size_t segment,
                                       StreamId stream) {
  DeviceMemoryInfo info{};
  std::string device_free = "unknown";
  try {
    info = raw_.memory_info();
    device_free = format_bytes(info.free_bytes) + " of " + format_bytes(info.total_bytes);
  } catch (const std::exception&) {
    // The numbers below are still worth reporting.
  }
  auto allocated = static_cast<size_t>(stats_.allocated_bytes);
  auto reserved = static_cast<size_t>(stats_.reserved_bytes);
  fail("out of memory on ", device_name_, ": tried to allocate ", format_bytes(bytes),
       " (rounded to ", format_bytes(rounded), ", needing a new segment of ", format_bytes(segment),
       ") on stream ", format_stream(stream), "; this allocator has ", format_bytes(allocated),
       " allocated in ", stats_.live_allocations, " blocks and ", format_bytes(reserved),
       " reserved (", format_bytes(reserved - allocated),
       " of it cached in partly used segments, after returning every unused segment); the "
       "device has ",
       device_free, " free");
}

CachingStats CachingPolicy::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingPolicy::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_requested_bytes = stats_.requested_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

size_t CachingPolicy::block_size(void* ptr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  LT_CHECK(it != live_.end(), ptr, " is not a live allocation on ", device_name_);
  return it->second->size;
}

std::vector<SegmentInfo> CachingPolicy::segments() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<SegmentInfo> out;
  out.reserve(segments_.size());
  for (const auto& [address, head] : segments_) {
    SegmentInfo seg;
    seg.address = address;
    seg.stream = head->stream;
    seg.small_pool = head->small;
    for (const Block* b = head; b != nullptr; b = b->next) {
      seg.blocks.push_back(
          {reinterpret_cast<uintptr_t>(b->ptr), b->size, b->allocated, b->pending_events > 0});
      seg.size += b->size;
    }
    out.push_back(std::move(seg));
  }
  return out;
}

}  // namespace lt
