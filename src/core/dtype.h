#pragma once
// Element types and the scalar conversions between them. bf16 and f16 are
// stored as raw 16-bit patterns; conversion to them rounds to nearest even.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace lt {

// F64 is not a storage type for models; it exists so that the CPU backend
// can run float64 references and finite-difference gradient checks.
enum class DType : uint8_t { F32, F64, BF16, F16, I32, I64, I8, U8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
DType dtype_from_name(const std::string& name);  // "f32", "bf16", ... throws on unknown
bool is_floating(DType t);

struct BFloat16 {
  uint16_t bits = 0;
};
struct Float16 {
  uint16_t bits = 0;
};

inline float bf16_to_f32(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float f);

// Maps a C++ element type to its DType.
template <typename T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::F32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::F64;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr DType value = DType::BF16;
};
template <>
struct dtype_of<Float16> {
  static constexpr DType value = DType::F16;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = DType::I32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = DType::I64;
};
template <>
struct dtype_of<int8_t> {
  static constexpr DType value = DType::I8;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = DType::U8;
};

// Reads element `i` of a buffer of type `t` as double (exact for every type
// but i64 beyond 2^53), and writes a double into one (rounding as above;
// integers truncate toward zero).
double load_as_double(const void* base, DType t, size_t i);
void store_from_double(void* base, DType t, size_t i, double v);

// Converts `n` contiguous elements from one type to another.
void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n);

}  // namespace lt
