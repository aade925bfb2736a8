#include "core/dtype.h"

#include <cmath>

#include "core/error.h"

namespace lt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F64:
      return 8;
    case DType::BF16:
      return 2;
    case DType::F16:
      return 2;
    case DType::I32:
      return 4;
    case DType::I64:
      return 8;
    case DType::I8:
      return 1;
    case DType::U8:
      return 1;
  }
  fail("unknown dtype ", static_cast<int>(t));
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "f16";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::I8:
      return "i8";
    case DType::U8:
      return "u8";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I32, DType::I64,
                  DType::I8, DType::U8}) {
    if (name == dtype_name(t)) return t;
  }
  fail("unknown dtype '", name, "' (expected one of f32, f64, bf16, f16, i32, i64, i8, u8)");
}

bool is_floating(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::BF16 || t == DType::F16;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | (exp + 127 - 15) << 23 | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // result is subnormal or zero in f16
    // Scale into the subnormal range with an exact float add that rounds to even.
    float af;
    std::memcpy(&af, &abs, 4);
    float scaled = af + 0.5f;  // 0.5 = 2^-1 puts the f16 subnormal ulp (2^-24) at the float ulp
    uint32_t s;
    std::memcpy(&s, &scaled, 4);
    return static_cast<uint16_t>(sign | (s - 0x3f000000u));
  }
  uint32_t mant_odd = (abs >> 13) & 1u;
  abs += 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
  return static_cast<uint16_t>(sign | (abs >> 13));
}

double load_as_double(const void* base, DType t, size_t i) {
  switch (t) {
    case DType::F32:
      return static_cast<const float*>(base)[i];
    case DType::F64:
      return static_cast<const double*>(base)[i];
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::F16:
      return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::I32:
      return static_cast<const int32_t*>(base)[i];
    case DType::I64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DType::I8:
      return static_cast<const int8_t*>(base)[i];
    case DType::U8:
      return static_cast<const uint8_t*>(base)[i];
  }
  fail("unknown dtype");
}

void store_from_double(void* base, DType t, size_t i, double v) {
  switch (t) {
    case DType::F32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      return;
    case DType::F64:
      static_cast<double*>(base)[i] = v;
      return;
    case DType::BF16:
      static_cast<uint16_t*>(base)[i] = f32_to_bf16(static_cast<float>(v));
      return;
    case DType::F16:
      static_cast<uint16_t*>(base)[i] = f32_to_f16(static_cast<float>(v));
      return;
    case DType::I32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      return;
    case DType::I64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      return;
    case DType::I8:
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v);
      return;
    case DType::U8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      return;
  }
  fail("unknown dtype");
}

namespace {
// The conversions that sit on hot paths (weights and activations) get a
// tight loop; every other pair goes through double, which is exact for them.
template <typename Load, typename Store>
void convert_loop(size_t n, Load load, Store store) {
  for (size_t i = 0; i < n; ++i) store(i, load(i));
}
}  // namespace

void convert(const void* src, DType st, void* dst, DType dt, size_t n) {
  if (st == dt) {
    std::memcpy(dst, src, n * dtype_size(st));
    return;
  }
  const auto* s16 = static_cast<const uint16_t*>(src);
  const auto* s32 = static_cast<const float*>(src);
  auto* d16 = static_cast<uint16_t*>(dst);
  auto* d32 = static_cast<float*>(dst);
  if (st == DType::BF16 && dt == DType::F32) {
    convert_loop(
        n, [&](size_t i) { return bf16_to_f32(s16[i]); }, [&](size_t i, float v) { d32[i] = v; });
  } else if (st == DType::F32 && dt == DType::BF16) {
    convert_loop(
        n, [&](size_t i) { return f32_to_bf16(s32[i]); },
        [&](size_t i, uint16_t v) { d16[i] = v; });
  } else if (st == DType::F16 && dt == DType::F32) {
    convert_loop(
        n, [&](size_t i) { return f16_to_f32(s16[i]); }, [&](size_t i, float v) { d32[i] = v; });
  } else if (st == DType::F32 && dt == DType::F16) {
    convert_loop(
        n, [&](size_t i) { return f32_to_f16(s32[i]); }, [&](size_t i, uint16_t v) { d16[i] = v; });
  } else if (st == DType::BF16 || st == DType::F16) {
    // Half types go through float first: double rounding f64->f32->bf16 never
    // happens here because the source is already narrower than f32.
    for (size_t i = 0; i < n; ++i) store_from_double(dst, dt, i, load_as_double(src, st, i));
  } else if (dt == DType::BF16 || dt == DType::F16) {
    // f64 -> half: round once through f32 as PyTorch does.
    for (size_t i = 0; i < n; ++i)
      store_from_double(dst, dt, i, static_cast<float>(load_as_double(src, st, i)));
  } else if (st == DType::I64 && dt != DType::F32 && dt != DType::F64) {
    const auto* s64 = static_cast<const int64_t*>(src);
    for (size_t i = 0; i < n; ++i) {
      switch (dt) {
        case DType::I32:
          static_cast<int32_t*>(dst)[i] = static_cast<int32_t>(s64[i]);
          break;
        case DType::I8:
          static_cast<int8_t*>(dst)[i] = static_cast<int8_t>(s64[i]);
          break;
        case DType::U8:
          static_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(s64[i]);
          break;
        default:
          fail("unreachable");
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) store_from_double(dst, dt, i, load_as_double(src, st, i));
  }
}

}  // namespace lt
