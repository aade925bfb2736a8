#include "compile/gpu_kernel.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "compile/interpret.h"
#include "compile/tensor_call.h"
#include "core/error.h"
#include "core/stream.h"

#if LT_WITH_CUDA
#include <cuda.h>
#include <cuda_runtime.h>

#include "core/cuda/check.cuh"
#endif

namespace lt::compile {

#if LT_WITH_CUDA
namespace {

// The driver calls this file makes, looked up once through the runtime.
struct DriverCalls {
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_unload)(CUmodule) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
};

template <class Function>
void resolve(const char* name, Function& function) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  // 12000: these functions as CUDA 12.0 defined them (none changed since).
  LT_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &address, 12000, cudaEnableDefault, &found));
  LT_CHECK(found == cudaDriverEntryPointSuccess && address != nullptr,
           "compile: the CUDA driver does not provide ", name);
  function = reinterpret_cast<Function>(address);
}

const DriverCalls& driver() {
  static const DriverCalls calls = [] {
    DriverCalls c;
    resolve("cuModuleLoadData", c.module_load_data);
    resolve("cuModuleUnload", c.module_unload);
    resolve("cuModuleGetFunction", c.module_get_function);
    resolve("cuLaunchKernel", c.launch_kernel);
    resolve("cuGetErrorString", c.get_error_string);
    return c;
  }();
  return calls;
}

void check_driver(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) [[likely]]
    return;
  const char* text = nullptr;
  if (driver().get_error_string(result, &text) != CUDA_SUCCESS || text == nullptr) text = "?";
  fail("compile: ", what, " failed: CUDA driver error ", static_cast<int>(result), " (", text, ")");
}

// The runtime's device and, with it (CUDA 12 and later: cudaSetDevice
// initializes the primary context), that device's primary context made
// current for the driver calls that follow; restored after.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) : device_(device) {
    LT_CUDA_CHECK(cudaGetDevice(&previous_));
    // Even when it is the runtime's device already: a thread that has not
    // called the runtime yet has no context current for the driver.
    LT_CUDA_CHECK(cudaSetDevice(device_));
  }
  ~CurrentDevice() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int device_;
  int previous_ = 0;
};

// A grid-stride kernel needs no more blocks than keep every SM busy many
// times over (132 SMs x 8 blocks of 256 threads on an H200, ~60 waves);
// more would only add blocks that start and find nothing to do.
constexpr int64_t kMaxElementwiseBlocks = 65535;

// The parameters as compile/gpu_mlir.h lays them out: two integers (rows
// and cols), then per buffer a memref descriptor (pointer twice, offset 0,
// size, stride 1).
std::vector<int64_t> kernel_words(int64_t first, int64_t second, std::span<void* const> buffers,
                                  std::span<const int64_t> counts) {
  std::vector<int64_t> words = {first, second};
  for (size_t i = 0; i < buffers.size(); ++i) {
    int64_t pointer = 0;
    static_assert(sizeof(pointer) == sizeof(void*));
    std::memcpy(&pointer, &buffers[i], sizeof pointer);
    words.insert(words.end(), {pointer, pointer, 0, counts[i], 1});
  }
  return words;
}

void launch_blocks(void* function, int64_t blocks, int threads, std::vector<int64_t> words,
                   void* stream) {
  LT_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "compile: ", blocks,
           " blocks are more than a grid holds");
  std::vector<void*> params;
  for (int64_t& word : words) params.push_back(&word);
  check_driver(
      driver().launch_kernel(static_cast<CUfunction>(function), static_cast<unsigned>(blocks), 1, 1,
                             static_cast<unsigned>(threads), 1, 1, 0, static_cast<CUstream>(stream),
                             params.data(), nullptr),
      "cuLaunchKernel");
}

}  // namespace

std::string cuda_device_chip(int device) {
  int major = 0, minor = 0;
  LT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  LT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return "sm_" + std::to_string(major * 10 + minor);
}

GpuKernel::GpuKernel(std::shared_ptr<const GpuBinary> binary, int device, const std::string& chip)
    : binary_(std::move(binary)), device_(device) {
  const std::string actual = cuda_device_chip(device);
  LT_CHECK(actual == chip, "compile: the GPU kernels are built for ", chip, ", but cuda:", device,
           " is ", actual, " (set the kernel cache's target to ", actual, ")");
  CurrentDevice current(device);
  CUmodule module = nullptr;
  check_driver(driver().module_load_data(&module, binary_->cubin.data()), "cuModuleLoadData");
  CUfunction function = nullptr, sum_function = nullptr;
  CUresult got = driver().module_get_function(&function, module, kGpuEntry);
  if (got == CUDA_SUCCESS && binary_->form == GpuLaunchForm::ColSums) {
    got = driver().module_get_function(&sum_function, module, kGpuColSumEntry);
  }
  if (got != CUDA_SUCCESS) driver().module_unload(module);
  check_driver(got, "cuModuleGetFunction");
  module_ = module;
  function_ = function;
  sum_function_ = sum_function;
}

GpuKernel::~GpuKernel() {
  // At exit the driver may be gone already; nothing to do about a failure.
  if (module_ != nullptr) driver().module_unload(static_cast<CUmodule>(module_));
}

