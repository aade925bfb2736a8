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
};

}  // namespace

LT_OPTIM_DEFINE_ISA(avx512, Avx512)

}  // namespace lt::optim

#pragma GCC diagnostic pop
#pragma GCC pop_options

#endif  // LT_OPTIM_X86_KERNELS
