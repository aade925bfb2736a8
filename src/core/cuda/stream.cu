// CUDA streams and events behind core/stream.h (see core/cuda/runtime_calls.h).
#include <algorithm>

#include "core/cuda/check.cuh"
#include "core/cuda/device_guard.cuh"
#include "core/cuda/runtime_calls.h"

namespace lt::cuda {

namespace {
cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}
cudaEvent_t as_event(void* e) {
  return static_cast<cudaEvent_t>(e);
}

// cudaStreamQuery and cudaEventQuery report unfinished work as
// cudaErrorNotReady, which is an answer, not a failure.
bool finished(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // not an error: keep it out of the next check
    return false;
  }
  fail("CUDA error ", cudaGetErrorName(status), " (", cudaGetErrorString(status), ") in ", what);
}
}  // namespace

void* stream_create(int device, int priority) {
  DeviceGuard guard(device);
  // "greatest" is the numerically lowest (highest priority) value.
  int least = 0, greatest = 0;
  LT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  priority = std::clamp(priority, greatest, least);
  cudaStream_t stream = nullptr;
  LT_CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, priority));
  return stream;
}

void stream_destroy(int device, void* stream) noexcept {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return;  // the context is gone
  cudaSetDevice(device);
  cudaStreamSynchronize(as_stream(stream));
  cudaStreamDestroy(as_stream(stream));
  cudaSetDevice(previous);
  cudaGetLastError();
}

void stream_synchronize(int device, void* stream) {
  DeviceGuard guard(device);
  LT_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream)));
}

bool stream_query(int device, void* stream) {
  DeviceGuard guard(device);
  return finished(cudaStreamQuery(as_stream(stream)), "cudaStreamQuery");
}

void* event_create(int device, bool timing, bool blocking_sync) {
  DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  const unsigned flags = (timing ? cudaEventDefault : cudaEventDisableTiming) |
                         (blocking_sync ? cudaEventBlockingSync : 0u);
  LT_CUDA_CHECK(cudaEventCreateWithFlags(&event, flags));
  return event;
}

void event_destroy(int device, void* event) noexcept {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return;
  cudaSetDevice(device);
  cudaEventDestroy(as_event(event));
  cudaSetDevice(previous);
  cudaGetLastError();
}

void event_record(void* event, int device, void* stream) {
  DeviceGuard guard(device);
  LT_CUDA_CHECK(cudaEventRecord(as_event(event), as_stream(stream)));
}

void stream_wait_event(int device, void* stream, void* event) {
  DeviceGuard guard(device);
  LT_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream), as_event(event), 0));
}

void event_synchronize(void* event) {
  LT_CUDA_CHECK(cudaEventSynchronize(as_event(event)));
}

bool event_query(void* event) {
  return finished(cudaEventQuery(as_event(event)), "cudaEventQuery");
}

float event_elapsed_ms(void* start, void* end) {
  float ms = 0;
  LT_CUDA_CHECK(cudaEventElapsedTime(&ms, as_event(start), as_event(end)));
  return ms;
}

}  // namespace lt::cuda
