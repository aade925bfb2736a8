// Flash-attention-2 style causal forward on tensor cores (bf16, head_dim 64
// or 128). One block owns 128 query rows of one (batch, query head); each of
// its 8 warps owns 16 of them. The block walks the keys 0..(its last row)
// in steps of 64, double-buffering K and V through cp.async, and keeps per
// row the running max m and sum l of exp(s - m) (the online softmax), so
// the scores of one step live only in registers:
//   S = Q K^T (mma, Q fragments held in registers for the whole walk),
//   rescale O and l by exp(m_old - m_new), P = exp(S - m_new),
//   O += P V (P goes from accumulator to A fragment without memory).
// Scores are kept in log2 units (scale * log2(e) folded in) so exp is exp2.
// Only the steps that cross the diagonal or the sequence end test the mask.
#include "ops/cuda/attention_kernels.cuh"

namespace lt::ops::cuda::attn {

namespace {

constexpr int kRows = 128;  // query rows per block, 16 per warp
constexpr int kKeys = 64;   // keys per step
constexpr int kThreads = 256;

template <int kD>
constexpr int smem_bytes() {
  return (kRows + 4 * kKeys) * kD * static_cast<int>(sizeof(bf16));  // Q, 2 x K, 2 x V
}

template <int kD>
__global__ void __launch_bounds__(kThreads, 1) flash_forward(ForwardArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sq = reinterpret_cast<bf16*>(smem);
  bf16* sk = sq + kRows * kD;      // two buffers
  bf16* sv = sk + 2 * kKeys * kD;  // two buffers

  const Shape4 s = a.s;
  const int heads = s.batch * s.q_heads;
  const int bh = static_cast<int>(blockIdx.x) % heads;
  // Blocks are numbered so the longest (last) query blocks start first.
  const int m_block = (s.seq + kRows - 1) / kRows - 1 - static_cast<int>(blockIdx.x) / heads;
  const int b = bh / s.q_heads, h = bh % s.q_heads, g = h / s.group();
  const int64_t q_stride = static_cast<int64_t>(s.q_heads) * kD;
  const int64_t kv_stride = static_cast<int64_t>(s.kv_heads) * kD;
  const bf16* q =
      static_cast<const bf16*>(a.q) + (static_cast<int64_t>(b) * s.seq * s.q_heads + h) * kD;
  const int64_t kv_off = (static_cast<int64_t>(b) * s.seq * s.kv_heads + g) * kD;
  const bf16* k = static_cast<const bf16*>(a.k) + kv_off;
  const bf16* v = static_cast<const bf16*>(a.v) + kv_off;

  const int q0 = m_block * kRows;
  const int steps = (min(s.seq, q0 + kRows) - 1) / kKeys + 1;

  copy_tile_async<kRows, kD, kThreads>(sq, q, q_stride, q0, s.seq);
  copy_tile_async<kKeys, kD, kThreads>(sk, k, kv_stride, 0, s.seq);
  copy_tile_async<kKeys, kD, kThreads>(sv, v, kv_stride, 0, s.seq);
  cp_async_commit();

  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int gr = lane >> 2, t = lane & 3;
  const int row0 = warp * 16;  // this warp's first row within the block
  const float scale_log2 = a.scale * kLog2e;

  uint32_t qf[kD / 16][4];
  float o[kD / 8][4];
  zero<kD>(o);
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int n = 0; n < steps; ++n) {
    cp_async_wait<0>();
    // After this barrier step n's tiles are visible, and every warp is done
    // with step n - 1, whose buffers the next copy overwrites.
    __syncthreads();
    if (n + 1 < steps) {
      const int nb = (n + 1) & 1;
      copy_tile_async<kKeys, kD, kThreads>(sk + nb * kKeys * kD, k, kv_stride, (n + 1) * kKeys,
                                           s.seq);
      copy_tile_async<kKeys, kD, kThreads>(sv + nb * kKeys * kD, v, kv_stride, (n + 1) * kKeys,
                                           s.seq);
      cp_async_commit();
    }
    if (n == 0) {
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) load_a<kD>(qf[kk], sq, row0, kk * 16);
    }
    const bf16* kt = sk + (n & 1) * kKeys * kD;
    const bf16* vt = sv + (n & 1) * kKeys * kD;

