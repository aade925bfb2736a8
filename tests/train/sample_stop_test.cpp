// Where the end-of-run sample's greedy continuation stops
// (train/report.h sample_stop_token), with Qwen3's tokenizer: its chat
// answers end with <|im_end|>, which config.json's eos (<|endoftext|>) is
// not.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "data/tokenizer.h"
#include "support/fixture_tokenizers.h"
#include "train/report.h"

namespace lt::train {
namespace {

int32_t id_of(const data::Tokenizer& tokenizer, const std::string& content) {
  const auto& added = tokenizer.added_tokens();
  const auto it = std::find_if(added.begin(), added.end(),
                               [&](const data::AddedToken& t) { return t.content == content; });
  EXPECT_NE(it, added.end()) << content;
  return it == added.end() ? -1 : static_cast<int32_t>(it->id);
}

// ids, with the labels trained (= ids) over [from, to) and ignored elsewhere.
data::Sample sample(std::vector<int32_t> ids, size_t from, size_t to) {
  data::Sample s;
  s.labels.assign(ids.size(), data::kIgnoreLabel);
  for (size_t i = from; i < to; ++i) s.labels[i] = ids[i];
  s.ids = std::move(ids);
  return s;
}

TEST(SampleStop, AnAnswerEndingWithASpecialTokenStopsThere) {
  const data::Tokenizer tokenizer =
      data::Tokenizer::load(lt::testing::qwen3_tokenizer_dir() / "tokenizer.json");
  const int32_t im_end = id_of(tokenizer, "<|im_end|>");
  const int32_t endoftext = id_of(tokenizer, "<|endoftext|>");
  ASSERT_EQ(im_end, 151645);  // the tokenizer file's numbering
  ASSERT_EQ(endoftext, 151643);
  const std::vector<int64_t> eos = {endoftext};
  // A chat answer "7<|im_end|>" after a 3-token prompt, and a newline after
  // it that is not trained (Qwen's template writes one).
  EXPECT_EQ(sample_stop_token(eos, tokenizer, sample({10, 11, 12, 22, im_end, 198}, 3, 5), 3),
            im_end);
  // An answer ending with an ordinary token stops at config.json's eos, or
  // nowhere without one.
  EXPECT_EQ(sample_stop_token(eos, tokenizer, sample({10, 11, 12, 22, 23}, 3, 5), 3), endoftext);
  EXPECT_EQ(sample_stop_token({}, tokenizer, sample({10, 11, 12, 22, 23}, 3, 5), 3), -1);
  // With no eos, the special token still stops it.
  EXPECT_EQ(sample_stop_token({}, tokenizer, sample({10, 11, im_end}, 2, 3), 2), im_end);
  // A sample with nothing trained after the prompt: the eos.
  EXPECT_EQ(sample_stop_token(eos, tokenizer, sample({10, 11, im_end}, 3, 3), 3), endoftext);
}

}  // namespace
}  // namespace lt::train
