// The CUDA caching allocator, the pinned host pool, streams and events on a
// real GPU. Cross-stream safety is checked by data: work on a second stream
// writes into a freed block after a delay, and what the first stream wrote
// into the block it got next must survive.
#include <cuda_runtime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/caching_allocator.h"
#include "core/cuda/device_info.h"
#include "core/cuda/stream_delay.h"
#include "core/error.h"
#include "core/pinned_pool.h"
#include "core/storage.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "gpu_test_support.h"

namespace lt {
namespace {

constexpr size_t MiB = size_t{1} << 20;

#define LT_EXPECT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

cudaStream_t raw(const Stream& s) {
  return static_cast<cudaStream_t>(s.handle());
}

// Copies `n` bytes of device memory to the host, ordered after `stream`.
std::vector<unsigned char> read_back(const void* ptr, size_t n, const Stream& stream) {
  std::vector<unsigned char> host(n);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), ptr, n, cudaMemcpyDeviceToHost, raw(stream)), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(raw(stream)), cudaSuccess);
  return host;
}

// Enqueues a delay on `stream`. Returns false when the launch blocked the
// host until the kernel finished (compute-sanitizer serializes kernels):
// checks that need the work still pending are then skipped, while the
// checks by data still hold.
bool delay_pending(const Stream& stream, double ms) {
  auto t0 = std::chrono::steady_clock::now();
  cuda::enqueue_delay(stream, ms);
  auto took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
  return took.count() < ms / 2;
}

size_t count_not(const std::vector<unsigned char>& bytes, unsigned char value) {
  size_t n = 0;
  for (unsigned char b : bytes) n += b != value;
  return n;
}

TEST(CudaCachingAllocator, IsTheDefaultDeviceAllocator) {
  LT_REQUIRE_GPU();
  Allocator& a = default_allocator(Device::cuda(0));
  EXPECT_NE(dynamic_cast<cuda::CudaCachingAllocator*>(&a), nullptr);
  EXPECT_EQ(&a, &cuda::caching_allocator(0));
  int64_t before = a.stats().current_bytes;
  {
    Tensor t = Tensor::empty({256, 256}, DType::F32, Device::cuda(0));
    EXPECT_EQ(a.stats().current_bytes - before, 256 * 256 * 4);
  }
  EXPECT_EQ(a.stats().current_bytes, before);
}

TEST(CudaCachingAllocator, ReusesFreedBlocksWithoutCallingCudaMalloc) {
  LT_REQUIRE_GPU();
  cuda::CudaCachingAllocator alloc(0);
  void* a = alloc.allocate(1000);
  LT_EXPECT_CUDA(cudaMemset(a, 0x3c, 1000));
  EXPECT_EQ(count_not(read_back(a, 1000, Stream::default_stream(Device::cuda(0))), 0x3c), 0u);
  alloc.deallocate(a, 1000);
  void* b = alloc.allocate(900);
  EXPECT_EQ(b, a);
  void* big = alloc.allocate(100 * MiB);
  alloc.deallocate(big, 100 * MiB);
  void* big2 = alloc.allocate(99 * MiB);
  EXPECT_EQ(big2, big);
  CachingStats s = alloc.caching_stats();
  EXPECT_EQ(s.raw_mallocs, 2) << "one small and one large segment";
  EXPECT_EQ(s.cache_hits, 2);
  EXPECT_EQ(s.reserved_bytes, static_cast<int64_t>(2 * MiB + 100 * MiB));
  alloc.deallocate(b, 900);
  alloc.deallocate(big2, 99 * MiB);
  size_t free_before = 0, total = 0;
  LT_EXPECT_CUDA(cudaMemGetInfo(&free_before, &total));
  alloc.empty_cache();
  size_t free_after = 0;
  LT_EXPECT_CUDA(cudaMemGetInfo(&free_after, &total));
  EXPECT_EQ(alloc.caching_stats().reserved_bytes, 0);
  EXPECT_GE(free_after, free_before + 100 * MiB) << "the segments went back to the driver";
}

