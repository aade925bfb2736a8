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
  // Scalar loads: without two-source permutes, register lookups of a
  // 256-entry table cost more.
  static constexpr int64_t kLookupWidth = 0;
  struct NoTable {};
  static NoTable lookup_table(const Code8&) { return {}; }
  static void lookup(NoTable, const uint8_t*, float*) {}
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
  // f32_to_bf16 on 8 lanes; `stream`: past the cache (out 16-byte aligned).
  static void store_bf16(uint16_t* out, F x, bool stream) {
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
    if (stream)
      _mm_stream_si128(reinterpret_cast<__m128i*>(out), packed);
    else
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), packed);
  }

  // segment_rank on 8 lanes, the same f32 operations. The segment is counted
  // from the decade thresholds (the same number the binade tables give);
  // the per-segment tables are two 8-entry halves, the sign bit picking.
  struct SegmentTables {
    F decade[7];
    F low[2], inv_step[2];
    __m256i base[2];
  };
  static SegmentTables segment_tables(const Code8Segments& s) {
    SegmentTables t;
    for (size_t k = 0; k < 7; ++k) t.decade[k] = set1(s.decade[k]);
    for (int h = 0; h < 2; ++h) {
      t.low[h] = _mm256_loadu_ps(s.low.data() + 8 * h);
      t.inv_step[h] = _mm256_loadu_ps(s.inv_step.data() + 8 * h);
      t.base[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.base.data() + 8 * h));
    }
    return t;
  }
  static F pick(const F* halves, __m256i segment, F sign) {
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(halves[0], segment),
                            _mm256_permutevar8x32_ps(halves[1], segment), sign);
  }
  template <bool kSigned>  // both codes take the same path here
  static bool store_ranks(uint8_t* out, F x, const SegmentTables& t) {
    const F a = abs(x);
    __m256i segment = _mm256_setzero_si256();
    for (const F& d : t.decade)  // a true comparison is -1
      segment = _mm256_sub_epi32(segment, _mm256_castps_si256(_mm256_cmp_ps(a, d, _CMP_LT_OQ)));
    const F low = pick(t.low, segment, x);
    const F inv_step = pick(t.inv_step, segment, x);
    const __m256i base = _mm256_castps_si256(pick(reinterpret_cast<const F*>(t.base), segment, x));
    const F j = mul(sub(a, low), inv_step);
    const F magic = set1(kRoundToInteger);
    const F nearest = sub(add(j, magic), magic);
    const F safe = _mm256_cmp_ps(abs(sub(j, nearest)), set1(0.5f - kNearTie), _CMP_LT_OQ);
    // base + k, or base - k for negative x: (k ^ s) - s with s = 0 or -1.
    const __m256i s = _mm256_srai_epi32(_mm256_castps_si256(x), 31);
    const __m256i k = _mm256_sub_epi32(_mm256_xor_si256(_mm256_cvttps_epi32(nearest), s), s);
    const __m256i rank = _mm256_add_epi32(base, k);
    const __m128i words =
        _mm_packs_epi32(_mm256_castsi256_si128(rank), _mm256_extracti128_si256(rank, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(words, words));
    return _mm256_movemask_ps(safe) == 0xff;
  }
};

}  // namespace

LT_OPTIM_DEFINE_ISA(avx2, Avx2)

}  // namespace lt::optim

#pragma GCC pop_options

#endif  // LT_OPTIM_X86_KERNELS
