// lazytrain's tokenizer against Hugging Face `tokenizers` run live on
// random strings: tools/reference/tokenizer_live_reference.py, run by the
// repository's .venv python. Skipped when that python or the package is
// missing (python3 -m venv .venv && .venv/bin/pip install tokenizers).
//
// LT_TOKENIZER_LIVE_CASES (default 3000) and LT_TOKENIZER_LIVE_SEED
// (default fixed) choose how many strings and which; LT_REFERENCE_PYTHON, a
// python with `tokenizers` to use instead of .venv's.
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "data/unicode.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using testing::escaped;

// Fragments chosen for the corners: contractions in all cases (and the
// long s that Oniguruma case-folds to 's'), whitespace of every kind, CR LF,
// NFC-sensitive sequences (Hangul jamo, marks whose class differs between
// Unicode versions), emoji joiners, and added tokens whole and broken.
const std::vector<std::string>& fragments() {
  static const std::vector<std::string> list = {"a",
                                                "b",
                                                "Z",
                                                "hello",
                                                "World",
                                                " the",
                                                "'s",
                                                "'S",
                                                "'t",
                                                "'re",
                                                "'RE",
                                                "'ve",
                                                "'m",
                                                "'ll",
                                                "'LL",
                                                "'d",
                                                "'D",
                                                "'\u017f",
                                                "'",
                                                "\u2019",
                                                "0",
                                                "1",
                                                "12",
                                                "345",
                                                "6789",
                                                " ",
                                                "  ",
                                                "   ",
                                                "\t",
                                                "\n",
                                                "\r\n",
                                                "\r",
                                                "\v",
                                                "\f",
                                                "\u00a0",
                                                "\u3000",
                                                "\u0085",
                                                "\u2028",
                                                "\u2029",
                                                "\u1680",
                                                "\u180e",
                                                "\u200b",
                                                "\u001c",
                                                ".",
                                                ",",
                                                "!",
                                                "?",
                                                "-",
                                                "_",
                                                "(",
                                                ")",
                                                "{",
                                                "}",
                                                "<",
                                                ">",
                                                "/",
                                                "\\",
                                                "\"",
                                                "#",
                                                "@",
                                                "$",
                                                "%",
                                                "\u00e9",
                                                "e\u0301",
                                                "\u0301",
                                                "\u0308",
                                                "\u0323",
                                                "\u0334",
                                                "\u0345",
                                                "\u0898",
                                                "\u1df6",
                                                "\u1100",
                                                "\u1161",
                                                "\u11a8",
                                                "\uac00",
                                                "\u4e2d",
                                                "\u6587",
                                                "\u65e5\u672c",
                                                "\u0627",
                                                "\u0628",
                                                "\u064b",
                                                "\u0928",
                                                "\u093e",
                                                "\u094d",
                                                "\u0958",
                                                "\U0001F600",
                                                "\u200d",
                                                "\U0001F468",
                                                "\U0001F469",
                                                "\U0001F3FD",
                                                "\ufe0f",
                                                "\U0001F1EB",
                                                "\U0001F1F7",
                                                "\u00bd",
                                                "\u2162",
                                                "\u0663",
                                                "<|im_start|>",
                                                "<|im_end|>",
                                                "<|endoftext|>",
                                                "<think>",
                                                "</think>",
                                                "<|",
                                                "|>",
                                                "<|im_",
                                                "start|>",
                                                "\u2581",
                                                "\u2581\u2581",
                                                "<s>",
                                                "</s>",
                                                "<unk>",
                                                "[INST]",
                                                "[/INST]",
                                                "<|user|>",
                                                "<0x41>",
                                                "\u212b",
                                                "\u2126",
                                                "\U00011935",
                                                "\U00011930"};
  return list;
}

// A code point anywhere in Unicode, including unassigned ones, but no
// surrogate (HF's input is a Python str, which has none here).
char32_t random_code_point(std::mt19937& rng) {
  std::uniform_int_distribution<int> plane_choice(0, 9);
  int choice = plane_choice(rng);
  char32_t lo = 0x80, hi = 0xFFFF;
  if (choice == 0) {
    lo = 0x10000, hi = 0x10FFFF;
  } else if (choice <= 3) {
    lo = 0x300, hi = 0x36F;  // combining marks
  }
  while (true) {
    char32_t cp = std::uniform_int_distribution<char32_t>(lo, hi)(rng);
    if (cp < 0xD800 || cp > 0xDFFF) return cp;
  }
}

