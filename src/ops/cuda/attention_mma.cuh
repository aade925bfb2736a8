#pragma once
// Tensor-core building blocks of the flash-attention kernels (sm_80+ PTX,
// run here on sm_90): bf16 mma.sync m16n8k16 with f32 accumulators,
// ldmatrix fragment loads, cp.async tile copies into swizzled shared
// memory, and the causal geometry of one (batch, head) pair.
//
// Fragment layout of mma.m16n8k16 (PTX ISA, "Matrix fragments for
// mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
//   A (16x16, row-major), 4 regs of 2 bf16: a0 (g, 2t..2t+1), a1 (g+8, 2t..),
//     a2 (g, 2t+8..), a3 (g+8, 2t+8..);
//   B (16x8, "col"), 2 regs: b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g);
//   C (16x8) 4 f32: c0 c1 (g, 2t..2t+1), c2 c3 (g+8, 2t..2t+1).
// An accumulator laid out as C for two adjacent 8-column tiles is therefore
// exactly the A fragment of a 16-wide k step once packed to bf16, which is
// how the probabilities feed the next product without going through memory.
//
// Shared tiles hold rows of kD bf16 in 16-byte chunks; chunk c of row r is
// stored at chunk c ^ (r % 8). ldmatrix reads one chunk column of 8
// consecutive rows, which the XOR spreads over all 32 banks.
#include <cuda_bf16.h>

#include <cstdint>

#include "ops/cuda/kernel_common.cuh"

namespace lt::ops::cuda::attn {

// log2(e): the kernels use exp2 on scores pre-multiplied by scale * log2(e).
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Element offset of (row, 8-element chunk) in a swizzled tile of kD columns.
template <int kD>
__device__ __forceinline__ int swizzled(int row, int chunk) {
  static_assert(kD % 64 == 0, "rows of at least 8 chunks, so the XOR stays in the row");
  return row * kD + ((chunk ^ (row & 7)) << 3);
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo sits in the low half
  return *reinterpret_cast<const uint32_t*>(&v);
}

// ---------------------------------------------------------------- fragment loads
// `tile` is a swizzled [rows][kD] tile; row0/col0 locate a 16x16 block.

// A fragment of the 16x16 block at (row0, col0): rows are the m index.
template <int kD>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16* tile, int row0, int col0) {
  const int lane = threadIdx.x & 31;
  const int row = row0 + (lane & 15), chunk = (col0 >> 3) + (lane >> 4);
  ldmatrix_x4(a, smem_addr(tile + swizzled<kD>(row, chunk)));
}

// B fragments of two 8-wide n tiles, when the tile stores B transposed
// ([n][k], as keys are stored for q . k): b[0], b[1] for n rows
// row0..row0+7 and b[2], b[3] for row0+8..row0+15, k = col0..col0+15.
template <int kD>
__device__ __forceinline__ void load_b_nk(uint32_t (&b)[4], const bf16* tile, int row0, int col0) {
  const int lane = threadIdx.x & 31;
  const int row = row0 + (lane & 7) + ((lane >> 4) << 3), chunk = (col0 >> 3) + ((lane >> 3) & 1);
  ldmatrix_x4(b, smem_addr(tile + swizzled<kD>(row, chunk)));
}

// B fragments of two 8-wide n tiles when the tile stores B as is ([k][n],
// as values are stored for p . v): k = row0..row0+15, n tiles col0 and
// col0 + 8; b[0], b[1] for the first, b[2], b[3] for the second.
template <int kD>
__device__ __forceinline__ void load_b_kn(uint32_t (&b)[4], const bf16* tile, int row0, int col0) {
  const int lane = threadIdx.x & 31;
  const int row = row0 + (lane & 7) + (((lane >> 3) & 1) << 3), chunk = (col0 >> 3) + (lane >> 4);
  ldmatrix_x4_trans(b, smem_addr(tile + swizzled<kD>(row, chunk)));
}

// A fragment of the 16x16 block (m0, k0) of a matrix whose transpose the
// tile stores ([k][m]): how the backward reads dS from the dS^T it wrote.
template <int kD>
__device__ __forceinline__ void load_a_transposed(uint32_t (&a)[4], const bf16* tile, int m0,
                                                  int k0) {
  const int lane = threadIdx.x & 31, mat = lane >> 3;
  const int row = k0 + (lane & 7) + ((mat >> 1) << 3), chunk = (m0 >> 3) + (mat & 1);
  ldmatrix_x4_trans(a, smem_addr(tile + swizzled<kD>(row, chunk)));
}

// ---------------------------------------------------------------- async copies

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  // src-size 0 fills the 16 bytes with zeros (rows past the sequence end).
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Calls fn(r, c) for each (row, 16-byte chunk) of a kRows x kD tile that
// this thread moves when all kThreads threads share the tile.
template <int kRows, int kD, int kThreads, typename Fn>
__device__ __forceinline__ void for_my_chunks(Fn&& fn) {
  constexpr int kChunks = kD / 8, kTotal = kRows * kChunks;
  static_assert(kTotal % kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int i = 0; i < kTotal / kThreads; ++i) {
    const int idx = static_cast<int>(threadIdx.x) + i * kThreads;
    fn(idx / kChunks, idx % kChunks);
  }
}

