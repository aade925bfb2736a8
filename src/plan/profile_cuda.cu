// Host<->device copy rates for `lazytrain profile`: pinned buffers, one
// stream per direction, CUDA events around the copies.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <thread>
#include <vector>

#include "core/cuda/check.cuh"
#include "core/cuda/device_guard.cuh"
#include "plan/profile.h"

namespace lt::plan {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Pinned host buffers and device buffers of `bytes`, one pair each way,
// and a stream per direction on `device`: what both copy measurements
// drive. What was allocated is freed, also when a later allocation throws.
struct CopyBuffers {
  int device;
  size_t bytes;
  void *host_in = nullptr, *host_out = nullptr, *dev_in = nullptr, *dev_out = nullptr;
  cudaStream_t up{}, down{};

  CopyBuffers(int device_index, int64_t size)
      : device(device_index), bytes(static_cast<size_t>(size)) {
    cuda::DeviceGuard guard(device);
    try {
      LT_CUDA_CHECK(cudaHostAlloc(&host_in, bytes, cudaHostAllocDefault));
      LT_CUDA_CHECK(cudaHostAlloc(&host_out, bytes, cudaHostAllocDefault));
      LT_CUDA_CHECK(cudaMalloc(&dev_in, bytes));
      LT_CUDA_CHECK(cudaMalloc(&dev_out, bytes));
      LT_CUDA_CHECK(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking));
      LT_CUDA_CHECK(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking));
    } catch (...) {
      release();
      throw;
    }
  }
  ~CopyBuffers() { release(); }
  CopyBuffers(const CopyBuffers&) = delete;
  CopyBuffers& operator=(const CopyBuffers&) = delete;

  void release() {
    cuda::DeviceGuard guard(device);
    if (up) cudaStreamDestroy(up);
    if (down) cudaStreamDestroy(down);
    cudaFree(dev_in);
    cudaFree(dev_out);
    cudaFreeHost(host_in);
    cudaFreeHost(host_out);
  }
};

}  // namespace

CopyRates measure_copy_rates(int device, int64_t bytes, int repeats) {
  LT_CUDA_CHECK(cudaSetDevice(device));
  const CopyBuffers b(device, bytes);
  cudaEvent_t start, up_done, down_done;
  LT_CUDA_CHECK(cudaEventCreate(&start));
  LT_CUDA_CHECK(cudaEventCreate(&up_done));
  LT_CUDA_CHECK(cudaEventCreate(&down_done));
  // mode 0: h2d alone, 1: d2h alone, 2: both at once (the slower one timed).
  auto run = [&](int mode) {
    LT_CUDA_CHECK(cudaEventRecord(start, b.up));
    LT_CUDA_CHECK(cudaStreamWaitEvent(b.down, start, 0));
    if (mode != 1)
      LT_CUDA_CHECK(cudaMemcpyAsync(b.dev_in, b.host_in, b.bytes, cudaMemcpyHostToDevice, b.up));
    if (mode != 0)
      LT_CUDA_CHECK(
          cudaMemcpyAsync(b.host_out, b.dev_out, b.bytes, cudaMemcpyDeviceToHost, b.down));
    LT_CUDA_CHECK(cudaEventRecord(up_done, b.up));
    LT_CUDA_CHECK(cudaEventRecord(down_done, b.down));
    LT_CUDA_CHECK(cudaEventSynchronize(up_done));
    LT_CUDA_CHECK(cudaEventSynchronize(down_done));
    float up_ms = 0, down_ms = 0;
    LT_CUDA_CHECK(cudaEventElapsedTime(&up_ms, start, up_done));
    LT_CUDA_CHECK(cudaEventElapsedTime(&down_ms, start, down_done));
    return static_cast<double>(bytes) / 1e9 / (std::max(up_ms, down_ms) / 1e3);
  };
  CopyRates r;
  std::vector<double> rates[3];
  for (int mode = 0; mode < 3; ++mode) {
    run(mode);  // warm-up
    for (int k = 0; k < repeats; ++k) rates[mode].push_back(run(mode));
  }
  r.h2d_gbps = median(rates[0]);
  r.d2h_gbps = median(rates[1]);
  r.bidir_gbps = median(rates[2]);
  cudaEventDestroy(start);
  cudaEventDestroy(up_done);
  cudaEventDestroy(down_done);
  return r;
}

struct BackgroundCopies::Impl {
  std::unique_ptr<CopyBuffers> buffers;  // freed after the worker has stopped
  std::atomic<bool> stop{false};
  std::atomic<int64_t> rounds{0};
  std::chrono::steady_clock::time_point start;
  std::exception_ptr failure;  // written by the worker before it ends
  std::atomic<bool> failed{false};
  std::thread worker;

  bool busy(cudaStream_t s) {
    const cudaError_t status = cudaStreamQuery(s);
    if (status == cudaErrorNotReady) return true;
    LT_CUDA_CHECK(status);
    return false;
  }
  void loop() {
    try {
      const CopyBuffers& b = *buffers;
      LT_CUDA_CHECK(cudaSetDevice(b.device));
      while (!stop.load()) {
        LT_CUDA_CHECK(cudaMemcpyAsync(b.dev_in, b.host_in, b.bytes, cudaMemcpyHostToDevice, b.up));
        LT_CUDA_CHECK(
            cudaMemcpyAsync(b.host_out, b.dev_out, b.bytes, cudaMemcpyDeviceToHost, b.down));
        while (busy(b.up) || busy(b.down))
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        ++rounds;
      }
    } catch (...) {
      failure = std::current_exception();
      failed = true;
    }
  }
};

BackgroundCopies::BackgroundCopies(int device, int64_t bytes) : impl_(std::make_unique<Impl>()) {
  Impl& c = *impl_;
  c.buffers = std::make_unique<CopyBuffers>(device, bytes);
  c.start = std::chrono::steady_clock::now();
  c.worker = std::thread([&c] { c.loop(); });
}

BackgroundCopies::~BackgroundCopies() {
  impl_->stop = true;
  impl_->worker.join();
}

double BackgroundCopies::gbps() const {
  if (impl_->failed.load()) std::rethrow_exception(impl_->failure);
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - impl_->start).count();
  return 2.0 * static_cast<double>(impl_->buffers->bytes) *
         static_cast<double>(impl_->rounds.load()) / 1e9 / s;
}

}  // namespace lt::plan