void GpuKernel::launch(int64_t rows, int64_t cols, std::span<void* const> buffers,
                       std::span<const int64_t> counts, void* stream) const {
  LT_CHECK(buffers.size() == counts.size(), "compile: ", buffers.size(), " buffers but ",
           counts.size(), " counts");
  if (binary_->form == GpuLaunchForm::ColSums) {
    launch_col_sums(rows, cols, buffers, counts, stream);
    return;
  }
  if (rows == 0 || cols == 0) return;
  int64_t blocks = rows;  // RowPerBlock: block b owns row b
  if (binary_->form == GpuLaunchForm::Elementwise) {
    const int64_t span = int64_t{binary_->threads_per_block} * binary_->elements_per_thread;
    blocks = std::min((rows * cols + span - 1) / span, kMaxElementwiseBlocks);
  }
  CurrentDevice current(device_);
  launch_blocks(function_, blocks, binary_->threads_per_block,
                kernel_words(rows, cols, buffers, counts), stream);
}

void GpuKernel::launch_col_sums(int64_t rows, int64_t cols, std::span<void* const> buffers,
                                std::span<const int64_t> counts, void* stream) const {
  if (cols == 0) return;
  const Device device = Device::cuda(device_);
  LT_CHECK(stream == current_stream(device).handle(),
           "compile: a kernel with col sums runs on the device's current stream");
  // Each col sum's [blocks, cols] partials in place of its output; with no
  // rows, no blocks: the second kernel writes zeros.
  const int64_t blocks = rows > 0 ? gpu_col_sum_blocks(rows) : 0;
  std::vector<void*> first_buffers(buffers.begin(), buffers.end());
  std::vector<int64_t> first_counts(counts.begin(), counts.end());
  std::vector<Tensor> partials;
  for (size_t b : binary_->col_sum_buffers) {
    LT_CHECK(b < buffers.size() && counts[b] == cols, "compile: col sum buffer ", b, " must hold ",
             cols, " values");
    partials.push_back(Tensor::empty({std::max<int64_t>(blocks, 1), cols}, DType::F32, device));
    first_buffers[b] = partials.back().data_ptr();
    first_counts[b] = blocks * cols;
  }
  CurrentDevice current(device_);
  if (blocks > 0) {
    launch_blocks(function_, blocks, binary_->threads_per_block,
                  kernel_words(rows, cols, first_buffers, first_counts), stream);
  }
  const int64_t sum_blocks = (cols + kGpuColSumColumnsPerBlock - 1) / kGpuColSumColumnsPerBlock;
  for (size_t k = 0; k < partials.size(); ++k) {
    const size_t b = binary_->col_sum_buffers[k];
    void* const pair[] = {partials[k].data_ptr(), buffers[b]};
    const int64_t pair_counts[] = {blocks * cols, cols};
    launch_blocks(sum_function_, sum_blocks, kGpuThreadsPerBlock,
                  kernel_words(blocks, cols, pair, pair_counts), stream);
  }
  // The partials go back to the allocator now: it hands them out again
  // only to later work on this stream.
}

#else  // !LT_WITH_CUDA

std::string cuda_device_chip(int) {
  fail("compile: this lazytrain was built without CUDA");
}

GpuKernel::GpuKernel(std::shared_ptr<const GpuBinary> binary, int device, const std::string&)
    : binary_(std::move(binary)), device_(device) {
  fail("compile: this lazytrain was built without CUDA, so GPU kernels cannot be loaded");
}

GpuKernel::~GpuKernel() = default;

void GpuKernel::launch(int64_t, int64_t, std::span<void* const>, std::span<const int64_t>,
                       void*) const {
  fail("compile: this lazytrain was built without CUDA");
}

void GpuKernel::launch_col_sums(int64_t, int64_t, std::span<void* const>, std::span<const int64_t>,
                                void*) const {
  fail("compile: this lazytrain was built without CUDA");
}

#endif

std::vector<Tensor> call_gpu(const GpuKernel& kernel, const KernelGraph& graph,
                             const std::vector<Tensor>& inputs,
                             const std::vector<Tensor>& outputs) {
  const Device device = Device::cuda(kernel.device());
  PreparedCall prepared = prepare_call(graph, inputs, device, outputs);
  kernel.launch(prepared.rows, prepared.cols, prepared.buffers, prepared.counts,
                current_stream(device).handle());
  return std::move(prepared.outputs);
}

std::vector<Tensor> call_gpu(GpuKernelCache& cache, const KernelGraph& graph,
                             const std::vector<Tensor>& inputs) {
  LT_CHECK(!inputs.empty() && inputs.front().defined() && inputs.front().device().is_cuda(),
           "compile: call_gpu takes CUDA tensors");
  return call_gpu(*cache.get(graph, inputs.front().device().index), graph, inputs);
}

DeviceKernel kernel_for(KernelCache& cache, const KernelGraph& graph, Device device) {
  DeviceKernel kernel;
  kernel.device = device;
  if (device.is_cuda()) {
    kernel.gpu = cache.gpu().get(graph, device.index);
  } else {
    kernel.cpu = cache.get(graph);
  }
  return kernel;
}

void run_buffers(const DeviceKernel& kernel, int64_t rows, int64_t cols,
                 std::span<void* const> buffers, std::span<const int64_t> counts) {
  if (kernel.gpu) {
    kernel.gpu->launch(rows, cols, buffers, counts,
                       current_stream(Device::cuda(kernel.gpu->device())).handle());
    return;
  }
  LT_CHECK(kernel.cpu != nullptr, "compile: run_buffers has no kernel");
  kernel.cpu->run(rows, cols, buffers);
}

std::vector<Tensor> call(const DeviceKernel& kernel, const KernelGraph& graph,
                         const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  return kernel.gpu ? call_gpu(*kernel.gpu, graph, inputs, outputs)
                    : call(*kernel.cpu, graph, inputs, outputs);
}

}  // namespace lt::compile
