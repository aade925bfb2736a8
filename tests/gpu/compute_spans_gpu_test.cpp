// Note [One use queued ahead] (exec/streaming.cpp) on the CUDA streaming
// device: a compute span is timed by the GPU, not by the host that queued
// it, and the host waits only for the span before the last, so one span
// stays queued while the next is prepared.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include "exec/cuda/streaming_device_cuda.h"
#include "gpu_test_support.h"
#include "ops/matmul.h"

namespace lt::exec {
namespace {

using Clock = StreamingDevice::Clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Seen {
  bool done = false;
  Clock::time_point begin, end;
};

StreamingDevice::SpanDone record_into(Seen* seen) {
  return [seen](Clock::time_point begin, Clock::time_point end) {
    seen->done = true;
    seen->begin = begin;
    seen->end = end;
  };
}

// Some tens of milliseconds of GPU work, queued in well under that.
void queue_products(const Tensor& a, int count) {
  for (int i = 0; i < count; ++i) ops::matmul(a, a);
}

TEST(ComputeSpansGpu, ASpanIsTheGpusTimeAndOneStaysQueued) {
  LT_REQUIRE_GPU();
  CudaStreamingDevice device(0);
  auto scope = device.compute_scope();
  const Tensor a = Tensor::full({8192, 8192}, 0.001, DType::BF16, Device::cuda(0));
  queue_products(a, 1);  // library set-up outside the spans
  device.drain_compute();
  device.finish_compute();

  Seen first, second;
  const Clock::time_point queued_first = Clock::now();
  device.begin_compute_span();
  queue_products(a, 24);
  device.end_compute_span(record_into(&first));
  const double queueing = seconds(queued_first, Clock::now());
  // Nothing waited for yet: the span runs on while the host goes on.
  EXPECT_FALSE(first.done);
  device.mark_compute();
  EXPECT_FALSE(device.compute_idle_since().has_value());

  device.begin_compute_span();
  queue_products(a, 24);
  device.end_compute_span(record_into(&second));
  // The second span's end waited for the first only.
  ASSERT_TRUE(first.done);
  EXPECT_FALSE(second.done);
  const double first_s = seconds(first.begin, first.end);
  // 24 products of 2 x 8192^3 flops: over 10 ms on any GPU that runs this
  // suite, and more than the host took to queue them.
  EXPECT_GT(first_s, 0.01);
  EXPECT_GT(first_s, queueing);
  // On the host clock: after the host asked for it, ended by now.
  EXPECT_GE(seconds(queued_first, first.begin), -1e-3);
  EXPECT_LE(seconds(first.end, Clock::now()), 10.0);
  EXPECT_GE(seconds(first.end, Clock::now()), -1e-3);

  device.drain_compute();
  ASSERT_TRUE(second.done);
  // One stream: the second ran after the first, for about as long.
  EXPECT_GE(seconds(first.end, second.begin), -1e-3);
  const double second_s = seconds(second.begin, second.end);
  EXPECT_NEAR(second_s, first_s, 0.5 * first_s);
  // Marked when idle, the device has been idle since about the mark.
  const Clock::time_point marked = Clock::now();
  device.mark_compute();
  device.finish_compute();
  const std::optional<Clock::time_point> idle = device.compute_idle_since();
  ASSERT_TRUE(idle.has_value());
  EXPECT_GE(seconds(second.end, *idle), -1e-3);
  EXPECT_NEAR(seconds(marked, *idle), 0.0, 1e-3);
}

TEST(ComputeSpansGpu, AFailedDrainLeavesNoSpanBehind) {
  LT_REQUIRE_GPU();
  CudaStreamingDevice device(0);
  auto scope = device.compute_scope();
  const Tensor a = Tensor::full({1024, 1024}, 0.001, DType::BF16, Device::cuda(0));
  int calls = 0;
  device.begin_compute_span();
  queue_products(a, 2);
  device.end_compute_span([&](Clock::time_point, Clock::time_point) {
    ++calls;
    throw Error("a failing span");
  });
  EXPECT_THROW(device.drain_compute(), Error);
  EXPECT_EQ(calls, 1);
  // The failed span is gone: the next drain has nothing of it to call.
  device.drain_compute();
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace lt::exec