std::vector<std::string> random_texts(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> texts;
  const auto& pool = fragments();
  for (size_t i = 0; i < count; ++i) {
    std::string text;
    size_t parts = std::uniform_int_distribution<size_t>(1, 30)(rng);
    for (size_t p = 0; p < parts; ++p) {
      if (std::uniform_int_distribution<int>(0, 5)(rng) == 0) {
        append_utf8(text, random_code_point(rng));
      } else {
        text += pool[std::uniform_int_distribution<size_t>(0, pool.size() - 1)(rng)];
      }
    }
    texts.push_back(std::move(text));
  }
  return texts;
}

size_t env_or(const char* name, size_t fallback) {
  const char* value = std::getenv(name);
  return value ? std::strtoull(value, nullptr, 10) : fallback;
}

TEST(TokenizerLive, MatchesHuggingFaceOnRandomStrings) {
  const char* chosen_python = std::getenv("LT_REFERENCE_PYTHON");
  fs::path python =
      chosen_python ? fs::path(chosen_python) : fs::path(LT_SOURCE_DIR) / ".venv/bin/python";
  fs::path script = fs::path(LT_SOURCE_DIR) / "tools/reference/tokenizer_live_reference.py";
  if (!fs::exists(python)) {
    GTEST_SKIP() << python
                 << " is missing: python3 -m venv .venv && .venv/bin/pip install tokenizers";
  }
  if (std::system((python.string() + " -c 'import tokenizers' 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "the `tokenizers` package is not installed: .venv/bin/pip install tokenizers";
  }
  size_t count = env_or("LT_TOKENIZER_LIVE_CASES", 3000);
  auto seed = static_cast<uint32_t>(env_or("LT_TOKENIZER_LIVE_SEED", 20261129));
  std::vector<std::string> texts = random_texts(count, seed);

  fs::path dir =
      fs::temp_directory_path() / ("lazytrain_tokenizer_live_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "in.json") << nlohmann::json({{"texts", texts}}).dump();
  std::string command = python.string() + " " + script.string() + " " + (dir / "in.json").string() +
                        " " + (dir / "out.json").string();
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  nlohmann::json reference = nlohmann::json::parse(std::ifstream(dir / "out.json"));
  fs::remove_all(dir);

  std::vector<std::string> names = testing::reference_names();
  const std::vector<std::string>& sentencepiece_style = testing::sentencepiece_style_names();
  names.insert(names.end(), sentencepiece_style.begin(), sentencepiece_style.end());
  for (const std::string& name : names) {
    const bool byte_level = std::find(sentencepiece_style.begin(), sentencepiece_style.end(),
                                      name) == sentencepiece_style.end();
    const Tokenizer& tokenizer = testing::reference_tokenizer(name);
    size_t mismatches = 0;
    for (size_t i = 0; i < texts.size() && mismatches < 5; ++i) {
      auto expected = reference[name][i].get<std::vector<uint32_t>>();
      std::vector<uint32_t> ids = tokenizer.encode(texts[i]);
      if (ids != expected) {
        ++mismatches;
        ADD_FAILURE() << name << " differs on text " << i << ": " << escaped(texts[i]);
      }
      const auto& decoded = reference[name + "_decoded"][i];  // null: HF panicked
      if (!decoded.is_null()) {
        EXPECT_EQ(tokenizer.decode(ids), decoded.get<std::string>())
            << name << " decodes differently: " << escaped(texts[i]);
      }
      // decode(encode(x)) == x after normalization. Only without added
      // tokens: they are cut out before NFC, so a mark right after one
      // (">" + U+0338) does not compose with it as NFC(x) would.
      if (byte_level && name != "roberta_style" && texts[i].find('<') == std::string::npos) {
        std::string expected_text = tokenizer.normalizer().apply(texts[i]);
        EXPECT_EQ(tokenizer.decode(ids), expected_text)
            << name << " round trip of " << escaped(texts[i]);
      }
    }
    EXPECT_EQ(mismatches, 0u) << name << " (seed " << seed << ")";
  }
  for (const auto& [pattern, pieces] : reference["pieces"].items()) {
    size_t mismatches = 0;
    for (size_t i = 0; i < texts.size() && mismatches < 5; ++i) {
      if (testing::split_pieces(testing::pattern_named(pattern), texts[i]) !=
          pieces[i].get<std::vector<std::string>>()) {
        ++mismatches;
        ADD_FAILURE() << "pattern " << pattern << " splits differently: " << escaped(texts[i]);
      }
    }
  }
}

}  // namespace
}  // namespace lt::data
