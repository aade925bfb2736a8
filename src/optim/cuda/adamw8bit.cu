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

// quantize_nearest on a sorted table of 256, given x's lower bound `lo`
// (the first index with code >= x): the nearer of its two neighbours, an
// exact tie going to the smaller magnitude. The CPU's segment search returns
// exactly this rank (adamw8bit_kernel.h).
__device__ __forceinline__ uint8_t nearest_of_lower_bound(const float* code, float x, int lo) {
  if (lo == 0) return 0;
  if (lo == 256) return 255;
  const float below = code[lo - 1], above = code[lo];
  const float d_lo = __fsub_rn(x, below), d_hi = __fsub_rn(above, x);
  if (d_lo < d_hi) return static_cast<uint8_t>(lo - 1);
  if (d_hi < d_lo) return static_cast<uint8_t>(lo);
  return static_cast<uint8_t>(fabsf(below) <= fabsf(above) ? lo - 1 : lo);
}

// The lower bound by binary search (std::lower_bound): 8 dependent shared
// loads. The general kernel's way.
__device__ __forceinline__ uint8_t nearest_rank(const float* code, float x) {
  int lo = 0, count = 256;
  while (count > 0) {
    const int half = count >> 1;
    if (code[lo + half] < x) {
      lo += half + 1;
      count -= half + 1;
    } else {
      count = half;
    }
  }
  return nearest_of_lower_bound(code, x, lo);
}

// The lower bound from the code's layout (adamw8bit_kernel.h), then
// corrected against the table itself, so the result is exact whatever the
// guess's rounding. A table with `tiers` decades E = 0..tiers-1 keeps
// n = 2^(tiers-1-E) magnitudes 10^-E * (0.1 + 0.9 * (k + 1) / n) in tier E,
// and the j-th positive magnitude in ascending order is j = n + k (tier E
// starts after the 2^(tiers-1-E) - 1 values of the tiers below, and the
// zero). The unsigned table stores magnitude j at index j; the signed one
// +j at 128 + j and -j at 127 - j (its zero at 128, its -1e-7 at 127).
// Usually one or two table loads, against the search's eight.
template <int kTiers>
__device__ __forceinline__ int magnitude_rank_guess(float a) {
  int tier = 0;
  float scale = 1.0f, top_of_next = 0.1f;  // 10^tier, 10^-(tier + 1)
#pragma unroll
  for (int e = 1; e < kTiers; ++e) {
    if (a <= top_of_next) {
      tier = e;
      scale *= 10.0f;
      top_of_next *= 0.1f;
    }
  }
  const int n = 1 << (kTiers - 1 - tier);
  const float k = ceilf((a * scale - 0.1f) * (static_cast<float>(n) / 0.9f) - 1.0f);
  return n + static_cast<int>(fminf(fmaxf(k, 0.0f), static_cast<float>(n - 1)));
}

__device__ __forceinline__ uint8_t nearest_rank_guided(const float* code, float x, bool is_signed) {
  int lo;
  if (is_signed) {
    const int j = magnitude_rank_guess<7>(fabsf(x));
    lo = x >= 0.0f ? 128 + j : 127 - j;
  } else {
    lo = magnitude_rank_guess<8>(x);
  }
  while (lo < 256 && code[lo] < x) ++lo;
  while (lo > 0 && !(code[lo - 1] < x)) --lo;  // a NaN walks to 0, as the search gives
  return nearest_of_lower_bound(code, x, lo);
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

// The fast path for block sizes that are multiples of 256 (8 elements for
// each of a whole number of warps; the default 2048: 256 threads), on
// aligned tensors: each thread owns 8
// consecutive elements in registers, loaded and stored as 16- and 8-byte
// vectors, so the kernel streams at the copy rate instead of waiting on
// scalar loads; the rank comes from nearest_rank_guided. Blocks of the
// grid stride over the quantization blocks, loading the tables once.
// Results are the general kernel's bit for bit (the same update_one, the
// same exact max, the same lower bound).
constexpr int kPerThread = 8;

template <typename Grad>
__device__ __forceinline__ void load8(const Grad* g, float* out);
template <>
__device__ __forceinline__ void load8<float>(const float* g, float* out) {
  const float4 a = reinterpret_cast<const float4*>(g)[0], b = reinterpret_cast<const float4*>(g)[1];
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}
template <>
__device__ __forceinline__ void load8<bf16>(const bf16* g, float* out) {
  const ops::cuda::Pack<bf16> pack = ops::cuda::load_pack(g);
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) out[j] = __bfloat162float(pack.v[j]);
}

