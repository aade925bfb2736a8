#include "optim/cuda/adamw.h"

#include "ops/cuda/kernel_common.cuh"
#include "optim/cuda/adamw_update.cuh"
#include "optim/cuda/chunk_table.cuh"

namespace lt::optim::cuda {

namespace {

using ops::cuda::bf16;
using ops::cuda::Pack;

// Elements per thread per iteration of the packed loop: one 16-byte pack of
// f32 (4) is the unit for p, m and v; 8 elements keep a bf16 gradient (and
// the bf16 shadow) to a full 16-byte pack as well.
constexpr int kVec = 8;
constexpr int kThreads = 256;
// Elements per thread block of the multi-tensor kernel: a multiple of kVec
// (so every chunk of an aligned tensor stays aligned) and large enough
// that a 3B model is ~46K blocks, each streaming ~1.8 MB.
constexpr int64_t kChunk = int64_t{1} << 16;

// Loads kVec gradient values starting at g (16-byte aligned) as f32.
__device__ __forceinline__ void load_grads(const float* g, float (&out)[kVec]) {
#pragma unroll
  for (int h = 0; h < kVec / 4; ++h) {
    const Pack<float> pk = ops::cuda::load_pack(g + 4 * h);
#pragma unroll
    for (int j = 0; j < 4; ++j) out[4 * h + j] = pk.v[j];
  }
}
__device__ __forceinline__ void load_grads(const bf16* g, float (&out)[kVec]) {
  const Pack<bf16> pk = ops::cuda::load_pack(g);
#pragma unroll
  for (int j = 0; j < kVec; ++j) out[j] = __bfloat162float(pk.v[j]);
}

// Updates elements [0, n) of one span, thread `first` of `stride` taking
// every stride-th unit. kPacked: every pointer (shadow included, when not
// null) is 16-byte aligned, and elements [0, n / kVec * kVec) go through
// 16-byte loads and stores; the rest (and everything when not packed)
// element by element. The per-element math is update_one in every case.
template <typename Grad, bool kPacked>
__device__ __forceinline__ void update_span(const AdamWScalars& s, float* __restrict__ param,
                                            const Grad* __restrict__ grad,
                                            float* __restrict__ exp_avg,
                                            float* __restrict__ exp_avg_sq,
                                            bf16* __restrict__ shadow, int64_t n, int64_t first,
                                            int64_t stride) {
  int64_t scalar_from = 0;
  if constexpr (kPacked) {
    const int64_t vecs = n / kVec;
    for (int64_t k = first; k < vecs; k += stride) {
      const int64_t i = k * kVec;
      float g[kVec];
      load_grads(grad + i, g);
      Pack<bf16> rounded;
#pragma unroll
      for (int h = 0; h < kVec / 4; ++h) {
        Pack<float> p = ops::cuda::load_pack(param + i + 4 * h);
        Pack<float> m = ops::cuda::load_pack(exp_avg + i + 4 * h);
        Pack<float> v = ops::cuda::load_pack(exp_avg_sq + i + 4 * h);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          update_one(s, p.v[j], g[4 * h + j], m.v[j], v.v[j]);
          rounded.v[4 * h + j] = __float2bfloat16_rn(p.v[j]);
        }
        ops::cuda::store_pack(param + i + 4 * h, p);
        ops::cuda::store_pack(exp_avg + i + 4 * h, m);
        ops::cuda::store_pack(exp_avg_sq + i + 4 * h, v);
      }
      if (shadow != nullptr) ops::cuda::store_pack(shadow + i, rounded);
    }
    scalar_from = vecs * kVec;
  }
  for (int64_t i = scalar_from + first; i < n; i += stride) {
    float p = param[i], m = exp_avg[i], v = exp_avg_sq[i];
    update_one(s, p, widen(grad[i]), m, v);
    param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if (shadow != nullptr) shadow[i] = __float2bfloat16_rn(p);
  }
}

bool packable(const void* p, const void* g, const void* m, const void* v, const void* shadow,
              int64_t n) {
  using ops::cuda::aligned16;
  return aligned16(p) && aligned16(g) && aligned16(m) && aligned16(v) &&
         (shadow == nullptr || aligned16(shadow)) && n >= kVec;
}

// One row of the multi-tensor table (see chunk_table.cuh).
struct JobRow {
  AdamWScalars s;
  float* param;
  const void* grad;
  float* exp_avg;
  float* exp_avg_sq;
  bf16* shadow;
  int64_t numel;
  int64_t first_chunk;
  int32_t grad_is_bf16;
  int32_t packed;
};

template <typename Grad>
__device__ __forceinline__ void update_chunk(const JobRow& r, int64_t begin, int64_t n) {
  const Grad* g = static_cast<const Grad*>(r.grad) + begin;
  bf16* shadow = r.shadow != nullptr ? r.shadow + begin : nullptr;
  if (r.packed) {
    update_span<Grad, true>(r.s, r.param + begin, g, r.exp_avg + begin, r.exp_avg_sq + begin,
                            shadow, n, threadIdx.x, blockDim.x);
  } else {
    update_span<Grad, false>(r.s, r.param + begin, g, r.exp_avg + begin, r.exp_avg_sq + begin,
                             shadow, n, threadIdx.x, blockDim.x);
  }
}

__global__ void __launch_bounds__(kThreads)
    adamw_multi_kernel(const JobRow* __restrict__ rows, int count) {
  const int64_t chunk = blockIdx.x;
  const JobRow r = rows[row_of_chunk(rows, count, chunk)];
  const int64_t begin = (chunk - r.first_chunk) * kChunk;
  const int64_t n = min(kChunk, r.numel - begin);
  if (r.grad_is_bf16) {
    update_chunk<bf16>(r, begin, n);
  } else {
    update_chunk<float>(r, begin, n);
  }
}

}  // namespace

void adamw_update_multi(Device device, const std::vector<AdamWCudaJob>& jobs) {
  std::vector<JobRow> rows;
  int64_t chunks = 0;
  for (const AdamWCudaJob& j : jobs) {
    if (j.numel == 0) continue;
    auto* shadow = reinterpret_cast<bf16*>(j.shadow);
    rows.push_back({j.s, j.param, j.grad, j.exp_avg, j.exp_avg_sq, shadow, j.numel, chunks,
                    j.grad_is_bf16 ? 1 : 0,
                    packable(j.param, j.grad, j.exp_avg, j.exp_avg_sq, shadow, j.numel) ? 1 : 0});
    chunks += (j.numel + kChunk - 1) / kChunk;
  }
  if (rows.empty()) return;
  LT_CHECK(chunks <= 0x7fffffff && rows.size() <= 0x7fffffff, "AdamW (CUDA): ", chunks,
           " chunks of ", kChunk, " elements exceed one CUDA grid");
  ::lt::cuda::DeviceGuard guard(device.index);
  cudaStream_t stream = ops::cuda::stream_for(device);
  const Tensor table = upload_table(rows, device, stream);
  adamw_multi_kernel<<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(
      static_cast<const JobRow*>(table.data_ptr()), static_cast<int>(rows.size()));
  LT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lt::optim::cuda
