#include "optim/simd.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace lt::optim {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
#if defined(__x86_64__) && defined(__GNUC__)
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2");
    case Isa::kAvx512:
      // The AVX-512 kernels use F (arithmetic, permutes, down-conversions),
      // BW and VBMI for the 8-bit code lookups (byte permutes), DQ for the
      // rank search's VREDUCEPS.
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vbmi");
#else
    default:
      return false;
#endif
  }
  return false;
}

Isa best_isa() {
  if (isa_supported(Isa::kAvx512)) return Isa::kAvx512;
  if (isa_supported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

namespace {

Isa isa_from_env() {
  const char* env = std::getenv("LT_OPTIM_ISA");
  if (env == nullptr || *env == '\0') return best_isa();
  const std::string name = env;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (name != isa_name(isa)) continue;
    LT_CHECK(isa_supported(isa), "LT_OPTIM_ISA=", name, ": this CPU does not support it");
    return isa;
  }
  fail("LT_OPTIM_ISA=", name, " is not one of scalar, avx2, avx512");
}

}  // namespace

Isa active_isa() {
  static const Isa isa = isa_from_env();
  return isa;
}

}  // namespace lt::optim
