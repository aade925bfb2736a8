#pragma once
// A cubin from compile/gpu_kernel_cache.h loaded on one CUDA device with
// the driver API (cuModuleLoadData, cuModuleGetFunction) and launched with
// cuLaunchKernel in the argument list of compile/gpu_mlir.h. The driver's
// functions are looked up through the CUDA runtime
// (cudaGetDriverEntryPointByVersion), so no program links libcuda and all
// of them still start on machines without a GPU driver. Needs no MLIR.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compile/gpu_kernel_cache.h"
#include "compile/graph.h"
#include "compile/jit.h"
#include "compile/kernel_cache.h"
#include "core/tensor.h"

namespace lt::compile {

class GpuKernel {
 public:
  // Loads `binary` into `device`'s primary context (the CUDA runtime's).
  // Throws when the device's chip is not `chip` or the driver refuses.
  GpuKernel(std::shared_ptr<const GpuBinary> binary, int device, const std::string& chip);
  ~GpuKernel();
  GpuKernel(const GpuKernel&) = delete;
  GpuKernel& operator=(const GpuKernel&) = delete;

  // `buffers`: device pointers to the graph's inputs then outputs, each
  // contiguous, `counts` their element counts (element_count of its shape
  // class). Enqueued on `stream` (a cudaStream_t; null: the default
  // stream); returns without waiting. The ColSums form (compile/
  // gpu_mlir.h) allocates its partials on the device, so there `stream`
  // must be the device's current stream (the allocator's).
  void launch(int64_t rows, int64_t cols, std::span<void* const> buffers,
              std::span<const int64_t> counts, void* stream) const;

  int device() const { return device_; }
  const GpuBinary& binary() const { return *binary_; }

 private:
  // The partials' kernel, then the one that sums them into the col sums.
  void launch_col_sums(int64_t rows, int64_t cols, std::span<void* const> buffers,
                       std::span<const int64_t> counts, void* stream) const;

  std::shared_ptr<const GpuBinary> binary_;
  int device_;
  void* module_ = nullptr;        // CUmodule
  void* function_ = nullptr;      // CUfunction
  void* sum_function_ = nullptr;  // CUfunction kGpuColSumEntry (ColSums form)
};

// The chip of CUDA device `device`, as ptxas names it ("sm_90").
std::string cuda_device_chip(int device);

// Runs `graph` on CUDA tensors, as compile::call (compile/tensor_call.h)
// does on CPU ones: the inputs on `kernel`'s device, contiguous, of the
// graph's dtypes and agreeing shapes; the outputs allocated there; the
// kernel (compiled from `graph`) launched on the device's current stream.
std::vector<Tensor> call_gpu(const GpuKernel& kernel, const KernelGraph& graph,
                             const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& outputs = {});
// The same with the kernel from `cache`, for the inputs' device.
std::vector<Tensor> call_gpu(GpuKernelCache& cache, const KernelGraph& graph,
                             const std::vector<Tensor>& inputs);

// A graph's kernel for one device, for callers that run on either (the
// fusion pass's chains): compiled for the CPU through the cache, or loaded
// on a CUDA device through its GPU half (KernelCache::gpu).
struct DeviceKernel {
  Device device = Device::cpu();
  std::shared_ptr<const CpuKernel> cpu;
  std::shared_ptr<const GpuKernel> gpu;
};
// Throws lt::Error as the cache does (cannot compile, kernel not cached).
DeviceKernel kernel_for(KernelCache& cache, const KernelGraph& graph, Device device);
// Runs `kernel` over [rows, cols] with its buffers as prepare_call lays
// them out (PreparedCall::buffers and counts: the inputs, then the outputs
// not written over an input), for callers that keep their arguments as
// pointers: the optimizer updates, whose calls so make no tensors. Checks
// nothing about the buffers: the caller answers for each one's device,
// dtype and size. On CUDA enqueued on the device's current stream.
void run_buffers(const DeviceKernel& kernel, int64_t rows, int64_t cols,
                 std::span<void* const> buffers, std::span<const int64_t> counts);
// compile::call or call_gpu, by the kernel's device (`outputs` as there).
std::vector<Tensor> call(const DeviceKernel& kernel, const KernelGraph& graph,
                         const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& outputs = {});

}  // namespace lt::compile
