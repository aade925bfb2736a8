// Damaged SentencePiece-style tokenizer.json files: with random hostile
// values in the normalizer, pre-tokenizer, decoder and model fields, loading
// either works or throws an lt::Error naming the file, and a loaded one
// encodes and decodes any bytes without another kind of failure.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "data/tokenizer.h"
#include "io/malformed_input_mutations.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace malformed;

// The Llama 2 fixture with every part this reader added in one file:
// Prepend + Replace, Split on a string + Metaspace, and each decoder.
json seed() {
  std::ifstream in(testing::fixtures_dir() / "llama2_style/tokenizer.json");
  json tokenizer = json::parse(in);
  tokenizer["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"String": "\u2581"}, "behavior": "MergedWithNext",
       "invert": false},
      {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": true}]})");
  tokenizer["decoder"]["decoders"].push_back(
      json::parse(R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"})"));
  return tokenizer;
}

TEST(MalformedSentencePieceJson, FieldMutationsLoadOrNameTheFile) {
  const json base = seed();
  const fs::path file =
      fs::temp_directory_path() / ("lazytrain_sp_fuzz_" + std::to_string(getpid()) + ".json");
  const std::vector<std::string> parts = {"normalizer", "pre_tokenizer", "decoder", "model"};
  check_cases(300, [&] {
    json mutated = base;
    const int changes = *rc::gen::inRange(1, 3);
    for (int i = 0; i < changes; ++i) {
      const std::string part = parts[*rc::gen::inRange<size_t>(0, parts.size())];
      // The model's vocabulary and merges are the byte-level readers', fuzzed
      // elsewhere; here its options.
      if (part == "model") {
        json options = mutated["model"];
        options.erase("vocab");
        options.erase("merges");
        mutate_json(options, {"byte_fallback", "fuse_unk", "unk_token"}, 1);
        for (const auto& [key, value] : options.items()) mutated["model"][key] = value;
      } else {
        mutate_json(mutated[part], {}, 4);
      }
    }
    RC_LOG() << "tokenizer.json fields: " << mutated["normalizer"].dump() << " "
             << mutated["pre_tokenizer"].dump() << " " << mutated["decoder"].dump() << "\n";
    std::ofstream(file) << mutated.dump();
    RC_ASSERT(misbehaviour({file.string()}, [&] {
                const Tokenizer tokenizer = Tokenizer::load(file);
                const std::vector<uint32_t> ids =
                    tokenizer.encode("  Hi <s>there\xF0\x9F\x98\x80 \xFF\xC3 [INST]x\u2581 ");
                tokenizer.decode(ids);
                tokenizer.decode(ids, true);
                tokenizer.decode_bytes(ids);
              }) == "");
  });
  fs::remove(file);
}

}  // namespace
}  // namespace lt::data
