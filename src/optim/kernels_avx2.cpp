// The AVX2 optimizer kernels: kernels_simd_body.h on 8-float registers.
// Compiled for AVX2 by the pragma below (the rest of the build targets
// baseline x86-64); called only when the CPU has it. No FMA: the update's
// products and sums are rounded one by one, as in the scalar path.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "optim/kernels_simd.h"

#if LT_OPTIM_X86_KERNELS
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2")
// Each product and sum rounds alone, as in the scalar path: no contraction
// into FMA even if the target list ever grows to include it.
#pragma GCC optimize("fp-contract=off")

#include "optim/kernels_simd_body.h"

namespace lt::optim {
namespace {

struct Avx2 {
  static constexpr int64_t kWidth = 8;
  using F = __m256;

  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F x) { _mm256_storeu_ps(p, x); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F zero() { return _mm256_setzero_ps(); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F sqrt(F a) { return _mm256_sqrt_ps(a); }
  // x86 max returns its second operand when either is NaN: a NaN x leaves
  // the running max alone, as std::max(running, x) does.
  static F max(F x, F running) { return _mm256_max_ps(x, running); }
  static F abs(F a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
  static float hmax(F a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
  }

  static F load_grad(const float* g) { return load(g); }
  static F load_grad(const BFloat16* g) {
    const __m256i wide =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  // f32_to_bf16 on 8 lanes.
  static void store_bf16(uint16_t* out, F x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i high = _mm256_srli_epi32(u, 16);
    const __m256i bias =
        _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(high, _mm256_set1_epi32(1)));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    const __m256i quiet_nan = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                              _mm256_set1_epi32(0x7f800000));
    const __m256i bits = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
    // Every lane is <= 0xffff, so the unsigned-saturating pack is exact.
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), packed);
  }

  static F dequantize(const uint8_t* q, const float* code) {
    const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
    return _mm256_i32gather_ps(code, idx, 4);
  }
  // quantize_nearest_fast on 8 lanes: the bucket's rank r (a 4-byte gather
  // at the byte offset, low byte kept), then r or r + 1 by the same
  // comparisons and tie rule.
  static void store_codes(uint8_t* out, F x, const Code8Search& search) {
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i top = _mm256_set1_epi32(255);
    const __m256i bucket = _mm256_srli_epi32(_mm256_castps_si256(x), 15);
    const __m256i r = _mm256_and_si256(
        _mm256_i32gather_epi32(reinterpret_cast<const int*>(search.bucket.data()), bucket, 1),
        _mm256_set1_epi32(0xff));
    const __m256i r_up = _mm256_min_epi32(_mm256_add_epi32(r, one), top);
    const F lo = _mm256_i32gather_ps(search.code->data(), r, 4);
    const F hi = _mm256_i32gather_ps(search.code->data(), r_up, 4);
    const F d_lo = sub(x, lo), d_hi = sub(hi, x);
    const F closer = _mm256_cmp_ps(d_hi, d_lo, _CMP_LT_OQ);
    const F tie_to_smaller = _mm256_and_ps(_mm256_cmp_ps(d_hi, d_lo, _CMP_EQ_OQ),
                                           _mm256_cmp_ps(abs(hi), abs(lo), _CMP_LT_OQ));
    const __m256i up = _mm256_andnot_si256(
        _mm256_cmpeq_epi32(r, top), _mm256_castps_si256(_mm256_or_ps(closer, tie_to_smaller)));
    const __m256i rank = _mm256_sub_epi32(r, up);  // up is -1 where the rank moves up
    const __m128i words =
        _mm_packus_epi32(_mm256_castsi256_si128(rank), _mm256_extracti128_si256(rank, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(words, words));
  }
};

}  // namespace

LT_OPTIM_DEFINE_ISA(avx2, Avx2)

}  // namespace lt::optim

#pragma GCC pop_options

#endif  // LT_OPTIM_X86_KERNELS
