// Malformed safetensors files, shard indexes and model folders, made by
// mutating valid ones at random (rapidcheck): each either loads or is
// refused with an lt::Error whose message names the file (or its folder).
// Nothing may crash, hang, throw another exception type (nlohmann::json,
// std::bad_alloc, std::out_of_range, ...) or read out of bounds (run under
// the Sanitize build to check the last). The seeds are the reference files
// that Python's safetensors and transformers wrote (tests/io/fixtures,
// tests/models/fixtures). Each property runs a bounded number of cases so
// the file stays a few seconds in CI.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <nlohmann/json.hpp>

#include <filesystem>

#include "core/error.h"
#include "io/hf_folder.h"
#include "io/hf_model.h"
#include "io/safetensors.h"
#include "io_test_util.h"
#include "malformed_input_mutations.h"
#include "models/config.h"

namespace lt::io {
namespace {

namespace fs = std::filesystem;
using namespace malformed;
using nlohmann::json;
using testing::TempDir;

// Opens a safetensors file and reads every tensor it can hold, touching
// each byte (a bad offset would read outside the mapping).
void read_every_tensor(const fs::path& path) {
  SafetensorsFile file(path);
  for (const auto& name : file.names()) {
    if (!file.entry(name).dtype) continue;  // a dtype lazytrain cannot hold: refused on access
    Tensor t = file.tensor(name);
    volatile uint8_t sink = 0;
    const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
    for (size_t i = 0; i < t.nbytes(); ++i) sink = sink ^ bytes[i];
  }
}

const fs::path kSafetensorsSeed = testing::fixtures_dir() / "reference_all_dtypes.safetensors";
const fs::path kFamilies = testing::source_dir() / "tests" / "models" / "fixtures" / "families";

// [8-byte length][header][data], the header padded with spaces to 8 bytes.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string text = header;
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return out + text + data;
}

struct SafetensorsSeed {
  std::string bytes;
  json header;
  std::string data;
  size_t header_end = 0;
};

const SafetensorsSeed& safetensors_seed() {
  static const SafetensorsSeed seed = [] {
    SafetensorsSeed s;
    s.bytes = testing::read_text(kSafetensorsSeed);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
      n = (n << 8) | static_cast<uint8_t>(s.bytes[static_cast<size_t>(i)]);
    s.header_end = 8 + n;
    s.header = json::parse(s.bytes.substr(8, n));
    s.data = s.bytes.substr(8 + n);
    return s;
  }();
  return seed;
}

// Writes `bytes` to `path` and requires that reading it behaves (inside a
// property: a failure is a rapidcheck counterexample, logged in full).
void check_file(const fs::path& path, const std::string& bytes) {
  RC_LOG() << path.filename().string() << ": " << malformed::printable(bytes) << "\n";
  testing::write_text(path, bytes);
  RC_ASSERT(misbehaviour({path.string()}, [&] { read_every_tensor(path); }) == "");
}

// ---- properties ----

TEST(MalformedSafetensors, ByteMutationsLoadOrNameTheFile) {
  TempDir dir;
  const fs::path path = dir / "mutated.safetensors";
  check_cases(600, [&] {
    const auto& seed = safetensors_seed();
    check_file(path, mutate_bytes(seed.bytes, seed.header_end));
  });
}

TEST(MalformedSafetensors, HeaderMutationsLoadOrNameTheFile) {
  TempDir dir;
  const fs::path path = dir / "mutated.safetensors";
  check_cases(1000, [&] {
    const auto& seed = safetensors_seed();
    json header = seed.header;
    std::string data = seed.data;
    if (*rc::gen::inRange(0, 3) == 0) {
      // Tensors' data_offsets replaced by random pairs in and around the
      // data region: overlaps, reversed pairs, ends past the region.
      const auto data_size = static_cast<int64_t>(data.size());
      for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == "__metadata__" || *rc::gen::arbitrary<bool>()) continue;
        (*it)["data_offsets"] = {*rc::gen::inRange<int64_t>(0, data_size + 8),
                                 *rc::gen::inRange<int64_t>(0, data_size + 8)};
      }
    } else {
      const int changes = *rc::gen::inRange(1, 3);
      for (int i = 0; i < changes; ++i) mutate_json(header, {"__metadata__", "extra"});
      // Sometimes the data region is cut short or grown, so that offsets
      // that were right point past its end (or leave bytes over).
      if (*rc::gen::inRange(0, 4) == 0) data.resize(*rc::gen::inRange<size_t>(0, data.size() + 9));
    }
    check_file(path, safetensors_bytes(header.dump(), data));
  });
}

TEST(MalformedShardIndex, IndexMutationsLoadOrNameTheFolder) {
  TempDir dir;
  const fs::path seed = testing::fixtures_dir() / "reference_sharded";
  for (const auto& entry : fs::directory_iterator(seed))
    fs::copy(entry.path(), dir / entry.path().filename().string());
  const fs::path index = dir / "model.safetensors.index.json";
  const json original = json::parse(testing::read_text(index));
  check_cases(300, [&] {
    json mutated = original;
    mutate_json(mutated, {"weight_map", "metadata"});
    std::string text = mutated.dump();
    if (*rc::gen::inRange(0, 4) == 0) text = mutate_bytes(text, text.size());
    RC_LOG() << "index: " << text << "\n";
    testing::write_text(index, text);
    const std::string problem =
        misbehaviour({dir.path().string()}, [&] { read_hf_weights(dir.path()); });
    RC_ASSERT(problem == "");
  });
}

