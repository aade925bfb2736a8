// Flash-attention-2 style causal backward on tensor cores (bf16, head_dim 64
// or 128). One block owns 128 keys of one (batch, kv head); each of its 8
// warps owns 16 of them and keeps their dK and dV rows in registers. The
// block walks every query head of the kv head's group and, per head, the
// 64-row query blocks at or after its keys (double-buffered Q, dO, lse and
// delta), so dK and dV are complete when the walk ends: no atomics for them.
// With P = exp(S - lse), S = scale q . k, and delta = rowsum(dO * O):
//   S^T = K Q^T, P^T           (keys are the rows: this warp's own)
//   dV += P^T dO
//   dP^T = V dO^T, dS^T = P^T * (dP^T - delta)
//   dK += dS^T Q               (scaled once at the end)
//   dQ += dS K                 (dS^T goes through shared memory, read back
//                               transposed; f32 atomics into dq_accum,
//                               scaled and cast by launch_dq_cast)
#include "ops/cuda/attention_kernels.cuh"

namespace lt::ops::cuda::attn {

namespace {

constexpr int kKeys = 128;  // keys per block, 16 per warp
constexpr int kRows = 64;   // query rows per step
constexpr int kThreads = 256;

template <int kD>
constexpr int smem_bytes() {
  // K, V, 2 x Q, 2 x dO, dS^T (bf16), then 2 x lse and 2 x delta (f32).
  return (2 * kKeys * kD + 4 * kRows * kD + kKeys * kRows) * static_cast<int>(sizeof(bf16)) +
         4 * kRows * static_cast<int>(sizeof(float));
}

template <int kD>
__global__ void __launch_bounds__(kThreads, 1) flash_backward(BackwardArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  bf16* sk = reinterpret_cast<bf16*>(smem);
  bf16* sv = sk + kKeys * kD;
  bf16* sq = sv + kKeys * kD;                                   // two buffers
  bf16* sdo = sq + 2 * kRows * kD;                              // two buffers
  bf16* sds = sdo + 2 * kRows * kD;                             // dS^T, [kKeys][kRows]
  float* slse = reinterpret_cast<float*>(sds + kKeys * kRows);  // two buffers, in log2 units
  float* sdelta = slse + 2 * kRows;                             // two buffers

  const Shape4 s = a.s;
  const int kv_count = s.batch * s.kv_heads;
  const int bg = static_cast<int>(blockIdx.x) % kv_count;
  const int n_block = static_cast<int>(blockIdx.x) / kv_count;  // block 0 (most queries) first
  const int b = bg / s.kv_heads, g = bg % s.kv_heads, group = s.group();
  const int64_t q_stride = static_cast<int64_t>(s.q_heads) * kD;
  const int64_t kv_stride = static_cast<int64_t>(s.kv_heads) * kD;
  const int64_t kv_off = (static_cast<int64_t>(b) * s.seq * s.kv_heads + g) * kD;
  const int key0 = n_block * kKeys;

  copy_tile_async<kKeys, kD, kThreads>(sk, static_cast<const bf16*>(a.k) + kv_off, kv_stride, key0,
                                       s.seq);
  copy_tile_async<kKeys, kD, kThreads>(sv, static_cast<const bf16*>(a.v) + kv_off, kv_stride, key0,
                                       s.seq);

  // Steps run over (query head of the group, query block >= the diagonal).
  const int first_m = key0 / kRows;
  const int per_head = (s.seq + kRows - 1) / kRows - first_m;
  const int steps = group * per_head;
  auto head_of = [&](int step) { return g * group + step / per_head; };
  auto row0_of = [&](int step) { return (first_m + step % per_head) * kRows; };
  auto q_offset = [&](int h) { return (static_cast<int64_t>(b) * s.seq * s.q_heads + h) * kD; };

  auto issue = [&](int step, int buf) {
    const int h = head_of(step), r0 = row0_of(step);
    copy_tile_async<kRows, kD, kThreads>(
        sq + buf * kRows * kD, static_cast<const bf16*>(a.q) + q_offset(h), q_stride, r0, s.seq);
    copy_tile_async<kRows, kD, kThreads>(sdo + buf * kRows * kD,
                                         static_cast<const bf16*>(a.dout) + q_offset(h), q_stride,
                                         r0, s.seq);
    const int i = static_cast<int>(threadIdx.x);
    if (i < kRows) {
      const int row = r0 + i;
      const int64_t at = (static_cast<int64_t>(b) * s.q_heads + h) * s.seq + row;
      // Rows past the end get lse = +inf, so their P (and dS) is exactly 0.
      slse[buf * kRows + i] = row < s.seq ? a.lse[at] * kLog2e : INFINITY;
      sdelta[buf * kRows + i] = row < s.seq ? a.delta[at] : 0.0f;
    }
    cp_async_commit();
  };
  issue(0, 0);

  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int gr = lane >> 2, t = lane & 3;
  const int krow0 = warp * 16;  // this warp's keys within the block
  const float scale_log2 = a.scale * kLog2e;
  // The dQ product splits the 64 x kD tile over the 8 warps: 4 row groups
  // of 16 by 2 column halves.
  const int dq_row0 = (warp & 3) * 16, dq_col0 = (warp >> 2) * (kD / 2);

  float dk[kD / 8][4], dv[kD / 8][4];
  zero<kD>(dk);
  zero<kD>(dv);

  for (int step = 0; step < steps; ++step) {
    const int buf = step & 1;
    cp_async_wait<0>();
    // This step's tiles are visible, and every warp is done with the last
    // step (its Q, dO and dS^T), whose buffers are about to be reused.
    __syncthreads();
    if (step + 1 < steps) issue(step + 1, buf ^ 1);
    const int h = head_of(step), r0 = row0_of(step);
    const bf16* qt = sq + buf * kRows * kD;
    const bf16* dot = sdo + buf * kRows * kD;
    const float* lse2 = slse + buf * kRows;
    const float* delta = sdelta + buf * kRows;

    // S^T for this warp's 16 keys and the 64 queries.
    float st[kRows / 8][4];
    zero<kRows>(st);
    mma_tile_tile_t<kD, kRows, kD, kD>(st, sk, krow0, qt);

    // P^T, packed as the A fragments of the products over queries. A key
    // after its query is masked; keys at or past the end are after every
    // real query, and queries past the end already have P = 0.
    const bool crosses = key0 + krow0 + 15 > r0;
#pragma unroll
    for (int nt = 0; nt < kRows / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * t + (e & 1);
        float p = exp2f(st[nt][e] * scale_log2 - lse2[col]);
        if (crosses && key0 + krow0 + gr + (e >> 1) * 8 > r0 + col) p = 0.0f;
        st[nt][e] = p;
      }
    }
    uint32_t pa[kRows / 16][4];
    to_a_fragments<kRows>(pa, st);

    mma_regs_tile<kRows, kD, kD>(dv, pa, dot, 0);  // dV += P^T dO

    zero<kRows>(st);
    mma_tile_tile_t<kD, kRows, kD, kD>(st, sv, krow0, dot);  // dP^T = V dO^T

    // dS^T = P^T (dP^T - delta), from the bf16 P (dS is rounded to bf16
    // for the products anyway). Kept as A fragments for dK and written to
    // shared memory for dQ.
    uint32_t dsa[kRows / 16][4];
#pragma unroll
    for (int nt = 0; nt < kRows / 8; ++nt) {
      const int col = nt * 8 + 2 * t;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const uint32_t packed = pa[nt / 2][(nt & 1) * 2 + half];
        const __nv_bfloat162 p2 = *reinterpret_cast<const __nv_bfloat162*>(&packed);
        const float d0 = __low2float(p2) * (st[nt][2 * half] - delta[col]);
        const float d1 = __high2float(p2) * (st[nt][2 * half + 1] - delta[col + 1]);
        const uint32_t ds = pack_bf16(d0, d1);
        dsa[nt / 2][(nt & 1) * 2 + half] = ds;
        *reinterpret_cast<uint32_t*>(sds + swizzled<kRows>(krow0 + gr + half * 8, nt) + 2 * t) = ds;
      }
    }