// Copies rows row0..row0+kRows-1 of a [seq, stride] bf16 matrix into a
// swizzled tile; rows at or past `seq` become zeros.
template <int kRows, int kD, int kThreads>
__device__ __forceinline__ void copy_tile_async(bf16* tile, const bf16* base, int64_t stride,
                                                int row0, int seq) {
  for_my_chunks<kRows, kD, kThreads>([&](int r, int c) {
    const bool valid = row0 + r < seq;
    const bf16* src = base + (valid ? static_cast<int64_t>(row0 + r) * stride : 0) + c * 8;
    cp_async_16(tile + swizzled<kD>(r, c), src, valid);
  });
}

// Writes one warp's 16 x kD accumulator (C layout, acc[n tile][4]) times
// `mul` as bf16 into rows row0..row0+15 of a swizzled tile.
template <int kD>
__device__ __forceinline__ void stage_rows(bf16* tile, int row0, const float (&acc)[kD / 8][4],
                                           float mul) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) {
    // Column n * 8 + 2t is in chunk n at element offset 2t.
    *reinterpret_cast<uint32_t*>(tile + swizzled<kD>(row0 + g, n) + 2 * t) =
        pack_bf16(acc[n][0] * mul, acc[n][1] * mul);
    *reinterpret_cast<uint32_t*>(tile + swizzled<kD>(row0 + g + 8, n) + 2 * t) =
        pack_bf16(acc[n][2] * mul, acc[n][3] * mul);
  }
}

// Copies a staged swizzled tile back to rows row0.. of a [seq, stride]
// matrix, 16 bytes per thread per step; rows at or past `seq` are skipped.
template <int kRows, int kD, int kThreads>
__device__ __forceinline__ void store_tile(bf16* base, int64_t stride, const bf16* tile, int row0,
                                           int seq) {
  for_my_chunks<kRows, kD, kThreads>([&](int r, int c) {
    if (row0 + r < seq) {
      *reinterpret_cast<uint4*>(base + static_cast<int64_t>(row0 + r) * stride + c * 8) =
          *reinterpret_cast<const uint4*>(tile + swizzled<kD>(r, c));
    }
  });
}

// ---------------------------------------------------------------- warp products
// One warp's 16-row slab of a product, acc[n tile][4] in C layout.

// acc (16 x kN) += A B, A = rows a_row0.. of a swizzled [.][kAD] tile over
// k = 0..kK-1, B^T stored as rows 0..kN-1 of a swizzled [.][kBD] tile
// (keys for q . k).
template <int kK, int kN, int kAD, int kBD>
__device__ __forceinline__ void mma_tile_tile_t(float (&acc)[kN / 8][4], const bf16* a_tile,
                                                int a_row0, const bf16* bt_tile) {
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t a[4];
    load_a<kAD>(a, a_tile, a_row0, kk * 16);
#pragma unroll
    for (int np = 0; np < kN / 16; ++np) {
      uint32_t b[4];
      load_b_nk<kBD>(b, bt_tile, np * 16, kk * 16);
      mma_bf16(acc[2 * np], a, b[0], b[1]);
      mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

// acc (16 x kN) += A B, A held as fragments a[k step], B stored as is in
// rows 0..kK-1, columns b_col0.. of a swizzled [.][kBD] tile (values for
// p . v).
template <int kK, int kN, int kBD>
__device__ __forceinline__ void mma_regs_tile(float (&acc)[kN / 8][4],
                                              const uint32_t (&a)[kK / 16][4], const bf16* b_tile,
                                              int b_col0) {
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
#pragma unroll
    for (int np = 0; np < kN / 16; ++np) {
      uint32_t b[4];
      load_b_kn<kBD>(b, b_tile, kk * 16, b_col0 + np * 16);
      mma_bf16(acc[2 * np], a[kk], b[0], b[1]);
      mma_bf16(acc[2 * np + 1], a[kk], b[2], b[3]);
    }
  }
}

// An accumulator of kN columns as A fragments over k = its columns (the C
// layout of two adjacent n tiles is the A layout of one k step).
template <int kN>
__device__ __forceinline__ void to_a_fragments(uint32_t (&a)[kN / 16][4],
                                               const float (&acc)[kN / 8][4]) {
#pragma unroll
  for (int kk = 0; kk < kN / 16; ++kk) {
    a[kk][0] = pack_bf16(acc[2 * kk][0], acc[2 * kk][1]);
    a[kk][1] = pack_bf16(acc[2 * kk][2], acc[2 * kk][3]);
    a[kk][2] = pack_bf16(acc[2 * kk + 1][0], acc[2 * kk + 1][1]);
    a[kk][3] = pack_bf16(acc[2 * kk + 1][2], acc[2 * kk + 1][3]);
  }
}

template <int kN>
__device__ __forceinline__ void zero(float (&acc)[kN / 8][4]) {
#pragma unroll
  for (int i = 0; i < kN / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
}

// Sets the dynamic shared memory limit and launches kernel<<<blocks, threads>>>(args).
template <typename Args>
void launch_tiles(void (*kernel)(Args), int smem, int64_t blocks, int threads, const Args& args,
                  cudaStream_t stream, const char* op) {
  LT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  LT_CHECK(blocks <= 0x7fffffff, op, ": ", blocks, " blocks exceed the grid");
  kernel<<<static_cast<unsigned>(blocks), threads, smem, stream>>>(args);
  LT_CUDA_CHECK(cudaGetLastError());
}

// ---------------------------------------------------------------- problem shape

// Sizes and pointers of one call, in the layouts of ops/attention.h:
// q, out, dout [B, T, Hq, D]; k, v [B, T, Hkv, D]; lse, delta [B, Hq, T].
struct Shape4 {
  int batch, seq, q_heads, kv_heads, head_dim;
  __host__ __device__ int group() const { return q_heads / kv_heads; }
};

}  // namespace lt::ops::cuda::attn
