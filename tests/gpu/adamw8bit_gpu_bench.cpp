// The CUDA 8-bit AdamW update's rate (optim/cuda/adamw8bit.cu) beside the
// f32 AdamW kernel's and a device-to-device copy's, at one size
// (LT_BENCH_NUMEL elements, default 2^28; LT_BENCH_BLOCK the quantization block,
// default 2048). A benchmark: set LT_BENCH=1
// (issue 27: the 7B's update on the whole card). Prints ms per call and
// bytes moved over time; asserts nothing about speed. Correctness is
// adamw8bit_gpu_test.cpp's (bit for bit against the CPU).
//
// "aligned" is the tensors as the optimizer allocates them (four elements
// per access); "offset by one" starts every array one element into its
// buffer, which the kernel serves one element per access.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "core/random.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "gpu_test_support.h"
#include "optim/adamw_kernel.h"
#include "optim/cuda/adamw.h"
#include "optim/cuda/adamw8bit.h"

namespace lt {
namespace {

const Device kGpu = Device::cuda(0);

double milliseconds_per_call(const std::function<void()>& call) {
  return testing::milliseconds_per_call(call, 10);
}

// A GPU tensor of n elements: `pattern` (on the GPU) repeated.
Tensor tiled(const Tensor& pattern, int64_t n) {
  Tensor out = Tensor::empty({n}, pattern.dtype(), kGpu);
  const int64_t k = pattern.numel();
  for (int64_t at = 0; at < n; at += k) {
    const int64_t end = std::min(n, at + k);
    out.slice(0, at, end).copy_(pattern.slice(0, 0, end - at));
  }
  return out;
}

void print_rate(const char* what, double ms, double bytes) {
  std::printf("%-44s %9.3f ms  %7.1f GB  %6.2f TB/s\n", what, ms, bytes / 1e9,
              bytes / (ms * 1e-3) / 1e12);
}

TEST(AdamW8bitGpuBench, UpdateRateAgainstF32AdamWAndACopy) {
  LT_REQUIRE_GPU();
  if (std::getenv("LT_BENCH") == nullptr) GTEST_SKIP() << "a benchmark: set LT_BENCH=1";
  const char* numel = std::getenv("LT_BENCH_NUMEL");
  const int64_t n = numel != nullptr ? std::atoll(numel) : int64_t{1} << 28;
  // LT_BENCH_BLOCK: the quantization block (optim.block_size; 2048 default).
  const char* block = std::getenv("LT_BENCH_BLOCK");
  const int64_t kBlock = block != nullptr ? std::atoll(block) : 2048;
  Generator gen(7);
  const int64_t pattern = int64_t{1} << 22;
  const Tensor param = tiled(Tensor::randn({pattern}, gen).to(kGpu), n + 1);
  Tensor g = Tensor::randn({pattern}, gen);
  float* gv = g.data<float>();
  for (int64_t e = 0; e < pattern; ++e) gv[e] *= (e % 5 == 0) ? 1e-4f : 1e-2f;
  const Tensor grad = tiled(g.to(kGpu, DType::BF16), n + 1);
  const int64_t blocks = n / kBlock + 2;
  // Zero scales: every moment starts at 0 whatever its code; the warm-up
  // calls give the states the spread of a run.
  const Tensor m_codes = Tensor::zeros({n + 1}, DType::U8, kGpu);
  const Tensor sqrt_v_codes = Tensor::zeros({n + 1}, DType::U8, kGpu);
  const Tensor m_scales = Tensor::zeros({blocks}, DType::F32, kGpu);
  const Tensor sqrt_v_scales = Tensor::zeros({blocks}, DType::F32, kGpu);
  const Tensor shadow = Tensor::zeros({n + 1}, DType::BF16, kGpu);
  const optim::AdamWScalars s = optim::adamw_scalars(1e-3, 0.9, 0.999, 1e-8, 0.1, 1.0, 10);
  std::printf("%lld elements, blocks of %lld, bf16 gradients, bf16 copy written\n",
              static_cast<long long>(n), static_cast<long long>(kBlock));
  const double bytes_8bit = 16.0 * static_cast<double>(n);  // p 4+4, g 2, codes 2+2, copy 2
  for (int64_t offset : {0, 1}) {
    const auto part = [&](const Tensor& t) { return t.slice(0, offset, offset + n); };
    const double ms = milliseconds_per_call([&] {
      optim::cuda::adamw8bit_update(s, part(param), part(grad), part(m_codes), m_scales,
                                    part(sqrt_v_codes), sqrt_v_scales, kBlock, part(shadow));
    });
    print_rate(offset == 0 ? "adamw8bit, aligned" : "adamw8bit, offset by one", ms, bytes_8bit);
  }
  {
    const Tensor exp_avg = Tensor::zeros({n}, DType::F32, kGpu);
    const Tensor exp_avg_sq = Tensor::zeros({n}, DType::F32, kGpu);
    optim::cuda::AdamWCudaJob job{s,
                                  static_cast<float*>(param.data_ptr()),
                                  grad.data_ptr(),
                                  true,
                                  static_cast<float*>(exp_avg.data_ptr()),
                                  static_cast<float*>(exp_avg_sq.data_ptr()),
                                  static_cast<uint16_t*>(shadow.data_ptr()),
                                  n};
    const double ms = milliseconds_per_call([&] { optim::cuda::adamw_update_multi(kGpu, {job}); });
    print_rate("adamw f32 states", ms, 28.0 * static_cast<double>(n));
  }
  const Tensor to = Tensor::empty({n}, DType::F32, kGpu);
  const double ms = milliseconds_per_call([&] { to.copy_(param.slice(0, 0, n)); });
  print_rate("copy of the f32 parameters", ms, 8.0 * static_cast<double>(n));
}

}  // namespace
}  // namespace lt