template <typename Grad>
__global__ void adamw8bit_vec8_kernel(AdamWScalars s, Codes codes, float* __restrict__ param,
                                      const Grad* __restrict__ grad, uint8_t* __restrict__ m_codes,
                                      float* __restrict__ m_scales,
                                      uint8_t* __restrict__ sqrt_v_codes,
                                      float* __restrict__ sqrt_v_scales, bf16* __restrict__ shadow,
                                      int64_t numel, int64_t block_size, int64_t blocks) {
  __shared__ float m_code[256], sqrt_v_code[256];
  __shared__ float scratch[32];
  for (int k = threadIdx.x; k < 256; k += blockDim.x) {
    m_code[k] = codes.m[k];
    sqrt_v_code[k] = codes.sqrt_v[k];
  }
  __syncthreads();
  const int first = threadIdx.x * kPerThread;
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const int64_t begin = b * block_size;
    const int n = static_cast<int>(min(block_size, numel - begin));
    const int count = max(0, min(kPerThread, n - first));  // this thread's elements
    const int64_t e0 = begin + first;
    const float m_scale = m_scales[b], sqrt_v_scale = sqrt_v_scales[b];
    float m[kPerThread], r[kPerThread];  // the updated m and sqrt(v)
    float m_max = 0.0f, r_max = 0.0f;
    if (count == kPerThread) {
      const uint2 mc = *reinterpret_cast<const uint2*>(m_codes + e0);
      const uint2 vc = *reinterpret_cast<const uint2*>(sqrt_v_codes + e0);
      float p[kPerThread], g[kPerThread];
      load8(param + e0, p);
      load8(grad + e0, g);
      ops::cuda::Pack<bf16> out;
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const unsigned shift = 8 * (j & 3);
        const unsigned mi = ((j < 4 ? mc.x : mc.y) >> shift) & 0xffu;
        const unsigned vi = ((j < 4 ? vc.x : vc.y) >> shift) & 0xffu;
        m[j] = __fmul_rn(m_code[mi], m_scale);
        const float ri = __fmul_rn(sqrt_v_code[vi], sqrt_v_scale);
        float v = __fmul_rn(ri, ri);
        update_one(s, p[j], g[j], m[j], v);
        r[j] = __fsqrt_rn(v);
        out.v[j] = __float2bfloat16_rn(p[j]);
        m_max = fmaxf(m_max, fabsf(m[j]));
        r_max = fmaxf(r_max, fabsf(r[j]));
      }
      reinterpret_cast<float4*>(param + e0)[0] = make_float4(p[0], p[1], p[2], p[3]);
      reinterpret_cast<float4*>(param + e0)[1] = make_float4(p[4], p[5], p[6], p[7]);
      if (shadow != nullptr) ops::cuda::store_pack(shadow + e0, out);
    } else {
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        m[j] = r[j] = 0.0f;
        if (j >= count) continue;
        const int64_t e = e0 + j;
        m[j] = __fmul_rn(m_code[m_codes[e]], m_scale);
        const float ri = __fmul_rn(sqrt_v_code[sqrt_v_codes[e]], sqrt_v_scale);
        float v = __fmul_rn(ri, ri);
        float p = param[e];
        update_one(s, p, widen(grad[e]), m[j], v);
        param[e] = p;
        if (shadow != nullptr) shadow[e] = __float2bfloat16_rn(p);
        r[j] = __fsqrt_rn(v);
        m_max = fmaxf(m_max, fabsf(m[j]));
        r_max = fmaxf(r_max, fabsf(r[j]));
      }
    }
    m_max = ops::cuda::block_max(m_max, scratch);
    r_max = ops::cuda::block_max(r_max, scratch);
    const float m_inverse = __fdiv_rn(1.0f, m_max), r_inverse = __fdiv_rn(1.0f, r_max);
    uint8_t mq[kPerThread], rq[kPerThread];
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      mq[j] = nearest_rank_guided(m_code, quotient(m[j], m_max, m_inverse), true);
      rq[j] = nearest_rank_guided(sqrt_v_code, quotient(r[j], r_max, r_inverse), false);
    }
    if (count == kPerThread) {
      uint2 mc, vc;
      mc.x = mq[0] | (mq[1] << 8) | (mq[2] << 16) | (static_cast<unsigned>(mq[3]) << 24);
      mc.y = mq[4] | (mq[5] << 8) | (mq[6] << 16) | (static_cast<unsigned>(mq[7]) << 24);
      vc.x = rq[0] | (rq[1] << 8) | (rq[2] << 16) | (static_cast<unsigned>(rq[3]) << 24);
      vc.y = rq[4] | (rq[5] << 8) | (rq[6] << 16) | (static_cast<unsigned>(rq[7]) << 24);
      *reinterpret_cast<uint2*>(m_codes + e0) = mc;
      *reinterpret_cast<uint2*>(sqrt_v_codes + e0) = vc;
    } else {
      for (int j = 0; j < count; ++j) {
        m_codes[e0 + j] = mq[j];
        sqrt_v_codes[e0 + j] = rq[j];
      }
    }
    if (threadIdx.x == 0) {
      m_scales[b] = m_max;
      sqrt_v_scales[b] = r_max;
    }
  }
}

