#pragma once
// transformers' greedy generation goldens for the model-family fixtures
// (tools/reference/make_generation_goldens.py): the fixtures' folder, the
// parsed goldens, and how many leading steps of a golden run are safe to
// compare (before the reference's first near-tie between two tokens).
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace lt::testing {

// A step whose top two logits in the reference are closer than this may
// pick either token in f32 (ours) or float64 (theirs).
inline constexpr double kGenerationTieGap = 1e-3;

inline std::filesystem::path family_fixtures() {
  return std::filesystem::path(LT_SOURCE_DIR) / "tests/models/fixtures/families";
}

inline const nlohmann::json& generation_goldens() {
  static const nlohmann::json j = [] {
    std::ifstream in(family_fixtures() / "generation_goldens.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

// The number of leading steps before the reference's first near-tie.
inline size_t steps_before_tie(const nlohmann::json& gaps) {
  size_t n = 0;
  while (n < gaps.size() && gaps[n].get<double>() >= kGenerationTieGap) ++n;
  return n;
}

}  // namespace lt::testing
