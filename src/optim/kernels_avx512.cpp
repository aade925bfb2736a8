// The AVX-512 (F) optimizer kernels: kernels_simd_body.h on 16-float
// registers. Compiled for AVX-512 by the pragma below (the rest of the
// build targets baseline x86-64); called only when the CPU has it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "optim/kernels_simd.h"

#if LT_OPTIM_X86_KERNELS
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f")
// AVX-512 implies FMA, and GCC contracts a * b + c into one by default in
// C++ (-ffp-contract=fast); the update must round each product and sum
// alone, as the scalar path (baseline x86-64 has no FMA) does.
#pragma GCC optimize("fp-contract=off")
// GCC 12's AVX-512 intrinsics start from `__m512 __Y = __Y;` (a deliberately
// undefined pass-through operand under an all-ones mask), which its own
// -Wuninitialized reports once inlined here; nothing of ours is uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "optim/kernels_simd_body.h"

namespace lt::optim {
namespace {

struct Avx512 {
  static constexpr int64_t kWidth = 16;
  static constexpr bool kRegisterTables = true;
  using F = __m512;

  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F x) { _mm512_storeu_ps(p, x); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F zero() { return _mm512_setzero_ps(); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F sqrt(F a) { return _mm512_sqrt_ps(a); }
  // x86 max returns its second operand when either is NaN: a NaN x leaves
  // the running max alone, as std::max(running, x) does.
  static F max(F x, F running) { return _mm512_max_ps(x, running); }
  static F abs(F a) {
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
  }
  static float hmax(F a) { return _mm512_reduce_max_ps(a); }

  static F load_grad(const float* g) { return load(g); }
  static F load_grad(const BFloat16* g) {
    const __m512i wide =
        _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  // f32_to_bf16 on 16 lanes.
  static void store_bf16(uint16_t* out, F x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i high = _mm512_srli_epi32(u, 16);
    const __m512i bias =
        _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(high, _mm512_set1_epi32(1)));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    const __m512i quiet_nan = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
    const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i bits = _mm512_mask_blend_epi32(is_nan, rounded, quiet_nan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(bits));
  }

  // The nearest rank of x is the number of thresholds up_from[r] <= x
  // (Code8Search: the thresholds increase, each lies in (code[r],
  // code[r + 1]], and up_from[255] is +inf), for every x in [-1, 1]; NaN
  // counts none, rank 0, like the scalar search. store_ranks counts them by
  // a branch-free binary search over the 256 thresholds, 8 halvings, with
  // each halving's candidates held in registers (position pos + step - 1
  // for the current pos, a multiple of 2 * step): 16 candidates for steps
  // 128..16 (one register), 16 for step 8, 32 for 4, 64 for 2, 128 for 1.
  struct RankTables {
    F t15, t7;  // up_from[16j + 15], up_from[16j + 7]
    F t3[2];    // up_from[8j + 3]
    F t1[4];    // up_from[4j + 1]
    F t0[8];    // up_from[2j]
  };
  static RankTables rank_tables(const Code8Search& search) {
    alignas(64) float t15[16], t7[16], t3[32], t1[64], t0[128];
    const float* up = search.up_from.data();
    for (int j = 0; j < 16; ++j) t15[j] = up[16 * j + 15], t7[j] = up[16 * j + 7];
    for (int j = 0; j < 32; ++j) t3[j] = up[8 * j + 3];
    for (int j = 0; j < 64; ++j) t1[j] = up[4 * j + 1];
    for (int j = 0; j < 128; ++j) t0[j] = up[2 * j];
    RankTables t;
    t.t15 = _mm512_load_ps(t15);
    t.t7 = _mm512_load_ps(t7);
    for (int k = 0; k < 2; ++k) t.t3[k] = _mm512_load_ps(t3 + 16 * k);
    for (int k = 0; k < 4; ++k) t.t1[k] = _mm512_load_ps(t1 + 16 * k);
    for (int k = 0; k < 8; ++k) t.t0[k] = _mm512_load_ps(t0 + 16 * k);
    return t;
  }
  // Candidates at index j (0..32k-1) of 2k registers: two-source permutes
  // pick within pairs (bits 0-4), blends pick the pair (bits 5 and up).
  static F pick2(const F* t, __m512i j) { return _mm512_permutex2var_ps(t[0], j, t[1]); }
  static F pick4(const F* t, __m512i j) {
    return _mm512_mask_blend_ps(_mm512_test_epi32_mask(j, _mm512_set1_epi32(32)), pick2(t, j),
                                pick2(t + 2, j));
  }
  static F pick8(const F* t, __m512i j) {
    return _mm512_mask_blend_ps(_mm512_test_epi32_mask(j, _mm512_set1_epi32(64)), pick4(t, j),
                                pick4(t + 4, j));
  }
  static F pick16(const F* t, __m512i j) {
    return _mm512_mask_blend_ps(_mm512_test_epi32_mask(j, _mm512_set1_epi32(128)), pick8(t, j),
                                pick8(t + 8, j));
  }
  // A whole code table (256 floats) in 16 registers; lookup = code[q].
  struct CodeTable {
    F t[16];
  };
  static CodeTable code_table(const Code8& code) {
    CodeTable t;
    for (int k = 0; k < 16; ++k) t.t[k] = _mm512_loadu_ps(code.data() + 16 * k);
    return t;
  }
  static F lookup(const uint8_t* q, const CodeTable& t) {
    return pick16(t.t, _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q))));
  }
  static __m512i halve(__m512i pos, F x, F candidate, int step) {
    const __mmask16 at_or_above = _mm512_cmp_ps_mask(x, candidate, _CMP_GE_OQ);
    return _mm512_mask_add_epi32(pos, at_or_above, pos, _mm512_set1_epi32(step));
  }
  static void store_ranks(uint8_t* out, F x, const RankTables& t) {
    __m512i pos = _mm512_setzero_si512();
    for (int step = 128; step >= 16; step /= 2) {
      const __m512i j =
          _mm512_add_epi32(_mm512_srli_epi32(pos, 4), _mm512_set1_epi32(step / 16 - 1));
      pos = halve(pos, x, _mm512_permutexvar_ps(j, t.t15), step);
    }
    pos = halve(pos, x, _mm512_permutexvar_ps(_mm512_srli_epi32(pos, 4), t.t7), 8);
    pos = halve(pos, x, pick2(t.t3, _mm512_srli_epi32(pos, 3)), 4);
    pos = halve(pos, x, pick4(t.t1, _mm512_srli_epi32(pos, 2)), 2);
    pos = halve(pos, x, pick8(t.t0, _mm512_srli_epi32(pos, 1)), 1);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(pos));
  }
};

}  // namespace

LT_OPTIM_DEFINE_ISA(avx512, Avx512)

}  // namespace lt::optim

#pragma GCC diagnostic pop
#pragma GCC pop_options

#endif  // LT_OPTIM_X86_KERNELS
