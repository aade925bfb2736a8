#pragma once
// LayerNorm backward in one pass over dy and x for rows of up to 1024 bf16
// (512 f32) values, as llm.c's layernorm_backward does: dx, and the weight
// and bias gradients, from one read of each row. The unfused backward
// (norm_layer.cu) reads dy and x once for dx, again for the weight
// gradient and dy a third time for the bias gradient; on GPT-2's 768-wide
// rows at 64 x 1024 tokens that was 25 launches of ~0.25 ms a step.
//
// A warp owns a row at a time and each lane the same columns of every row
// (kPacks 16-byte packs of them), so a lane sums its columns' weight and
// bias terms in registers over all the rows its warp sees. Rows are dealt
// to warps in a fixed pattern; the block's warps add their sums into
// shared memory in warp order, and each block writes one partial row that
// column_finalize adds up in block order: the gradients are the same from
// run to run (Note [deterministic column sums] in column_sum.cuh).
#include "ops/cuda/column_sum.cuh"

namespace lt::ops::cuda {

constexpr int kLayerNormFusedWarps = 8;
constexpr int kLayerNormFusedMaxPacks = 4;

// partial: [2][gridDim.x][cols] f32, the weight terms' sums, then the bias terms'.
template <typename T, int kPacks>
__global__ void __launch_bounds__(kLayerNormFusedWarps * 32)
    layer_norm_backward_fused(const T* dy, const T* x, const T* w, bool has_w, const float* mean,
                              const float* rstd, T* dx, float* partial, int64_t rows, int cols) {
  constexpr int P = Pack<T>::kSize;
  // The widest row: kMaxPacks packs of 8 bf16 per lane (f32 rows are half as wide).
  __shared__ float sums[2][kLayerNormFusedMaxPacks * 32 * 8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int packs = cols / P;
  const float inv_cols = 1.0f / static_cast<float>(cols);
  float wv[kPacks][P], acc_w[kPacks][P], acc_b[kPacks][P];
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    const int p = lane + 32 * k;
    Pack<T> pk{};
    if (has_w && p < packs) pk = load_pack(w + p * P);
#pragma unroll
    for (int j = 0; j < P; ++j) {
      wv[k][j] = has_w ? to_f32(pk.v[j]) : 1.0f;
      acc_w[k][j] = acc_b[k][j] = 0.0f;
    }
  }
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kLayerNormFusedWarps + warp;
  for (int64_t r = first; r < rows; r += static_cast<int64_t>(gridDim.x) * kLayerNormFusedWarps) {
    float g[kPacks][P], n[kPacks][P];
    const float mu = mean[r], rs = rstd[r];
    float sum_dn = 0.0f, sum_dnn = 0.0f;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = lane + 32 * k;
      Pack<T> gp{}, xp{};
      if (p < packs) {
        gp = load_pack(dy + r * cols + p * P);
        xp = load_pack(x + r * cols + p * P);
      }
#pragma unroll
      for (int j = 0; j < P; ++j) {
        g[k][j] = p < packs ? to_f32(gp.v[j]) : 0.0f;
        n[k][j] = p < packs ? (to_f32(xp.v[j]) - mu) * rs : 0.0f;
        const float dn = g[k][j] * wv[k][j];
        sum_dn += dn;
        sum_dnn += dn * n[k][j];
        acc_w[k][j] += g[k][j] * n[k][j];
        acc_b[k][j] += g[k][j];
      }
    }
    const float m1 = warp_sum(sum_dn) * inv_cols, m2 = warp_sum(sum_dnn) * inv_cols;
    if (dx == nullptr) continue;
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int p = lane + 32 * k;
      if (p >= packs) continue;
      Pack<T> o;
#pragma unroll
      for (int j = 0; j < P; ++j) {
        o.v[j] = from_f32<T>(rs * (g[k][j] * wv[k][j] - m1 - n[k][j] * m2));
      }
      store_pack(dx + r * cols + p * P, o);
    }
  }
  // The block's sums, warp 0 first.
  for (int turn = 0; turn < kLayerNormFusedWarps; ++turn) {
    if (warp == turn) {
#pragma unroll
      for (int k = 0; k < kPacks; ++k) {
        const int p = lane + 32 * k;
        if (p >= packs) continue;
#pragma unroll
        for (int j = 0; j < P; ++j) {
          const int c = p * P + j;
          sums[0][c] = (turn == 0 ? 0.0f : sums[0][c]) + acc_w[k][j];
          sums[1][c] = (turn == 0 ? 0.0f : sums[1][c]) + acc_b[k][j];
        }
      }
    }
    __syncthreads();
  }
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    partial[static_cast<int64_t>(blockIdx.x) * cols + c] = sums[0][c];
    partial[(static_cast<int64_t>(gridDim.x) + blockIdx.x) * cols + c] = sums[1][c];
  }
}

// Whether the fused kernel takes rows of `cols` values of T (all pointers
// 16-byte aligned is the caller's check).
template <typename T>
inline bool layer_norm_backward_fits(int64_t cols) {
  constexpr int P = Pack<T>::kSize;
  return cols % P == 0 && cols / P <= 32 * kLayerNormFusedMaxPacks;
}

// dx (may be null), dweight and dbias (either may be null) for dense rows.
template <typename T>
void launch_layer_norm_backward_fused(const T* dy, const T* x, const T* w, bool has_w,
                                      const float* mean, const float* rstd, T* dx, T* dweight,
                                      T* dbias, int64_t rows, int64_t cols, Device device) {
  constexpr int P = Pack<T>::kSize;
  // About 4 blocks of 8 warps per SM on an H200 (132 SMs): enough rows in
  // flight to cover the loads' latency, and few partial rows to add.
  const int64_t blocks =
      std::clamp<int64_t>((rows + kLayerNormFusedWarps - 1) / kLayerNormFusedWarps, 1, 132 * 4);
  Tensor partial = Tensor::empty({2, blocks, cols}, DType::F32, device);
  auto* pp = static_cast<float*>(partial.data_ptr());
  cudaStream_t stream = stream_for(device);
  const int packs_per_lane = static_cast<int>((cols / P + 31) / 32);
  const auto grid = static_cast<unsigned>(blocks);
  const int threads = kLayerNormFusedWarps * 32;
  const int c = static_cast<int>(cols);
  switch (packs_per_lane) {
    case 1:
      layer_norm_backward_fused<T, 1>
          <<<grid, threads, 0, stream>>>(dy, x, w, has_w, mean, rstd, dx, pp, rows, c);
      break;
    case 2:
      layer_norm_backward_fused<T, 2>
          <<<grid, threads, 0, stream>>>(dy, x, w, has_w, mean, rstd, dx, pp, rows, c);
      break;
    case 3:
      layer_norm_backward_fused<T, 3>
          <<<grid, threads, 0, stream>>>(dy, x, w, has_w, mean, rstd, dx, pp, rows, c);
      break;
    default:
      layer_norm_backward_fused<T, 4>
          <<<grid, threads, 0, stream>>>(dy, x, w, has_w, mean, rstd, dx, pp, rows, c);
      break;
  }
  LT_CUDA_CHECK(cudaGetLastError());
  const unsigned finalize_grid = grid_for(cols, 256);
  if (dweight) {
    column_finalize<T><<<finalize_grid, 256, 0, stream>>>(pp, 1, blocks, cols, dweight);
    LT_CUDA_CHECK(cudaGetLastError());
  }
  if (dbias) {
    column_finalize<T>
        <<<finalize_grid, 256, 0, stream>>>(pp + blocks * cols, 1, blocks, cols, dbias);
    LT_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace lt::ops::cuda
