#include "ops/cuda/kernel_common.cuh"
#include "optim/adamw8bit_kernel.h"
#include "optim/cuda/adamw8bit.h"
#include "optim/cuda/adamw_update.cuh"

namespace lt::optim::cuda {

namespace {

using ops::cuda::bf16;

constexpr int kThreads = 256;

// Both sorted code tables, passed by value (2 KiB of kernel parameters)
// and copied to shared memory by each block.
struct Codes {
  float m[256];       // signed_code()
  float sqrt_v[256];  // unsigned_code()
};

// quantize_nearest on a sorted table of 256: the lower bound of x, then the
// nearer of its two neighbours, an exact tie going to the smaller magnitude.
// The CPU's segment search returns exactly this rank (adamw8bit_kernel.h).
__device__ __forceinline__ uint8_t nearest_rank(const float* code, float x) {
  int lo = 0, count = 256;  // std::lower_bound: first index with code >= x
  while (count > 0) {
    const int half = count >> 1;
    if (code[lo + half] < x) {
      lo += half + 1;
      count -= half + 1;
    } else {
      count = half;
    }
  }
  if (lo == 0) return 0;
  if (lo == 256) return 255;
  const float below = code[lo - 1], above = code[lo];
  const float d_lo = __fsub_rn(x, below), d_hi = __fsub_rn(above, x);
  if (d_lo < d_hi) return static_cast<uint8_t>(lo - 1);
  if (d_hi < d_lo) return static_cast<uint8_t>(lo);
  return static_cast<uint8_t>(fabsf(below) <= fabsf(above) ? lo - 1 : lo);
}

// The CPU's Reciprocal (adamw8bit_kernel.h): x / absmax as x * (1 / absmax)
// (`inverse`, one division per block), the division itself when 1 / absmax
// is not finite; 0 for absmax 0.
__device__ __forceinline__ float quotient(float x, float absmax, float inverse) {
  if (absmax == 0.0f) return 0.0f;
  return isfinite(inverse) ? __fmul_rn(x, inverse) : __fdiv_rn(x, absmax);
}

// One thread block per quantization block. Shared memory: the two tables,
// then the block's updated m and sqrt(v) (2 * block_size floats, dynamic).
// The second moment is stored as sqrt(v) (adamw8bit_kernel.h, "Note [the
// second moment is stored as sqrt(v)]"): dequantized, squared to v, updated,
// and the new v's sqrt requantized.
template <typename Grad>
__global__ void adamw8bit_kernel(AdamWScalars s, Codes codes, float* __restrict__ param,
                                 const Grad* __restrict__ grad, uint8_t* __restrict__ m_codes,
                                 float* __restrict__ m_scales, uint8_t* __restrict__ sqrt_v_codes,
                                 float* __restrict__ sqrt_v_scales, bf16* __restrict__ shadow,
                                 int64_t numel, int64_t block_size) {
  extern __shared__ float moments[];  // m [block_size], then sqrt(v) [block_size]
  __shared__ float m_code[256], sqrt_v_code[256];
  __shared__ float scratch[32];
  for (int k = threadIdx.x; k < 256; k += blockDim.x) {
    m_code[k] = codes.m[k];
    sqrt_v_code[k] = codes.sqrt_v[k];
  }
  __syncthreads();

  const int64_t b = blockIdx.x;
  const int64_t begin = b * block_size;
  const int n = static_cast<int>(min(block_size, numel - begin));
  float* m = moments;
  float* sqrt_v = moments + block_size;
  const float m_scale = m_scales[b], sqrt_v_scale = sqrt_v_scales[b];
  float m_max = 0.0f, sqrt_v_max = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t e = begin + i;
    float mi = __fmul_rn(m_code[m_codes[e]], m_scale);
    const float ri = __fmul_rn(sqrt_v_code[sqrt_v_codes[e]], sqrt_v_scale);
    float vi = __fmul_rn(ri, ri);
    float p = param[e];
    update_one(s, p, widen(grad[e]), mi, vi);
    param[e] = p;
    if (shadow != nullptr) shadow[e] = __float2bfloat16_rn(p);
    m[i] = mi;
    sqrt_v[i] = __fsqrt_rn(vi);  // the update's own denominator root
    m_max = fmaxf(m_max, fabsf(mi));
    sqrt_v_max = fmaxf(sqrt_v_max, fabsf(sqrt_v[i]));
  }
  m_max = ops::cuda::block_max(m_max, scratch);
  sqrt_v_max = ops::cuda::block_max(sqrt_v_max, scratch);
  // quantize_block: an all-zero block keeps scale 0 and the rank of 0.
  const float m_inverse = __fdiv_rn(1.0f, m_max), sqrt_v_inverse = __fdiv_rn(1.0f, sqrt_v_max);
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t e = begin + i;
    m_codes[e] = nearest_rank(m_code, quotient(m[i], m_max, m_inverse));
    sqrt_v_codes[e] = nearest_rank(sqrt_v_code, quotient(sqrt_v[i], sqrt_v_max, sqrt_v_inverse));
  }
  if (threadIdx.x == 0) {
    m_scales[b] = m_max;
    sqrt_v_scales[b] = sqrt_v_max;
  }
}

Codes make_codes() {
  Codes c{};
  for (int k = 0; k < 256; ++k) {
    c.m[k] = signed_code()[static_cast<size_t>(k)];
    c.sqrt_v[k] = unsigned_code()[static_cast<size_t>(k)];
  }
  return c;
}

}  // namespace

void adamw8bit_update(const AdamWScalars& s, const Tensor& param, const Tensor& grad,
                      const Tensor& m_codes, const Tensor& m_scales, const Tensor& sqrt_v_codes,
                      const Tensor& sqrt_v_scales, int64_t block_size, const Tensor& shadow) {
  const int64_t n = param.numel();
  if (n == 0) return;
  LT_CHECK(block_size > 0 && block_size <= kMaxCudaBlockSize, "optim.block_size must be in [1, ",
           kMaxCudaBlockSize, "] for parameters on CUDA, got ", block_size);
  static const Codes codes = make_codes();
  ::lt::cuda::DeviceGuard guard(param.device().index);
  cudaStream_t stream = ops::cuda::stream_for(param.device());
  const int64_t blocks = (n + block_size - 1) / block_size;
  LT_CHECK(blocks <= 0x7fffffff, "AdamW8bit: ", blocks, " blocks exceed one CUDA grid");
  const size_t shared = 2 * static_cast<size_t>(block_size) * sizeof(float);
  auto* p = static_cast<float*>(param.data_ptr());
  auto* mc = static_cast<uint8_t*>(m_codes.data_ptr());
  auto* vc = static_cast<uint8_t*>(sqrt_v_codes.data_ptr());
  auto* ms = static_cast<float*>(m_scales.data_ptr());
  auto* vs = static_cast<float*>(sqrt_v_scales.data_ptr());
  bf16* sh = shadow.defined() ? static_cast<bf16*>(shadow.data_ptr()) : nullptr;
  const dim3 grid(static_cast<unsigned>(blocks));
  if (grad.dtype() == DType::BF16) {
    adamw8bit_kernel<bf16><<<grid, kThreads, shared, stream>>>(
        s, codes, p, static_cast<const bf16*>(grad.data_ptr()), mc, ms, vc, vs, sh, n, block_size);
  } else {
    adamw8bit_kernel<float><<<grid, kThreads, shared, stream>>>(
        s, codes, p, static_cast<const float*>(grad.data_ptr()), mc, ms, vc, vs, sh, n, block_size);
  }
  LT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lt::optim::cuda
