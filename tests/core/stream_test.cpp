// Streams and events in the CPU build (or on the CPU device of a CUDA
// build): the same calls executors make on the GPU, as no-ops and clocks.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "core/stream.h"

namespace lt {
namespace {

TEST(Stream, CpuStreamIsANullHandleWithNothingPending) {
  Stream s = Stream::create(Device::cpu(), -1);
  EXPECT_EQ(s, Stream());
  EXPECT_EQ(s, Stream::default_stream(Device::cpu()));
  EXPECT_EQ(s.handle(), nullptr);
  EXPECT_EQ(s.id(), 0u);
  EXPECT_TRUE(s.query());
  s.synchronize();
  EXPECT_EQ(current_stream(Device::cpu()), Stream());
}

TEST(Stream, GuardSetsAndRestoresTheCurrentStreamPerThread) {
  Device gpu = Device::cuda(1);
  EXPECT_EQ(current_stream(gpu), Stream::default_stream(gpu));
  EXPECT_TRUE(current_stream(gpu).is_default());
  EXPECT_EQ(current_stream(gpu).device(), gpu);
  {
    // A default stream value needs no CUDA, so the bookkeeping is testable
    // in any build: compare devices and handles.
    Stream other = Stream::default_stream(Device::cuda(3));
    StreamGuard guard(other);
    EXPECT_EQ(current_stream(Device::cuda(3)), other);
    EXPECT_EQ(current_stream(gpu), Stream::default_stream(gpu)) << "other devices untouched";
  }
  EXPECT_EQ(current_stream(Device::cuda(3)), Stream::default_stream(Device::cuda(3)));
}

TEST(Event, CpuEventsAreCompleteAndMeasureHostTime) {
  Event start(true), end(true);
  EXPECT_TRUE(start.query()) << "never recorded";
  EXPECT_FALSE(start.recorded());
  EXPECT_THROW(start.elapsed_ms(end), Error);
  start.record(Stream());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  end.record(Stream());
  EXPECT_TRUE(end.query());
  end.synchronize();
  end.wait(Stream());
  float ms = start.elapsed_ms(end);
  EXPECT_GE(ms, 19.0f);
  EXPECT_LT(ms, 2000.0f);
  Event moved = std::move(end);
  EXPECT_TRUE(moved.recorded());
  EXPECT_FALSE(end.recorded());  // NOLINT(bugprone-use-after-move): moved-from is empty
}

TEST(StreamAwareAllocator, RecordStreamIsANoOpForPlainAllocators) {
  CpuAllocator alloc;
  void* p = alloc.allocate(64);
  record_stream(alloc, p, Stream());
  alloc.deallocate(p, 64);
}

#ifndef LT_WITH_CUDA
TEST(Stream, CudaStreamsNeedTheCudaBuild) {
  EXPECT_THROW(Stream::create(Device::cuda(0)), Error);
  EXPECT_THROW(Stream::default_stream(Device::cuda(0)).synchronize(), Error);
}
#endif

}  // namespace
}  // namespace lt