bool aligned_to(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
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
  const bool bf16_grad = grad.dtype() == DType::BF16;
  const int threads = static_cast<int>(block_size / kPerThread);
  // Every block starts at a multiple of 8 elements, so aligned bases keep
  // every thread's vectors aligned (a partial last block goes element-wise).
  if (block_size % (kPerThread * 32) == 0 && threads <= 1024 && aligned_to(p, 32) &&
      aligned_to(grad.data_ptr(), bf16_grad ? 16 : 32) && aligned_to(mc, 8) && aligned_to(vc, 8) &&
      (sh == nullptr || aligned_to(sh, 16))) {
    int sms = 0;
    LT_CUDA_CHECK(
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, param.device().index));
    const int64_t resident = static_cast<int64_t>(sms) * (2048 / threads);
    const dim3 grid(static_cast<unsigned>(std::min<int64_t>(blocks, resident)));
    if (bf16_grad) {
      adamw8bit_vec8_kernel<bf16>
          <<<grid, threads, 0, stream>>>(s, codes, p, static_cast<const bf16*>(grad.data_ptr()), mc,
                                         ms, vc, vs, sh, n, block_size, blocks);
    } else {
      adamw8bit_vec8_kernel<float>
          <<<grid, threads, 0, stream>>>(s, codes, p, static_cast<const float*>(grad.data_ptr()),
                                         mc, ms, vc, vs, sh, n, block_size, blocks);
    }
    LT_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const dim3 grid(static_cast<unsigned>(blocks));
  if (bf16_grad) {
    adamw8bit_kernel<bf16><<<grid, kThreads, shared, stream>>>(
        s, codes, p, static_cast<const bf16*>(grad.data_ptr()), mc, ms, vc, vs, sh, n, block_size);
  } else {
    adamw8bit_kernel<float><<<grid, kThreads, shared, stream>>>(
        s, codes, p, static_cast<const float*>(grad.data_ptr()), mc, ms, vc, vs, sh, n, block_size);
  }
  LT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lt::optim::cuda
