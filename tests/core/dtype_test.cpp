// Conversions against brute-force references: every 16-bit pattern, and
// the nearest representable value found by exhaustive search.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace lt {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Nearest value in a sorted table of finite values, ties to the even code.
uint16_t nearest_code(double x, const std::vector<std::pair<double, uint16_t>>& table) {
  auto it = std::lower_bound(table.begin(), table.end(), std::make_pair(x, uint16_t{0}),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
  if (it == table.begin()) return it->second;
  if (it == table.end()) return std::prev(it)->second;
  auto lo = std::prev(it);
  double dlo = x - lo->first, dhi = it->first - x;
  if (dlo < dhi) return lo->second;
  if (dhi < dlo) return it->second;
  return (lo->second & 1) == 0 ? lo->second : it->second;
}

std::vector<std::pair<double, uint16_t>> positive_table(float (*decode)(uint16_t)) {
  std::vector<std::pair<double, uint16_t>> table;
  for (uint32_t c = 0; c < 0x8000; ++c) {
    float v = decode(static_cast<uint16_t>(c));
    if (std::isfinite(v)) table.emplace_back(v, static_cast<uint16_t>(c));
  }
  std::sort(table.begin(), table.end());
  return table;
}

TEST(DType, Bf16EveryPatternRoundTrips) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    float f = bf16_to_f32(static_cast<uint16_t>(c));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_bf16(f), c) << "pattern " << c;
  }
}

TEST(DType, F16EveryPatternRoundTrips) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    float f = f16_to_f32(static_cast<uint16_t>(c));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), c) << "pattern " << c;
  }
}

TEST(DType, Bf16RoundsToNearestEven) {
  auto table = positive_table(&bf16_to_f32);
  std::mt19937 rng(7);
  const double bf16_max = table.back().first;
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng() & 0x7fffffffu;
    // Half the samples sit exactly on a tie to exercise the even rule.
    if (i % 2) bits = (bits & 0xffff0000u) | 0x8000u;
    float f = from_bits(bits);
    if (!std::isfinite(f) || std::abs(f) > bf16_max) continue;
    ASSERT_EQ(f32_to_bf16(f), nearest_code(f, table)) << "value " << f;
    ASSERT_EQ(f32_to_bf16(-f), nearest_code(f, table) | 0x8000u);
  }
}

TEST(DType, F16RoundsToNearestEvenIncludingSubnormalsAndOverflow) {
  auto table = positive_table(&f16_to_f32);
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    // Exponents around f16's range: subnormals (2^-24) up to past 65504.
    float f = std::ldexp(static_cast<float>(rng() % (1u << 24)) / (1u << 24), -26 + rng() % 44);
    uint16_t expected = f >= 65520.0f ? 0x7c00 : nearest_code(f, table);
    ASSERT_EQ(f32_to_f16(f), expected) << "value " << f;
  }
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);
}

TEST(DType, ConvertBuffersBetweenEveryPair) {
  const std::vector<double> values = {0, 1, -2, 3, 100, -7, 42};
  const DType all[] = {DType::F32, DType::F64, DType::BF16, DType::F16,
                       DType::I32, DType::I64, DType::I8};
  for (DType src : all) {
    std::vector<uint8_t> a(values.size() * 8), b(values.size() * 8);
    for (size_t i = 0; i < values.size(); ++i) store_from_double(a.data(), src, i, values[i]);
    for (DType dst : all) {
      convert(a.data(), src, b.data(), dst, values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        EXPECT_EQ(load_as_double(b.data(), dst, i), values[i])
            << dtype_name(src) << " -> " << dtype_name(dst);
      }
    }
  }
  EXPECT_THROW(dtype_from_name("f128"), Error);
  EXPECT_EQ(dtype_from_name("bf16"), DType::BF16);
}

}  // namespace
}  // namespace lt