TEST(CudaCachingAllocator, BlocksAreTaggedWithTheCurrentStream) {
  LT_REQUIRE_GPU();
  cuda::CudaCachingAllocator alloc(0);
  Stream s1 = Stream::create(Device::cuda(0));
  Stream s2 = Stream::create(Device::cuda(0));
  void* a = nullptr;
  {
    StreamGuard guard(s1);
    EXPECT_EQ(current_stream(Device::cuda(0)), s1);
    a = alloc.allocate(4096);
  }
  EXPECT_TRUE(current_stream(Device::cuda(0)).is_default());
  alloc.deallocate(a, 4096);
  void* b = alloc.allocate(4096, s2);
  EXPECT_NE(b, a) << "a block freed on s1 is not handed to s2";
  StreamGuard guard(s1);
  void* c = alloc.allocate(4096);
  EXPECT_EQ(c, a);
  alloc.deallocate(b, 4096);
  alloc.deallocate(c, 4096);
}

TEST(CudaCachingAllocator, BlockUsedOnAnotherStreamIsNotReusedBeforeThatWorkEnds) {
  LT_REQUIRE_GPU();
  cuda::CudaCachingAllocator alloc(0);
  Stream s1 = Stream::create(Device::cuda(0));
  Stream s2 = Stream::create(Device::cuda(0));
  StreamGuard guard(s1);
  const size_t n = 256 * 1024;
  // The delay on s2 is long against the host's few microseconds per call,
  // so the late write lands after s1's writes unless something waits.
  const double delay_ms = 200;

  auto write_late_on_s2 = [&](void* p) {
    EXPECT_EQ(cudaMemsetAsync(p, 0x00, n, raw(s1)), cudaSuccess);
    Event written;
    written.record(s1);
    written.wait(s2);
    bool pending = delay_pending(s2, delay_ms);
    EXPECT_EQ(cudaMemsetAsync(p, 0xAB, n, raw(s2)), cudaSuccess);
    return pending;
  };

  // With record_stream: the block stays out of use until s2 is done.
  void* a = alloc.allocate(n);
  bool pending = write_late_on_s2(a);
  alloc.record_stream(a, s2);
  alloc.deallocate(a, n);
  void* b = alloc.allocate(n);
  if (pending) {
    EXPECT_NE(b, a);
  }
  LT_EXPECT_CUDA(cudaMemsetAsync(b, 0x11, n, raw(s1)));
  s2.synchronize();
  EXPECT_EQ(count_not(read_back(b, n, s1), 0x11), 0u) << "s2's late write reached b";
  void* c = alloc.allocate(n);
  EXPECT_EQ(c, a) << "reused once s2's work finished";
  EXPECT_EQ(alloc.caching_stats().raw_mallocs, 1);

  // Without it (the control): the block is reused at once and s2's late
  // write lands in the new owner's data. This shows the check above can
  // fail.
  pending = write_late_on_s2(c);
  alloc.deallocate(c, n);
  void* d = alloc.allocate(n);
  EXPECT_EQ(d, c);
  LT_EXPECT_CUDA(cudaMemsetAsync(d, 0x22, n, raw(s1)));
  s2.synchronize();
  auto bytes = read_back(d, n, s1);
  if (pending) {
    EXPECT_EQ(count_not(bytes, 0xAB), 0u) << "expected the hazard to show";
  }
  alloc.deallocate(b, n);
  alloc.deallocate(d, n);
}

TEST(CudaCachingAllocator, ManyStreamsInterleavedKeepTheirData) {
  LT_REQUIRE_GPU();
  cuda::CudaCachingAllocator alloc(0);
  std::vector<Stream> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(Stream::create(Device::cuda(0)));
  std::mt19937 rng(7);
  struct Live {
    void* ptr;
    size_t n;
    int stream;
    unsigned char value;
  };
  std::vector<Live> live;
  for (int step = 0; step < 400; ++step) {
    if (live.size() < 24 && rng() % 3 != 0) {
      int s = static_cast<int>(rng() % streams.size());
      size_t n = (rng() % 4 == 0) ? rng() % (12 * MiB) + 1 : rng() % (64 * 1024) + 1;
      auto value = static_cast<unsigned char>(rng() % 256);
      void* p = alloc.allocate(n, streams[s]);
      if (rng() % 4 == 0) cuda::enqueue_delay(streams[s], 0.2);
      LT_EXPECT_CUDA(cudaMemsetAsync(p, value, n, raw(streams[s])));
      live.push_back({p, n, s, value});
    } else if (!live.empty()) {
      size_t k = rng() % live.size();
      Live l = live[k];
      // Check on a different stream half the time: that stream reads the
      // block, so it must be recorded before the free.
      int reader = (rng() % 2) ? l.stream : static_cast<int>(rng() % streams.size());
      if (reader != l.stream) {
        Event e;
        e.record(streams[l.stream]);
        e.wait(streams[reader]);
        alloc.record_stream(l.ptr, streams[reader]);
      }
      auto bytes = read_back(l.ptr, l.n, streams[reader]);
      ASSERT_EQ(count_not(bytes, l.value), 0u) << "step " << step;
      alloc.deallocate(l.ptr, l.n);
      live.erase(live.begin() + static_cast<ptrdiff_t>(k));
    }
  }
  for (auto& l : live) alloc.deallocate(l.ptr, l.n);
  for (auto& s : streams) s.synchronize();
  EXPECT_GT(alloc.caching_stats().cache_hits, 0);
  EXPECT_EQ(alloc.caching_stats().allocated_bytes, 0);
}

