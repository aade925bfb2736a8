#pragma once
// Which instruction set the CPU optimizers' kernels use. The AVX2 and
// AVX-512 kernels live in their own translation units (adamw_avx2.cpp,
// adamw_avx512.cpp, ...) compiled for that instruction set by a target
// pragma; nothing else in the build assumes more than x86-64 baseline, so
// the binary runs anywhere and picks the widest kernel the CPU has.
//
// Every path computes the same IEEE f32 operations in the same order (no
// FMA; adamw_kernel.h), so the choice changes speed, never results: the
// tests hold each vector path bitwise to the scalar one.
#include <cstdint>

namespace lt::optim {

// kAvx512 means AVX-512 F + BW + DQ + VBMI (simd.cpp).
enum class Isa { kScalar, kAvx2, kAvx512 };

const char* isa_name(Isa isa);
// Whether this CPU (and this build) can run `isa`.
bool isa_supported(Isa isa);
// The widest supported one.
Isa best_isa();
// What the optimizers use: LT_OPTIM_ISA (scalar, avx2, avx512) when set,
// else best_isa(). Read once; an unknown or unsupported name is an
// lt::Error naming LT_OPTIM_ISA.
Isa active_isa();

}  // namespace lt::optim