    mma_regs_tile<kRows, kD, kD>(dk, dsa, qt, 0);  // dK += dS^T Q

    __syncthreads();  // all of dS^T written

    // dQ (this warp's 16 x kD/2 part) += dS K, added into dq_accum.
    float dq[kD / 16][4];
    zero<kD / 2>(dq);
#pragma unroll
    for (int kk = 0; kk < kKeys / 16; ++kk) {
      uint32_t da[4];
      load_a_transposed<kRows>(da, sds, dq_row0, kk * 16);
#pragma unroll
      for (int dp = 0; dp < kD / 32; ++dp) {
        uint32_t bk[4];
        load_b_kn<kD>(bk, sk, kk * 16, dq_col0 + dp * 16);
        mma_bf16(dq[2 * dp], da, bk[0], bk[1]);
        mma_bf16(dq[2 * dp + 1], da, bk[2], bk[3]);
      }
    }
    float* dqa = a.dq_accum + q_offset(h);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = r0 + dq_row0 + gr + half * 8;
      if (row < s.seq) {
        float* dst = dqa + static_cast<int64_t>(row) * q_stride + dq_col0 + 2 * t;
#pragma unroll
        for (int nt = 0; nt < kD / 16; ++nt) {
          atomicAdd(reinterpret_cast<float2*>(dst + nt * 8),
                    make_float2(dq[nt][2 * half], dq[nt][2 * half + 1]));
        }
      }
    }
  }

  // Stage dK (scaled) and dV through the Q and dO buffers, then write them
  // out 16 bytes per thread.
  __syncthreads();
  stage_rows<kD>(sq, krow0, dk, a.scale);
  stage_rows<kD>(sdo, krow0, dv, 1.0f);
  __syncthreads();
  store_tile<kKeys, kD, kThreads>(static_cast<bf16*>(a.dk) + kv_off, kv_stride, sq, key0, s.seq);
  store_tile<kKeys, kD, kThreads>(static_cast<bf16*>(a.dv) + kv_off, kv_stride, sdo, key0, s.seq);
}

