// check_tokenizer_runs_model's warning for config.json's eos_token_id and
// bos_token_id (Note [Special ids no token has]): an id that no token of
// the tokenizer has says the tokenizer is another model's (a Qwen3-shaped
// config, eos 151645, given GPT-2's 50257-token files: generation never
// stopped, silently). An id that has a token, even one that is not the
// tokenizer's own EOS (Llama 3 instruct configs list several), is normal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "data/tokenizer.h"
#include "support/fixture_tokenizers.h"
#include "tokenizer_fixtures.h"

namespace lt::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TokenizerSpecialIds : public ::testing::Test {
 protected:
  TokenizerSpecialIds()
      : dir_(fs::temp_directory_path() / ("lazytrain_special_ids_" + std::to_string(getpid()))),
        gpt2_(Tokenizer::load(testing::fixtures_dir() / "gpt2")) {
    fs::create_directories(dir_);
  }
  ~TokenizerSpecialIds() override { fs::remove_all(dir_); }

  // The qwen3 fixture's config.json shaped as Qwen3's (151936 rows), with
  // `ids` (eos_token_id, bos_token_id, ...) set; its path.
  std::string qwen3_config(const json& ids) const {
    std::ifstream in(fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/qwen3/config.json");
    json config = json::parse(in);
    config["vocab_size"] = 151936;
    for (const auto& [key, value] : ids.items()) config[key] = value;
    const fs::path file = dir_ / "config.json";
    std::ofstream(file) << config.dump();
    return file.string();
  }
  std::string encoder() const { return (testing::fixtures_dir() / "gpt2/encoder.json").string(); }

  fs::path dir_;
  Tokenizer gpt2_;
};

TEST_F(TokenizerSpecialIds, AnEosIdPastTheTokenizerIsAWarningNamingBothFiles) {
  const std::string config = qwen3_config({{"eos_token_id", 151645}, {"bos_token_id", nullptr}});
  EXPECT_EQ(check_tokenizer_runs_model(gpt2_, 151936, config),
            "warning: " + config + ": eos_token_id 151645 names no token of " + encoder() +
                " (50257 ids, 0 to 50256): the tokenizer is probably another model's. Generation "
                "may not stop at the end of a sequence, here or in transformers (a checkpoint "
                "pairs this config.json with this tokenizer). For a new tokenizer on purpose (a "
                "model trained from scratch), set eos_token_id there to the tokenizer's own ids");
}

TEST_F(TokenizerSpecialIds, EosListsAndBosAreCheckedIdById) {
  // Qwen3's base config: both; the list names the ids missing.
  std::string config =
      qwen3_config({{"eos_token_id", {50256, 151645, 151643}}, {"bos_token_id", 151643}});
  EXPECT_EQ(check_tokenizer_runs_model(gpt2_, 151936, config),
            "warning: " + config +
                ": eos_token_id [50256, 151645, 151643] (ids 151645, 151643) and bos_token_id "
                "151643 name no token of " +
                encoder() +
                " (50257 ids, 0 to 50256): the tokenizer is probably another model's. Generation "
                "may not stop at the end of a sequence, here or in transformers (a checkpoint "
                "pairs this config.json with this tokenizer). For a new tokenizer on purpose (a "
                "model trained from scratch), set eos_token_id and bos_token_id there to the "
                "tokenizer's own ids");
  // BOS alone: generation is not at stake.
  config = qwen3_config({{"eos_token_id", 50256}, {"bos_token_id", 50257}});
  EXPECT_EQ(check_tokenizer_runs_model(gpt2_, 151936, config),
            "warning: " + config + ": bos_token_id 50257 names no token of " + encoder() +
                " (50257 ids, 0 to 50256): the tokenizer is probably another model's. For a new "
                "tokenizer on purpose (a model trained from scratch), set bos_token_id there to "
                "the tokenizer's own ids");
}

// Ids that have tokens pass without a word, the tokenizer's EOS or not
// ("Ċ", 198, listed as Llama 3 instruct lists <|eot_id|> beside
// <|end_of_text|>); so do a config without the keys and one that cannot be
// read (the model's own load says what is wrong with it).
TEST_F(TokenizerSpecialIds, IdsThatHaveTokensPass) {
  EXPECT_EQ(check_tokenizer_runs_model(
                gpt2_, 151936, qwen3_config({{"eos_token_id", {50256, 198}}, {"bos_token_id", 0}})),
            "");
  EXPECT_EQ(
      check_tokenizer_runs_model(
          gpt2_, 151936, qwen3_config({{"eos_token_id", nullptr}, {"bos_token_id", nullptr}})),
      "");
  EXPECT_EQ(check_tokenizer_runs_model(gpt2_, 151936, (dir_ / "missing.json").string()), "");
}

// Both warnings, one a line: added tokens past the rows (a <pad> at 97 for
// the llama fixture's 97 rows) and an EOS no token has.
TEST_F(TokenizerSpecialIds, EachWarningIsALine) {
  lt::testing::write_letters_tokenizer(dir_, 27, 97);
  const Tokenizer letters = Tokenizer::load(dir_);
  const std::string config = qwen3_config({{"eos_token_id", 151645}, {"bos_token_id", nullptr}});
  const std::string file = (dir_ / "tokenizer.json").string();
  EXPECT_EQ(check_tokenizer_runs_model(letters, 97, config),
            "warning: " + file + ": the added token <pad> (id 97) has no embedding row: " + config +
                " has vocab_size 97 (ids 0 to 96). The vocabulary fits, so the tokenizer is taken "
                "as the model's; a text holding this token is refused. Using it needs the "
                "embedding resized (transformers: model.resize_token_embeddings)\nwarning: " +
                config + ": eos_token_id 151645 names no token of " + file +
                " (98 ids, 0 to 97): the tokenizer is probably another model's. Generation may "
                "not stop at the end of a sequence, here or in transformers (a checkpoint pairs "
                "this config.json with this tokenizer). For a new tokenizer on purpose (a model "
                "trained from scratch), set eos_token_id there to the tokenizer's own ids");
}

}  // namespace
}  // namespace lt::data