TEST(CudaCachingAllocator, OutOfMemoryIsAClearError) {
  LT_REQUIRE_GPU();
  cuda::CudaCachingAllocator alloc(0);
  void* keep = alloc.allocate(64 * MiB);
  size_t huge = size_t{1} << 40;  // 1 TiB
  try {
    (void)alloc.allocate(huge);
    FAIL() << "1 TiB should not fit";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_THAT(msg, ::testing::HasSubstr("out of memory on cuda:0"));
    EXPECT_THAT(msg, ::testing::HasSubstr("tried to allocate 1.00 TiB"));
    EXPECT_THAT(msg, ::testing::HasSubstr("64.00 MiB (67108864 bytes) allocated"));
    EXPECT_THAT(msg, ::testing::HasSubstr("reserved"));
    EXPECT_THAT(msg, ::testing::HasSubstr("free"));
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "no sticky error left behind";
  EXPECT_EQ(alloc.caching_stats().ooms, 1);
  void* p = alloc.allocate(1 * MiB);
  LT_EXPECT_CUDA(cudaMemset(p, 0, 1 * MiB));
  alloc.deallocate(p, 1 * MiB);
  alloc.deallocate(keep, 64 * MiB);
}

TEST(PinnedHostPool, IsPageLockedAndRoundTripsOnTwoStreams) {
  LT_REQUIRE_GPU();
  PinnedHostPool pool;
  ASSERT_TRUE(pool.page_locked());
  const size_t count = (3 * MiB) / sizeof(float) + 17;
  const size_t n = count * sizeof(float);
  auto* up = static_cast<float*>(pool.allocate(n));
  auto* down = static_cast<float*>(pool.allocate(n));
  cudaPointerAttributes attributes{};
  LT_EXPECT_CUDA(cudaPointerGetAttributes(&attributes, up));
  EXPECT_EQ(attributes.type, cudaMemoryTypeHost) << "page-locked, known to CUDA";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (size_t i = 0; i < count; ++i) up[i] = dist(rng);
  std::memset(down, 0, n);

  Stream h2d = Stream::create(Device::cuda(0));
  Stream d2h = Stream::create(Device::cuda(0));
  void* device = cuda::caching_allocator(0).allocate(n, h2d);
  LT_EXPECT_CUDA(cudaMemcpyAsync(device, up, n, cudaMemcpyHostToDevice, raw(h2d)));
  Event landed;
  landed.record(h2d);
  landed.wait(d2h);
  cuda::caching_allocator(0).record_stream(device, d2h);
  LT_EXPECT_CUDA(cudaMemcpyAsync(down, device, n, cudaMemcpyDeviceToHost, raw(d2h)));
  d2h.synchronize();
  EXPECT_EQ(std::memcmp(up, down, n), 0);
  cuda::caching_allocator(0).deallocate(device, n);
  pool.deallocate(up, n);
  pool.deallocate(down, n);
  EXPECT_EQ(pool.pool_stats().raw_mallocs, 2);
}

TEST(PinnedHostPool, BufferInUseByACopyIsNotReusedBeforeTheCopyEnds) {
  LT_REQUIRE_GPU();
  PinnedHostPool pool;
  Stream s = Stream::create(Device::cuda(0));
  const size_t n = 1 * MiB;
  void* device = cuda::caching_allocator(0).allocate(n, s);
  auto* host = static_cast<unsigned char*>(pool.allocate(n));
  std::memset(host, 0x5e, n);
  bool pending = delay_pending(s, 200);
  LT_EXPECT_CUDA(cudaMemcpyAsync(device, host, n, cudaMemcpyHostToDevice, raw(s)));
  pool.record_stream(host, s);
  pool.deallocate(host, n);
  EXPECT_EQ(pool.pool_stats().blocks_awaiting_events, 1);
  // Reusing `host` now would let the host overwrite what the copy reads.
  auto* other = static_cast<unsigned char*>(pool.allocate(n));
  if (pending) {
    EXPECT_NE(other, host);
  }
  std::memset(other, 0x77, n);
  s.synchronize();
  EXPECT_EQ(count_not(read_back(device, n, s), 0x5e), 0u);
  void* again = pool.allocate(n);
  EXPECT_EQ(again, host) << "reusable once the copy's event completed";
  EXPECT_EQ(pool.pool_stats().blocks_awaiting_events, 0);
  pool.deallocate(other, n);
  pool.deallocate(again, n);
  cuda::caching_allocator(0).deallocate(device, n);
}

TEST(StreamEvent, TimingAndOrderingAcrossStreams) {
  LT_REQUIRE_GPU();
  Device gpu = Device::cuda(0);
  Stream s1 = Stream::create(gpu);
  Stream s2 = Stream::create(gpu, -1000);  // clamped to the highest priority
  EXPECT_NE(s1, s2);
  EXPECT_FALSE(s1.is_default());

  Event start(true), end(true);
  start.record(s1);
  bool pending = delay_pending(s1, 50);
  end.record(s1);
  if (pending) {
    EXPECT_FALSE(end.query()) << "50 ms of GPU work cannot be done yet";
    EXPECT_FALSE(s1.query());
  }
  end.synchronize();
  EXPECT_TRUE(end.query());
  EXPECT_TRUE(s1.query());
  float ms = start.elapsed_ms(end);
  EXPECT_GE(ms, 49.0f);
  EXPECT_LT(ms, 500.0f);

  // s2 waits for s1's event without the host waiting: a copy on s2 sees
  // what s1 wrote after a delay.
  const size_t n = 1 << 20;
  void* x = cuda::caching_allocator(0).allocate(n, s1);
  LT_EXPECT_CUDA(cudaMemsetAsync(x, 0x00, n, raw(s1)));
  pending = delay_pending(s1, 100);
  LT_EXPECT_CUDA(cudaMemsetAsync(x, 0x5c, n, raw(s1)));
  Event s1_done;
  s1_done.record(s1);
  s1_done.wait(s2);
  cuda::caching_allocator(0).record_stream(x, s2);
  auto t0 = std::chrono::steady_clock::now();
  auto seen = read_back(x, n, s2);
  double waited =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(count_not(seen, 0x5c), 0u) << "s2 did not wait for s1";
  if (pending) {
    EXPECT_GE(waited, 80.0) << "s2 did not wait for s1's delay";
  }
  EXPECT_TRUE(s1_done.query());
  cuda::caching_allocator(0).deallocate(x, n);

  // Timing needs both events created with it.
  Event untimed;
  untimed.record(s1);
  untimed.synchronize();
  EXPECT_THROW(start.elapsed_ms(untimed), Error);
}

TEST(StreamEvent, LastCopyOfAStreamWaitsForItsWork) {
  LT_REQUIRE_GPU();
  auto t0 = std::chrono::steady_clock::now();
  {
    Stream s = Stream::create(Device::cuda(0));
    cuda::enqueue_delay(s, 100);
    Stream copy = s;  // shares the stream
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 80.0);
}

TEST(StreamEvent, CurrentStreamIsPerThread) {
  LT_REQUIRE_GPU();
  Stream s = Stream::create(Device::cuda(0));
  StreamGuard guard(s);
  Stream seen_elsewhere;
  std::thread([&] { seen_elsewhere = current_stream(Device::cuda(0)); }).join();
  EXPECT_TRUE(seen_elsewhere.is_default());
  EXPECT_EQ(seen_elsewhere.device(), Device::cuda(0));
  EXPECT_EQ(current_stream(Device::cuda(0)), s);
}

TEST(DeviceCopy, OrderedAfterTheCurrentStream) {
  LT_REQUIRE_GPU();
  Stream s = Stream::create(Device::cuda(0));
  StreamGuard guard(s);
  Tensor t = Tensor::empty({1 << 20}, DType::U8, Device::cuda(0));
  cuda::enqueue_delay(s, 50);
  LT_EXPECT_CUDA(cudaMemsetAsync(t.data_ptr(), 0x42, 1 << 20, raw(s)));
  std::vector<unsigned char> host(1 << 20);
  copy_bytes(host.data(), Device::cpu(), t.data_ptr(), Device::cuda(0), host.size());
  EXPECT_EQ(count_not(host, 0x42), 0u);
}

}  // namespace
}  // namespace lt