    float sc[kKeys / 8][4];
    zero<kKeys>(sc);
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < kKeys / 16; ++np) {
        uint32_t bk[4];
        load_b_nk<kD>(bk, kt, np * 16, kk * 16);
        mma_bf16(sc[2 * np], qf[kk], bk[0], bk[1]);
        mma_bf16(sc[2 * np + 1], qf[kk], bk[2], bk[3]);
      }
    }

    const int key0 = n * kKeys;
    // Keys past the diagonal (which includes every key at or past the
    // sequence end, for rows inside it) are -inf; rows past the end are
    // computed but never stored.
    const bool crosses = key0 + kKeys - 1 > q0 + row0;
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = sc[nt][e] * scale_log2;
        if (crosses) {
          const int key = key0 + nt * 8 + 2 * t + (e & 1);
          const int row = q0 + row0 + gr + (e >> 1) * 8;
          if (key > row || key >= s.seq) x = -INFINITY;
        }
        sc[nt][e] = x;
      }
    }

    // Online softmax. Step 0 holds key 0, visible to every row, so m is
    // finite from then on and exp2(-inf - m) is a clean 0.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt)
        mx = fmaxf(mx, fmaxf(sc[nt][2 * r], sc[nt][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[r], mx);
      const float alpha = exp2f(m[r] - m_new);
      m[r] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt) {
        sc[nt][2 * r] = exp2f(sc[nt][2 * r] - m_new);
        sc[nt][2 * r + 1] = exp2f(sc[nt][2 * r + 1] - m_new);
        sum += sc[nt][2 * r] + sc[nt][2 * r + 1];
      }
      l[r] = l[r] * alpha + sum;  // this thread's columns only; summed over the quad at the end
#pragma unroll
      for (int dn = 0; dn < kD / 8; ++dn) {
        o[dn][2 * r] *= alpha;
        o[dn][2 * r + 1] *= alpha;
      }
    }

    uint32_t pa[kKeys / 16][4];
    to_a_fragments<kKeys>(pa, sc);
    mma_regs_tile<kKeys, kD, kD>(o, pa, vt, 0);
  }

  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    inv[r] = 1.0f / l[r];
    const int row = q0 + row0 + gr + r * 8;
    if (t == 0 && row < s.seq) {
      a.lse[static_cast<int64_t>(bh) * s.seq + row] = (m[r] + log2f(l[r])) * kLn2;
    }
  }
#pragma unroll
  for (int dn = 0; dn < kD / 8; ++dn) {
    o[dn][0] *= inv[0];
    o[dn][1] *= inv[0];
    o[dn][2] *= inv[1];
    o[dn][3] *= inv[1];
  }
  // Each warp read only its own 16 rows of the Q tile: it can stage its
  // output there without waiting for the others.
  stage_rows<kD>(sq, row0, o, 1.0f);
  __syncthreads();
  bf16* out = static_cast<bf16*>(a.out) + (static_cast<int64_t>(b) * s.seq * s.q_heads + h) * kD;
  store_tile<kRows, kD, kThreads>(out, q_stride, sq, q0, s.seq);
}

template <int kD>
void launch(const ForwardArgs& a, cudaStream_t stream) {
  const int64_t blocks =
      static_cast<int64_t>((a.s.seq + kRows - 1) / kRows) * a.s.batch * a.s.q_heads;
  launch_tiles(flash_forward<kD>, smem_bytes<kD>(), blocks, kThreads, a, stream,
               "causal_attention_forward");
}

}  // namespace

bool flash_supported(const Shape4& s) {
  return s.head_dim == 64 || s.head_dim == 128;
}

void launch_flash_forward(const ForwardArgs& a, cudaStream_t stream) {
  if (a.s.head_dim == 64) {
    launch<64>(a, stream);
  } else {
    launch<128>(a, stream);
  }
}

}  // namespace lt::ops::cuda::attn
