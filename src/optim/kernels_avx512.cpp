// The AVX-512 optimizer kernels: kernels_simd_body.h on 16-float registers.
// Compiled for AVX-512 F, BW, DQ and VBMI by the pragma below (the rest of the
// build targets baseline x86-64; VBMI's byte permutes look the 8-bit codes
// up); called only when the CPU has all four (Ice Lake and later, Zen 4;
// a Skylake/Cascade Lake Xeon runs the AVX2 kernels).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "optim/kernels_simd.h"

#if LT_OPTIM_X86_KERNELS
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vbmi")
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
  // f32_to_bf16 on 16 lanes; `stream`: past the cache (out 32-byte aligned).
  static void store_bf16(uint16_t* out, F x, bool stream) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i high = _mm512_srli_epi32(u, 16);
    const __m512i bias =
        _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(high, _mm512_set1_epi32(1)));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    const __m512i quiet_nan = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
    const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    const __m512i bits = _mm512_mask_blend_epi32(is_nan, rounded, quiet_nan);
    const __m256i packed = _mm512_cvtepi32_epi16(bits);
    if (stream)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(out), packed);
    else
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), packed);
  }

  // segment_rank's tables in registers: the 32 per-binade entries in two
  // registers each (two-source permutes), the 16 per-segment ones in one.
  struct SegmentTables {
    __m512i segment_of_binade[2];
    F split_of_binade[2];
    F low, inv_step;
    __m512i base;
  };
  static SegmentTables segment_tables(const Code8Segments& s) {
    SegmentTables t;
    for (int k = 0; k < 2; ++k) {
      t.segment_of_binade[k] = _mm512_loadu_si512(s.segment_of_binade.data() + 16 * k);
      t.split_of_binade[k] = _mm512_loadu_ps(s.split_of_binade.data() + 16 * k);
    }
    t.low = _mm512_loadu_ps(s.low.data());
    t.inv_step = _mm512_loadu_ps(s.inv_step.data());
    t.base = _mm512_loadu_si512(s.base.data());
    return t;
  }
  // segment_rank on 16 lanes: the same segment, position j and rank. The
  // nearest integer comes from a conversion rounding to nearest even and
  // j - rint(j) from VREDUCEPS, both exact, so they equal the scalar
  // path's (j + 1.5 * 2^23) - 1.5 * 2^23 and its difference. For the
  // unsigned code (kSigned false) a negative lane is just declined: the
  // scalar path settles it, as it settles every negative x of that code.
  template <bool kSigned>
  static bool store_ranks(uint8_t* out, F x, const SegmentTables& t) {
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i magnitude_bits = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
    const F a = _mm512_castsi512_ps(magnitude_bits);
    // The permutes read the low 5 bits: the exponent clamped at 96 minus 96.
    const __m512i binade =
        _mm512_max_epi32(_mm512_srli_epi32(magnitude_bits, 23), _mm512_set1_epi32(kLowestBinade));
    __m512i segment =
        _mm512_permutex2var_epi32(t.segment_of_binade[0], binade, t.segment_of_binade[1]);
    const F split = _mm512_permutex2var_ps(t.split_of_binade[0], binade, t.split_of_binade[1]);
    const __mmask16 below_split = _mm512_cmp_ps_mask(a, split, _CMP_LT_OQ);
    segment = _mm512_mask_add_epi32(segment, below_split, segment, _mm512_set1_epi32(1));
    const __mmask16 negative = _mm512_test_epi32_mask(bits, _mm512_set1_epi32(int(0x80000000u)));
    if constexpr (kSigned)
      segment = _mm512_mask_add_epi32(segment, negative, segment, _mm512_set1_epi32(8));
    const F low = _mm512_permutexvar_ps(segment, t.low);
    const F inv_step = _mm512_permutexvar_ps(segment, t.inv_step);
    const __m512i base = _mm512_permutexvar_epi32(segment, t.base);
    const F j = mul(sub(a, low), inv_step);
    const __m512i k = _mm512_cvt_roundps_epi32(j, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const F fraction = _mm512_reduce_round_ps(j, _MM_FROUND_TO_NEAREST_INT, _MM_FROUND_NO_EXC);
    __mmask16 safe = _mm512_cmp_ps_mask(abs(fraction), set1(0.5f - kNearTie), _CMP_LT_OQ);
    __m512i rank;
    if constexpr (kSigned) {
      rank = _mm512_mask_sub_epi32(_mm512_add_epi32(base, k), negative, base, k);
    } else {
      rank = _mm512_add_epi32(base, k);
      safe = static_cast<__mmask16>(safe & ~negative);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(rank));
    return safe == 0xffff;
  }
  // lookup_codes with VBMI byte permutes, 64 codes at a time: the table's
  // 256 f32 values as 4 byte planes (plane b holds byte b of every value),
  // each plane 4 registers; two-source byte permutes look up the low and
  // high 128 entries and the code's top bit picks. Interleaving the planes
  // (byte, then word unpacks) yields the f32 values in 128-bit-lane order;
  // the codes are permuted first so that order is the natural one.
  struct BytePlanes {
    alignas(64) uint8_t plane[4][256];
  };
  static BytePlanes byte_planes(const Code8& code) {
    BytePlanes b;
    for (int r = 0; r < 256; ++r) {
      uint32_t u;
      std::memcpy(&u, &code[static_cast<size_t>(r)], sizeof u);
      for (int k = 0; k < 4; ++k) b.plane[k][r] = static_cast<uint8_t>(u >> (8 * k));
    }
    return b;
  }
  static const BytePlanes& planes_of(const Code8& code) {
    static const BytePlanes s = byte_planes(signed_code());
    static const BytePlanes u = byte_planes(unsigned_code());
    return &code == &signed_code() ? s : u;
  }
  static constexpr int64_t kLookupWidth = 64;
  struct LookupTable {
    __m512i t[4][4];  // plane, quarter of the 256 entries
    __m512i order;
  };
  static LookupTable lookup_table(const Code8& code) {
    const BytePlanes& b = planes_of(code);
    LookupTable t;
    for (int k = 0; k < 4; ++k)
      for (int h = 0; h < 4; ++h) t.t[k][h] = _mm512_load_si512(b.plane[k] + 64 * h);
    // Position 16L + 4m + j of the permuted codes (L: lane, m: output
    // register, j < 4) holds code 16m + 4L + j.
    alignas(64) uint8_t order_bytes[64];
    for (int pos = 0; pos < 64; ++pos)
      order_bytes[pos] = static_cast<uint8_t>(16 * (pos % 16 / 4) + 4 * (pos / 16) + pos % 4);
    t.order = _mm512_load_si512(order_bytes);
    return t;
  }
  static void lookup(const LookupTable& t, const uint8_t* q, float* out) {
    const __m512i codes = _mm512_permutexvar_epi8(t.order, _mm512_loadu_si512(q));
    const __mmask64 high = _mm512_movepi8_mask(codes);
    __m512i plane[4];
    for (int k = 0; k < 4; ++k)
      plane[k] = _mm512_mask_blend_epi8(high, _mm512_permutex2var_epi8(t.t[k][0], codes, t.t[k][1]),
                                        _mm512_permutex2var_epi8(t.t[k][2], codes, t.t[k][3]));
    const __m512i w01_lo = _mm512_unpacklo_epi8(plane[0], plane[1]);
    const __m512i w01_hi = _mm512_unpackhi_epi8(plane[0], plane[1]);
    const __m512i w23_lo = _mm512_unpacklo_epi8(plane[2], plane[3]);
    const __m512i w23_hi = _mm512_unpackhi_epi8(plane[2], plane[3]);
    _mm512_store_si512(out, _mm512_unpacklo_epi16(w01_lo, w23_lo));
    _mm512_store_si512(out + 16, _mm512_unpackhi_epi16(w01_lo, w23_lo));
    _mm512_store_si512(out + 32, _mm512_unpacklo_epi16(w01_hi, w23_hi));
    _mm512_store_si512(out + 48, _mm512_unpackhi_epi16(w01_hi, w23_hi));
  }
};

}  // namespace

LT_OPTIM_DEFINE_ISA(avx512, Avx512)

}  // namespace lt::optim

#pragma GCC diagnostic pop
#pragma GCC pop_options

#endif  // LT_OPTIM_X86_KERNELS