// A copy of a family fixture whose config.json gets random changes.
void check_config_mutations(const std::string& family, int cases) {
  TempDir dir;
  for (const auto& entry : fs::directory_iterator(kFamilies / family)) {
    if (entry.path().filename() != "reference.safetensors")
      fs::copy(entry.path(), dir / entry.path().filename().string());
  }
  const fs::path config = dir / "config.json";
  const json original = json::parse(testing::read_text(config));
  // Keys the fixture may lack but a config may hold.
  const std::vector<std::string> extra = {
      "head_dim",     "num_key_value_heads", "rope_scaling",
      "layer_types",  "sliding_window",      "n_inner",
      "eos_token_id", "quantization_config", "max_position_embeddings",
      "vocab_size",   "hidden_size",         "intermediate_size"};
  check_cases(cases, [&] {
    json mutated = original;
    const int changes = *rc::gen::inRange(1, 3);
    for (int i = 0; i < changes; ++i) mutate_json(mutated, extra);
    std::string text = mutated.dump(2);
    if (*rc::gen::inRange(0, 5) == 0) text = mutate_bytes(text, text.size());
    RC_LOG() << "config.json: " << text << "\n";
    testing::write_text(config, text);
    const std::string problem =
        misbehaviour({dir.path().string()}, [&] { load_hf_model(dir.path(), DType::F32); });
    RC_ASSERT(problem == "");
  });
}

TEST(MalformedModelFolder, LlamaConfigMutationsLoadOrNameTheFolder) {
  check_config_mutations("llama", 300);
}

TEST(MalformedModelFolder, Gpt2ConfigMutationsLoadOrNameTheFolder) {
  check_config_mutations("gpt2", 200);
}

// ---- regressions: inputs the properties (or a look at the code) found ----

// A copy of the llama fixture with `key` of config.json set to `value`;
// returns the message of the error loading it throws.
std::string llama_config_error(const TempDir& dir, const std::string& key, const json& value) {
  for (const auto& entry : fs::directory_iterator(kFamilies / "llama")) {
    if (entry.path().filename() != "reference.safetensors")
      fs::copy(entry.path(), dir / entry.path().filename().string(),
               fs::copy_options::overwrite_existing);
  }
  json config = json::parse(testing::read_text(dir / "config.json"));
  config[key] = value;
  testing::write_text(dir / "config.json", config.dump(2));
  try {
    load_hf_model(dir.path(), DType::F32);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << key << " = " << value.dump() << " loaded";
  return "";
}

// A vocabulary of 2^31 tokens is a valid config on its own, but the model
// was allocated from it (a 412 GB embedding) before any weight was
// compared: "host allocation of ... bytes failed", naming no file.
TEST(MalformedModelFolderRegression, ConfigLargerThanTheWeightsNamesTheConfig) {
  TempDir dir;
  const std::string message = llama_config_error(dir, "vocab_size", int64_t{2147483648});
  EXPECT_NE(message.find((dir / "config.json").string()), std::string::npos) << message;
  EXPECT_NE(message.find("parameters"), std::string::npos) << message;
}

// Sizes whose products overflow int64 (hidden 1e18: vocab x hidden alone
// is 9.7e19): undefined arithmetic in num_parameters() and an allocation of
// a wrapped byte count.
TEST(MalformedModelFolderRegression, OverflowingSizesNameTheConfig) {
  for (const char* key : {"hidden_size", "intermediate_size", "num_hidden_layers"}) {
    TempDir dir;
    const std::string message = llama_config_error(dir, key, int64_t{1'000'000'000'000'000'000});
    EXPECT_NE(message.find((dir / "config.json").string()), std::string::npos) << message;
  }
  TempDir dir;
  const std::string message = llama_config_error(dir, "vocab_size", UINT64_MAX);
  EXPECT_NE(message.find((dir / "config.json").string()), std::string::npos) << message;
  EXPECT_NE(message.find("vocab_size"), std::string::npos) << message;
}

// Nesting far deeper than any config.json where a number belongs: an
// error, not a stack overflow while printing the value.
TEST(MalformedModelFolderRegression, DeeplyNestedValueIsAnError) {
  TempDir dir;
  std::string text = testing::read_text(kFamilies / "llama" / "config.json");
  const std::string key = "\"hidden_size\": 48";
  ASSERT_NE(text.find(key), std::string::npos);
  constexpr size_t kDepth = 500000;
  text.replace(text.find(key), key.size(),
               "\"hidden_size\": " + std::string(kDepth, '[') + std::string(kDepth, ']'));
  testing::write_text(dir / "config.json", text);
  try {
    models::ModelConfig::from_file(dir / "config.json");
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find((dir / "config.json").string()), std::string::npos)
        << message.substr(0, 300);
  }
}

}  // namespace
}  // namespace lt::io
