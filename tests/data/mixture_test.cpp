// Mixing datasets by weight and holding rows out for evaluation
// (data/mixture.h), against outside references: the binomial distribution
// of the counts a weighted draw must give (a 5-sigma bound and Pearson's
// chi-square at its 0.999 quantile), the epoch rule checked by brute-force
// counting, and bitwise replay after a restore.
#include "data/mixture.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/error.h"
#include "core/random.h"
#include "data/batching.h"

namespace lt::data {
namespace {

// Sample i of source s: ids {1000 * (s + 1) + i, ...} of `length` tokens, so
// a batch row says where it came from.
WeightedSamples source_of(size_t s, size_t count, double weight, size_t length = 3) {
  WeightedSamples source;
  source.weight = weight;
  source.name = "source" + std::to_string(s) + ".jsonl";
  for (size_t i = 0; i < count; ++i) {
    Sample sample;
    for (size_t t = 0; t < length; ++t) {
      sample.ids.push_back(static_cast<int32_t>(1000 * (s + 1) + i));
      sample.labels.push_back(sample.ids.back());
    }
    sample.line = static_cast<int64_t>(i + 1);
    source.samples.push_back(sample);
  }
  return source;
}

// |count - n p| within 5 standard deviations of Binomial(n, p), and the
// counts' chi-square under the 0.999 quantile of its degrees of freedom.
void expect_binomial_counts(const std::vector<int64_t>& counts,
                            const std::vector<double>& weights) {
  double total_weight = 0;
  int64_t n = 0;
  for (double w : weights) total_weight += w;
  for (int64_t c : counts) n += c;
  double chi2 = 0;
  for (size_t s = 0; s < weights.size(); ++s) {
    const double p = weights[s] / total_weight;
    const double expected = static_cast<double>(n) * p;
    const double sd = std::sqrt(expected * (1 - p));
    EXPECT_LE(std::abs(static_cast<double>(counts[s]) - expected), 5 * sd)
        << "source " << s << ": " << counts[s] << " draws, expected " << expected;
    chi2 += (counts[s] - expected) * (counts[s] - expected) / expected;
  }
  // chi-square 0.999 quantiles for 1..4 degrees of freedom (scipy.stats.chi2.ppf).
  const double quantile[] = {10.828, 13.816, 16.266, 18.467};
  ASSERT_LE(weights.size(), 5u);
  EXPECT_LT(chi2, quantile[weights.size() - 2]) << "chi-square over " << n << " draws";
}

TEST(Mixture, SourceDrawsFollowTheWeights) {
  for (const std::vector<double>& weights :
       {std::vector<double>{1, 1}, {1, 2, 5}, {0.1, 0.3, 0.6}, {3, 0.05, 1, 1}}) {
    for (uint64_t seed : {0ull, 7ull}) {
      std::vector<int64_t> counts(weights.size(), 0);
      for (uint64_t k = 0; k < 200000; ++k) ++counts[mixture_source(seed, k, weights)];
      expect_binomial_counts(counts, weights);
    }
  }
}

TEST(Mixture, OneSourceAlwaysDrawsIt) {
  for (uint64_t k = 0; k < 100; ++k) EXPECT_EQ(mixture_source(3, k, {2.5}), 0u);
}

TEST(Mixture, TheSequenceIsAFunctionOfTheSeed) {
  const std::vector<double> weights = {1, 1, 1};
  int differ = 0;
  for (uint64_t k = 0; k < 1000; ++k) {
    EXPECT_EQ(mixture_source(5, k, weights), mixture_source(5, k, weights));
    differ += mixture_source(5, k, weights) != mixture_source(6, k, weights);
  }
  // Independent seeds agree on a draw with probability 1/3.
  EXPECT_GT(differ, 600);
}

// The source of a padded row of one sample, from its ids.
size_t row_source(const Batch& batch, int64_t row) {
  return static_cast<size_t>(batch.ids.data<int64_t>()[row * batch.ids.shape()[1]] / 1000 - 1);
}
size_t row_index(const Batch& batch, int64_t row) {
  return static_cast<size_t>(batch.ids.data<int64_t>()[row * batch.ids.shape()[1]] % 1000);
}

TEST(Mixture, BatcherRowsFollowTheWeightsAndEachSourceCyclesWhole) {
  const std::vector<double> weights = {1, 3, 0.5};
  const std::vector<size_t> sizes = {7, 50, 3};
  std::vector<WeightedSamples> sources;
  for (size_t s = 0; s < 3; ++s) sources.push_back(source_of(s, sizes[s], weights[s]));
  BatchOptions options;
  options.batch_size = 8;
  options.seq_len = 16;
  options.seed = 11;
  Batcher batcher(sources, options);
  std::vector<int64_t> counts(3, 0);
  std::vector<std::vector<size_t>> order(3);
  for (int step = 0; step < 5000; ++step) {
    const Batch batch = batcher.next();
    for (int64_t r = 0; r < options.batch_size; ++r) {
      const size_t s = row_source(batch, r);
      ++counts[s];
      order[s].push_back(row_index(batch, r));
    }
  }
  expect_binomial_counts(counts, weights);
  // Each source's draws, cut into runs of its size, are permutations of
  // its samples: nothing repeats before all were seen.
  for (size_t s = 0; s < 3; ++s) {
    for (size_t from = 0; from + sizes[s] <= order[s].size(); from += sizes[s]) {
      std::vector<size_t> run(order[s].begin() + from, order[s].begin() + from + sizes[s]);
      std::sort(run.begin(), run.end());
      for (size_t i = 0; i < sizes[s]; ++i) ASSERT_EQ(run[i], i) << "source " << s;
    }
  }
}

TEST(Mixture, OneWeightedSourceIsTheSingleDatasetStream) {
  BatchOptions options;
  options.batch_size = 3;
  options.seq_len = 5;
  options.pack = true;
  options.seed = 4;
  Batcher single(source_of(0, 9, 1.0, 4).samples, options);
  Batcher mixed(std::vector<WeightedSamples>{source_of(0, 9, 2.0, 4)}, options);
  for (int i = 0; i < 20; ++i) {
    const Batch a = single.next(), b = mixed.next();
    ASSERT_TRUE(std::equal(a.ids.data<int64_t>(), a.ids.data<int64_t>() + a.ids.numel(),
                           b.ids.data<int64_t>()));
  }
  EXPECT_EQ(single.state(), mixed.state());
  EXPECT_EQ(mixed.state().draws, 0u);
}

bool same_batch(const Batch& a, const Batch& b) {
  return a.ids.numel() == b.ids.numel() && a.tokens == b.tokens &&
         a.target_count == b.target_count &&
         std::equal(a.ids.data<int64_t>(), a.ids.data<int64_t>() + a.ids.numel(),
                    b.ids.data<int64_t>()) &&
         std::equal(a.targets.data<int64_t>(), a.targets.data<int64_t>() + a.targets.numel(),
                    b.targets.data<int64_t>());
}

TEST(Mixture, RestoreContinuesTheMixedStreamExactly) {
  for (bool pack : {false, true}) {
    std::vector<WeightedSamples> sources = {source_of(0, 5, 1, 7), source_of(1, 11, 2, 3),
                                            source_of(2, 2, 0.7, 9)};
    BatchOptions options;
    options.batch_size = 3;
    options.seq_len = 8;
    options.pack = pack;
    options.seed = 21;
    Batcher a(sources, options);
    // Stop where a packed sample is split across batches.
    int taken = 0;
    do {
      a.next();
      ++taken;
    } while ((pack && a.state().offset == 0) || taken < 7);
    const SamplerState saved = a.state();
    EXPECT_GT(saved.draws, 0u);
    EXPECT_EQ(saved.epoch, 0u);
    Batcher b(sources, options);
    b.restore(saved);
    EXPECT_EQ(b.state(), saved);
    for (int i = 0; i < 40; ++i) ASSERT_TRUE(same_batch(a.next(), b.next())) << "batch " << i;
  }
}

TEST(Mixture, BadSourcesAndStatesAreClearErrors) {
  BatchOptions options;
  auto message = [&](std::vector<WeightedSamples> sources) {
    try {
      Batcher b(std::move(sources), options);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({source_of(0, 2, 1), source_of(1, 2, 0)}).find("source1.jsonl: the weight"),
            std::string::npos);
  EXPECT_NE(message({source_of(0, 2, -1)}).find("must be a positive number, got -1"),
            std::string::npos);
  EXPECT_NE(message({source_of(0, 2, 1), source_of(1, 0, 1)})
                .find("source1.jsonl: has no usable samples"),
            std::string::npos);

  Batcher mixed(std::vector<WeightedSamples>{source_of(0, 2, 1), source_of(1, 2, 1)}, options);
  EXPECT_THROW(mixed.restore(SamplerState{1, 0, 0, 0}), Error);  // a one-dataset state
  Batcher single(source_of(0, 2, 1).samples, options);
  EXPECT_THROW(single.restore(SamplerState{0, 0, 0, 5}), Error);  // a mixture's state
}

// 20,000 distinct random samples of 1..40 tokens.
std::vector<Sample> random_samples(size_t count, uint64_t seed) {
  Generator gen(seed);
  std::vector<Sample> samples(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t length = 1 + gen.below(40);
    for (size_t t = 0; t < length; ++t) {
      samples[i].ids.push_back(static_cast<int32_t>(gen.below(150000)));
      samples[i].labels.push_back(samples[i].ids.back());
    }
    samples[i].line = static_cast<int64_t>(i + 1);
  }
  return samples;
}

std::set<int64_t> lines_of(const std::vector<Sample>& samples) {
  std::set<int64_t> lines;
  for (const Sample& s : samples) lines.insert(s.line);
  return lines;
}

TEST(EvalSplit, HoldsOutTheFractionDisjointAndDeterministically) {
  const size_t n = 20000;
  for (double fraction : {0.02, 0.1, 0.5}) {
    std::vector<Sample> train = random_samples(n, 1), eval;
    split_off_held_out(train, eval, fraction, 0);
    // Binomial(n, fraction) within 5 sigma.
    const double expected = static_cast<double>(n) * fraction;
    EXPECT_LE(std::abs(static_cast<double>(eval.size()) - expected),
              5 * std::sqrt(expected * (1 - fraction)))
        << eval.size() << " held out of " << n << " at " << fraction;
    // Disjoint, and together every row once; the order of each kept.
    const std::set<int64_t> a = lines_of(train), b = lines_of(eval);
    EXPECT_EQ(a.size() + b.size(), n);
    for (int64_t line : b) EXPECT_EQ(a.count(line), 0u);
    EXPECT_TRUE(std::is_sorted(train.begin(), train.end(),
                               [](const Sample& x, const Sample& y) { return x.line < y.line; }));
    // Deterministic: the same rows again.
    std::vector<Sample> again = random_samples(n, 1), eval_again;
    split_off_held_out(again, eval_again, fraction, 0);
    EXPECT_EQ(lines_of(eval_again), b);
  }
}

TEST(EvalSplit, DependsOnContentNotOrderAndKeepsDuplicatesTogether) {
  std::vector<Sample> rows = random_samples(3000, 2);
  std::vector<Sample> shuffled = rows;
  Generator gen(9);
  for (size_t i = shuffled.size(); i > 1; --i) std::swap(shuffled[i - 1], shuffled[gen.below(i)]);
  // Duplicates of the first 100 rows, under other line numbers.
  for (size_t i = 0; i < 100; ++i) {
    shuffled.push_back(rows[i]);
    shuffled.back().line += 100000;
  }
  std::vector<Sample> eval_a, eval_b;
  split_off_held_out(rows, eval_a, 0.2, 3);
  split_off_held_out(shuffled, eval_b, 0.2, 3);
  std::set<int64_t> expected = lines_of(eval_a);
  for (int64_t line : lines_of(eval_a))
    if (line <= 100) expected.insert(line + 100000);
  EXPECT_EQ(lines_of(eval_b), expected);
  // Another seed holds out other rows.
  std::vector<Sample> rows_c = random_samples(3000, 2), eval_c;
  split_off_held_out(rows_c, eval_c, 0.2, 4);
  EXPECT_NE(lines_of(eval_c), lines_of(eval_a));
}

TEST(EvalSplit, ZeroHoldsOutNothing) {
  std::vector<Sample> rows = random_samples(500, 3), eval;
  split_off_held_out(rows, eval, 0.0, 0);
  EXPECT_EQ(rows.size(), 500u);
  EXPECT_TRUE(eval.empty());
}

}  // namespace
}  // namespace lt::data