template <int kD>
void launch(const BackwardArgs& a, cudaStream_t stream) {
  const int64_t blocks =
      static_cast<int64_t>((a.s.seq + kKeys - 1) / kKeys) * a.s.batch * a.s.kv_heads;
  launch_tiles(flash_backward<kD>, smem_bytes<kD>(), blocks, kThreads, a, stream,
               "causal_attention_backward");
}

__global__ void dq_cast(const float* accum, bf16* dq, int64_t n, float scale) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n / 4;
       i += stride) {
    const float4 x = reinterpret_cast<const float4*>(accum)[i];
    __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(dq + 4 * i);
    out[0] = __floats2bfloat162_rn(x.x * scale, x.y * scale);
    out[1] = __floats2bfloat162_rn(x.z * scale, x.w * scale);
  }
}

}  // namespace

void launch_flash_backward(const BackwardArgs& a, cudaStream_t stream) {
  if (a.s.head_dim == 64) {
    launch<64>(a, stream);
  } else {
    launch<128>(a, stream);
  }
}

void launch_dq_cast(const float* dq_accum, bf16* dq, int64_t n, float scale, cudaStream_t stream) {
  // The flash path has head_dim 64 or 128, so n is a multiple of 4.
  constexpr int threads = 256;
  dq_cast<<<grid_for(n / 4, threads), threads, 0, stream>>>(dq_accum, dq, n, scale);
  LT_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lt::ops::cuda::attn
