// The KV-cache path against recomputing the whole sequence without a cache
// (CausalLM::logits, itself checked against transformers in tests/io), on
// every fixture family: the prompt step bit for bit, decoding steps to f32
// rounding, greedy tokens equal; padded batches equal to single rows; the
// context limit; seeded sampling reproducible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "io/hf_model.h"
#include "models/decode.h"
#include "train/generate.h"
#include "train/generation.h"

namespace lt::models {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& family) {
  return fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families" / family;
}

std::vector<int64_t> some_tokens(int64_t n, int64_t vocab, int64_t salt) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((i * 31 + salt * 17 + 3) % vocab);
  return ids;
}

// The last position's logits of `ids` recomputed from scratch.
std::vector<double> recomputed(const CausalLM& model, const std::vector<int64_t>& ids) {
  const auto t = static_cast<int64_t>(ids.size());
  return model.logits(Tensor::from_vector(ids, {1, t})).select(0, 0).select(0, t - 1).to_doubles();
}

class KvCacheFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(KvCacheFamily, PromptStepIsTheNoCacheForwardBitForBit) {
  const CausalLM model = io::load_hf_model(fixture(GetParam()), DType::F32);
  NoGradGuard no_grad;
  const std::vector<int64_t> ids = some_tokens(9, model.config().vocab_size, 1);
  KvCache cache(model, 1, 16);
  const std::vector<int64_t> starts{0}, last{8};
  const std::vector<double> got =
      forward_cached(model, Tensor::from_vector(ids, {1, 9}), starts, last, cache).to_doubles();
  EXPECT_EQ(got, recomputed(model, ids));
}

TEST_P(KvCacheFamily, DecodingStepsEqualRecomputing) {
  const CausalLM model = io::load_hf_model(fixture(GetParam()), DType::F32);
  NoGradGuard no_grad;
  const int64_t vocab = model.config().vocab_size;
  std::vector<int64_t> ids = some_tokens(5, vocab, 2);
  const std::vector<int64_t> more = some_tokens(30, vocab, 3);
  KvCache cache(model, 1, 40);
  std::vector<int64_t> starts{0}, last{4};
  forward_cached(model, Tensor::from_vector(ids, {1, 5}), starts, last, cache);
  last = {0};
  for (int64_t token : more) {
    starts = {static_cast<int64_t>(ids.size())};
    ids.push_back(token);
    const std::vector<double> got =
        forward_cached(model, Tensor::from_vector(std::vector<int64_t>{token}, {1, 1}), starts,
                       last, cache)
            .to_doubles();
    const std::vector<double> want = recomputed(model, ids);
    double worst = 0, scale = 0;
    for (size_t v = 0; v < got.size(); ++v) {
      worst = std::max(worst, std::abs(got[v] - want[v]));
      scale = std::max(scale, std::abs(want[v]));
    }
    // f32 sums in another order: a few ulps of the logits' size.
    EXPECT_LT(worst, 1e-5 * std::max(1.0, scale)) << "at position " << starts[0];
  }
}

TEST_P(KvCacheFamily, GreedyTokensEqualTheNoCacheDecoder) {
  const CausalLM model = io::load_hf_model(fixture(GetParam()), DType::F32);
  const int64_t vocab = model.config().vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t salt : {4, 5, 6}) {
    const auto ids = some_tokens(3 + 4 * salt % 11, vocab, salt);
    prompts.emplace_back(ids.begin(), ids.end());
  }
  train::GenerationOptions options;
  options.max_new_tokens = 40;
  options.batch_size = 3;  // rows of 3, 9 and 8 tokens: two of them padded
  const auto out = train::generate(model, prompts, options);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(out[i].tokens, train::greedy_generate(model, prompts[i], 40))
        << GetParam() << " prompt " << i;
  }
}

