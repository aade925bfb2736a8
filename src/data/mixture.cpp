#include "data/mixture.h"

#include <cmath>

namespace lt::data {

namespace {

// splitmix64's finalizer: a bijection on 64 bits whose every output bit
// depends on every input bit, so consecutive draw indices give independent
// looking values.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 53 bits.
double unit(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// Distinct streams for mixing and splitting under one seed.
constexpr uint64_t kMixStream = 0x6D69787475726531ull;    // "mixture1"
constexpr uint64_t kSplitStream = 0x68656C646F757431ull;  // "heldout1"

}  // namespace

size_t mixture_source(uint64_t seed, uint64_t draw, const std::vector<double>& weights) {
  if (weights.size() <= 1) return 0;
  double total = 0;
  for (double w : weights) total += w;
  const double target = unit(mix64(mix64(seed ^ kMixStream) + draw)) * total;
  double running = 0;
  for (size_t s = 0; s < weights.size(); ++s) {
    running += weights[s];
    if (target < running) return s;
  }
  return weights.size() - 1;  // rounding left target at the very top
}

bool is_held_out(const Sample& sample, double fraction, uint64_t seed) {
  if (fraction <= 0) return false;
  uint64_t h = mix64(seed ^ kSplitStream);
  for (int32_t id : sample.ids) h = mix64(h ^ static_cast<uint32_t>(id));
  h = mix64(h ^ sample.ids.size());
  return unit(h) < fraction;
}

void split_off_held_out(std::vector<Sample>& train, std::vector<Sample>& eval, double fraction,
                        uint64_t seed) {
  if (fraction <= 0) return;
  std::vector<Sample> kept;
  kept.reserve(train.size());
  for (Sample& s : train) {
    if (is_held_out(s, fraction, seed)) {
      eval.push_back(std::move(s));
    } else {
      kept.push_back(std::move(s));
    }
  }
  train = std::move(kept);
}

}  // namespace lt::data
