#pragma once
// Random damage to valid input files, for the malformed-input property tests
// (tests/io and tests/data malformed_inputs_fuzz_test.cpp): byte-level
// mutations, JSON values swapped for hostile ones, and the check that a load
// either succeeds or throws an lt::Error naming the file.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "core/error.h"

namespace lt::malformed {

// Runs `property` for `cases` random cases, chosen so that every property
// of these files together stays a few seconds in CI. The cases are the same
// in every run (a seed from the test's name), so CI cannot fail on a case
// no earlier run saw; RC_PARAMS still applies: "seed=..." explores other
// cases or replays a reported failure, and "max_success=N" with N above
// `cases` searches longer.
template <typename Property>
void check_cases(int cases, Property property) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = std::max(cases, params.maxSuccess);
  const char* rc_params = std::getenv("RC_PARAMS");
  if (rc_params == nullptr || std::string(rc_params).find("seed") == std::string::npos)
    params.seed =
        std::hash<std::string>{}(::testing::UnitTest::GetInstance()->current_test_info()->name());
  rc::detail::TestMetadata metadata;
  metadata.id = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const auto result = rc::detail::checkTestable(std::move(property), metadata, params);
  if (!result.template is<rc::detail::SuccessResult>()) {
    std::ostringstream message;
    rc::detail::printResultMessage(result, message);
    ADD_FAILURE() << message.str();
  }
}

// Empty when `load` behaves: it returns, or it throws an lt::Error whose
// message holds one of `names` (file paths). Otherwise what went wrong.
template <typename Load>
std::string misbehaviour(const std::vector<std::string>& names, Load&& load) {
  try {
    load();
    return "";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const auto& name : names) {
      if (what.find(name) != std::string::npos) return "";
    }
    return "lt::Error without the file name '" + names.front() + "': " + what;
  } catch (const std::exception& e) {
    return std::string("not an lt::Error but ") + typeid(e).name() + ": " + e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

// One byte-level change: the text cut short, or bytes overwritten,
// inserted or deleted. Half of the positions fall before `hot_end` (where
// a format keeps its structure, e.g. a safetensors header), the rest
// anywhere.
inline std::string mutate_bytes(std::string bytes, size_t hot_end) {
  const size_t limit = *rc::gen::arbitrary<bool>() ? std::min(hot_end, bytes.size()) : bytes.size();
  const size_t pos = *rc::gen::inRange<size_t>(0, limit + 1);
  switch (*rc::gen::inRange(0, 4)) {
    case 0:
      bytes.resize(pos);
      break;
    case 1: {
      const int count = *rc::gen::inRange(1, 9);
      for (int i = 0; i < count && !bytes.empty(); ++i) {
        bytes[*rc::gen::inRange<size_t>(0, std::min(limit + 1, bytes.size()))] =
            static_cast<char>(*rc::gen::arbitrary<uint8_t>());
      }
      break;
    }
    case 2: {
      const auto inserted = *rc::gen::container<std::string>(*rc::gen::inRange<size_t>(1, 9),
                                                             rc::gen::arbitrary<char>());
      bytes.insert(std::min(pos, bytes.size()), inserted);
      break;
    }
    default:
      bytes.erase(std::min(pos, bytes.size()), *rc::gen::inRange<size_t>(1, 17));
      break;
  }
  return bytes;
}

// `bytes` for a failure log: printable ASCII as is, the rest as \xNN.
inline std::string printable(const std::string& bytes) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7F && b != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

// Values a broken or hostile file might hold where a count, an id, an
// offset, a name or an object belongs.
inline const std::vector<nlohmann::json>& hostile_values() {
  using nlohmann::json;
  static const std::vector<json> values = {
      -1,
      -100,
      0,
      1,
      3,
      int64_t{1'000'000'000'000'000'000},  // 1e18 as an integer
      json::parse("1e18"),                 // ... and as a float
      INT64_MAX,
      UINT64_MAX,
      uint64_t{1} << 62,
      int64_t{2147483647},
      int64_t{4294967295},
      2.5,
      json::parse("1e300"),
      -0.0,
      true,
      nullptr,
      "",
      " ",
      "F32",
      "X99",
      "<|im_end|>",
      "\xE2\x82\xAC",
      json::array(),
      json::array({0}),
      json::array({0, 0}),
      json::array({-1, 4}),
      json::array({4, 0}),
      json::array({0, int64_t{1'000'000'000'000'000'000}}),
      json::array({0, UINT64_MAX}),
      json::array({2147483648LL, 2147483648LL, 2147483648LL}),
      json::array({json::array({1})}),
      json::array({"4"}),
      json::array({nullptr}),
      json::object(),
      json{{"a", 1}},
      json{{"type", "Sequence"}},
      json{{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}},
  };
  return values;
}

inline nlohmann::json hostile_value() {
  const auto& values = hostile_values();
  return values[*rc::gen::inRange<size_t>(0, values.size())];
}

// One random change to a value somewhere in `root`, up to `depth` levels
// down through objects and arrays: replaced by a hostile value, or (for an
// object member) removed. At the top level the key may also be one of
// `extra_keys`, which the file may lack.
inline void mutate_json(nlohmann::json& root, const std::vector<std::string>& extra_keys,
                        int depth = 3) {
  nlohmann::json* target = &root;
  for (int level = 0; level < depth; ++level) {
    const bool stop_here = *rc::gen::inRange(0, 4) == 0;
    if (target->is_object() && (!target->empty() || level == 0)) {
      std::vector<std::string> keys;
      if (level == 0) keys = extra_keys;
      for (auto it = target->begin(); it != target->end(); ++it) keys.push_back(it.key());
      if (keys.empty()) break;
      const std::string key = keys[*rc::gen::inRange<size_t>(0, keys.size())];
      if (!target->contains(key) || stop_here) {
        if (target->contains(key) && *rc::gen::inRange(0, 4) == 0) {
          target->erase(key);
        } else {
          (*target)[key] = hostile_value();
        }
        return;
      }
      target = &(*target)[key];
    } else if (target->is_array() && !target->empty() && !stop_here) {
      target = &(*target)[*rc::gen::inRange<size_t>(0, target->size())];
    } else {
      break;
    }
  }
  *target = hostile_value();
}

}  // namespace lt::malformed