TEST_P(KvCacheFamily, PaddedBatchRowsEqualSingleRows) {
  const CausalLM model = io::load_hf_model(fixture(GetParam()), DType::F32);
  NoGradGuard no_grad;
  const int64_t vocab = model.config().vocab_size;
  const std::vector<int64_t> a = some_tokens(4, vocab, 7), b = some_tokens(11, vocab, 8);
  std::vector<int64_t> padded(22, 0);
  std::copy(a.begin(), a.end(), padded.begin());
  std::copy(b.begin(), b.end(), padded.begin() + 11);
  KvCache cache(model, 2, 20);
  const std::vector<int64_t> starts{0, 0}, last{3, 10};
  const std::vector<double> both =
      forward_cached(model, Tensor::from_vector(padded, {2, 11}), starts, last, cache).to_doubles();
  const std::vector<double> ra = recomputed(model, a), rb = recomputed(model, b);
  for (size_t v = 0; v < ra.size(); ++v) {
    EXPECT_NEAR(both[v], ra[v], 1e-5);
    EXPECT_NEAR(both[ra.size() + v], rb[v], 1e-5);
  }
  // One decoding step at different positions per row (4 and 11).
  const std::vector<int64_t> next{5, 6}, starts2{4, 11}, last2{0, 0};
  const std::vector<double> step =
      forward_cached(model, Tensor::from_vector(next, {2, 1}), starts2, last2, cache).to_doubles();
  std::vector<int64_t> a2 = a, b2 = b;
  a2.push_back(5);
  b2.push_back(6);
  const std::vector<double> ra2 = recomputed(model, a2), rb2 = recomputed(model, b2);
  for (size_t v = 0; v < ra2.size(); ++v) {
    EXPECT_NEAR(step[v], ra2[v], 1e-5);
    EXPECT_NEAR(step[ra2.size() + v], rb2[v], 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, KvCacheFamily,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gpt2"));

// A prompt of the whole context makes one token from its last position's
// logits, as transformers does (that token needs no position): the
// uncached forward's argmax there, by brute force. One token more is
// refused.
TEST(Generation, APromptFillingTheContextMakesOneTokenAndALongerOneIsRefused) {
  const CausalLM model = io::load_hf_model(fixture("gpt2"), DType::F32);
  const int64_t context = model.config().max_position_embeddings;  // 64
  const auto ids = some_tokens(context, model.config().vocab_size, 9);
  train::GenerationOptions options;
  options.max_new_tokens = 5;
  const auto out = train::generate(model, {std::vector<int32_t>(ids.begin(), ids.end())}, options);
  NoGradGuard no_grad;
  const std::vector<double> logits = recomputed(model, ids);
  const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
  ASSERT_EQ(out[0].tokens.size(), 1u);
  EXPECT_EQ(out[0].tokens[0], best);
  EXPECT_EQ(out[0].finish, train::FinishReason::kContext);
  auto longer = ids;
  longer.push_back(1);
  try {
    train::generate(model, {std::vector<int32_t>(longer.begin(), longer.end())}, {});
    FAIL() << "a prompt past the context was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("65 tokens, more than the model's context of 64 "
                                         "(max_position_embeddings)"),
              std::string::npos)
        << e.what();
  }
}

// A batch whose long row reaches the context while a short one goes on:
// the long row's last token, which no position holds, was fed back and the
// next step refused ("row 0 would hold 65 positions"). Each row is what it
// makes alone (a batch of one, checked against transformers by the
// generation goldens).
TEST(Generation, ARowEndedByTheContextLeavesTheOthersGoing) {
  const CausalLM model = io::load_hf_model(fixture("llama"), DType::F32);
  const int64_t context = model.config().max_position_embeddings;  // 64
  const int64_t vocab = model.config().vocab_size;
  const auto long_ids = some_tokens(context - 34, vocab, 11),
             short_ids = some_tokens(10, vocab, 12);
  const std::vector<std::vector<int32_t>> prompts = {{long_ids.begin(), long_ids.end()},
                                                     {short_ids.begin(), short_ids.end()}};
  train::GenerationOptions options;
  options.max_new_tokens = 40;
  options.batch_size = 2;
  const auto batched = train::generate(model, prompts, options);
  options.batch_size = 1;
  const auto alone = train::generate(model, prompts, options);
  EXPECT_EQ(batched[0].finish, train::FinishReason::kContext);
  EXPECT_EQ(batched[0].tokens.size(), 35u);
  EXPECT_EQ(batched[1].finish, train::FinishReason::kLength);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(batched[i].tokens, alone[i].tokens) << i;
}

// A prompt of context - 4 tokens: positions context - 4 .. context - 1 take
// the new tokens 1..4 as they are read, and the logits at context - 1 make
// a fifth, which no position has to hold (transformers makes it too).
TEST(Generation, StopsAtTheContext) {
  const CausalLM model = io::load_hf_model(fixture("llama"), DType::F32);
  const int64_t context = model.config().max_position_embeddings;
  const auto ids = some_tokens(context - 4, model.config().vocab_size, 10);
  train::GenerationOptions options;
  options.max_new_tokens = 10;
  const auto out = train::generate(model, {std::vector<int32_t>(ids.begin(), ids.end())}, options);
  EXPECT_EQ(out[0].tokens.size(), 5u);
  EXPECT_EQ(out[0].finish, train::FinishReason::kContext);
}

TEST(Generation, SeededSamplingIsReproducibleAndIndependentOfTheBatch) {
  const CausalLM model = io::load_hf_model(fixture("qwen3"), DType::F32);
  const int64_t vocab = model.config().vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t salt = 0; salt < 4; ++salt) {
    const auto ids = some_tokens(4 + salt, vocab, salt);
    prompts.emplace_back(ids.begin(), ids.end());
  }
  train::GenerationOptions options;
  options.max_new_tokens = 20;
  options.sampling.temperature = 1.3;
  options.sampling.top_p = 0.95;
  options.seed = 42;
  options.batch_size = 4;
  const auto first = train::generate(model, prompts, options);
  const auto again = train::generate(model, prompts, options);
  options.batch_size = 1;
  const auto single = train::generate(model, prompts, options);
  options.seed = 43;
  const auto other = train::generate(model, prompts, options);
  int differing = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(first[i].tokens, again[i].tokens);
    EXPECT_EQ(first[i].tokens, single[i].tokens);
    differing += first[i].tokens != other[i].tokens;
  }
  EXPECT_GT(differing, 0) << "another seed drew the same tokens for every row";
}

}  // namespace
}  // namespace lt::models
