#pragma once
// A seeded generator for initialization and tests. Deterministic across
// platforms: we draw the raw 64-bit stream and do our own transforms rather
// than use std::normal_distribution, whose output is implementation-defined.
#include <cstdint>
#include <random>

namespace lt {

// A well-mixed seed for the stream numbered `index` of a generator seeded
// with `seed` (splitmix64's finalizer over their combination), so that
// neighbouring indices give unrelated streams.
inline uint64_t split_seed(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : engine_(seed) {}
  uint64_t next_u64() { return engine_(); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal by Box-Muller.
  double normal();
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return engine_() % n; }

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace lt
