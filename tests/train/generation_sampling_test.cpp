// Token sampling against the distribution it should draw from, worked out
// here by brute force in double (softmax of logits / temperature, the
// top_k largest, then the nucleus as Hugging Face's TopPLogitsWarper
// keeps it): the frequencies of many seeded draws pass a chi-square test,
// and tokens outside the kept set never come up.
#include "train/generation_sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace lt::train {
namespace {

std::vector<double> expected_distribution(const std::vector<float>& logits,
                                          const SamplingOptions& o) {
  const size_t n = logits.size();
  std::vector<double> p(n);
  double max = *std::max_element(logits.begin(), logits.end());
  for (size_t i = 0; i < n; ++i) p[i] = std::exp((logits[i] - max) / o.temperature);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  const size_t k = o.top_k > 0 ? std::min<size_t>(o.top_k, n) : n;
  for (size_t i = k; i < n; ++i) p[order[i]] = 0;
  double total = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& v : p) v /= total;
  // The nucleus: in order of probability, a token stays while the mass of
  // those before it is below top_p.
  double before = 0;
  for (size_t i = 0; i < n; ++i) {
    const double pi = p[order[i]];
    if (i > 0 && before >= o.top_p) p[order[i]] = 0;
    before += pi;
  }
  total = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& v : p) v /= total;
  return p;
}

// Chi-square statistic of `draws` seeded draws against `want`; a draw of a
// token with probability 0 fails the test at once.
double chi_square(const std::vector<float>& logits, const SamplingOptions& o, int draws,
                  uint64_t seed, int* categories) {
  const std::vector<double> want = expected_distribution(logits, o);
  std::vector<int> counts(logits.size(), 0);
  Generator gen(seed);
  for (int i = 0; i < draws; ++i) ++counts[sample_token(logits, o, gen)];
  double chi2 = 0;
  *categories = 0;
  for (size_t v = 0; v < logits.size(); ++v) {
    if (want[v] == 0) {
      EXPECT_EQ(counts[v], 0) << "token " << v << " lies outside the kept set";
      continue;
    }
    ++*categories;
    const double e = draws * want[v];
    chi2 += (counts[v] - e) * (counts[v] - e) / e;
  }
  return chi2;
}

const std::vector<float> kLogits = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 3.0f};

TEST(Sampling, FrequenciesMatchTheDistribution) {
  struct Case {
    double temperature;
    int64_t top_k;
    double top_p;
  };
  // 40.5 is the chi-square quantile 1 - 1e-6 for 7 degrees of freedom (the
  // most here); fewer degrees have smaller quantiles, so the bound is loose
  // but still fails any wrong distribution at 40,000 draws.
  for (const Case c : {Case{1.0, 0, 1.0}, Case{0.5, 0, 1.0}, Case{1.0, 3, 1.0}, Case{1.0, 0, 0.7},
                       Case{2.0, 5, 0.9}, Case{0.7, 1, 1.0}}) {
    SamplingOptions o{c.temperature, c.top_k, c.top_p};
    int categories = 0;
    const double chi2 = chi_square(kLogits, o, 40000, 11, &categories);
    EXPECT_LT(chi2, 40.5) << "T " << c.temperature << " top_k " << c.top_k << " top_p " << c.top_p
                          << " over " << categories << " tokens";
  }
}

TEST(Sampling, NucleusOfALargeVocabulary) {
  // 600 logits: the nucleus (some 500 tokens) is larger than the first
  // prefix sorted (256), so the sampler has to widen it. 20,000 draws keep
  // every kept token's expected count above 5, where the chi-square
  // approximation holds.
  Generator init(3);
  std::vector<float> logits(600);
  for (float& l : logits) l = static_cast<float>(init.normal() * 0.5);
  SamplingOptions o{1.0, 0, 0.9};
  int categories = 0;
  const double chi2 = chi_square(logits, o, 20000, 5, &categories);
  ASSERT_GT(categories, 300);
  // Normal approximation of the chi-square quantile: df + 5 sqrt(2 df).
  const double df = categories - 1;
  EXPECT_LT(chi2, df + 5 * std::sqrt(2 * df)) << categories << " tokens";
}

TEST(Sampling, SeededDrawsRepeat) {
  SamplingOptions o{0.9, 0, 0.95};
  Generator a(7), b(7);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(sample_token(kLogits, o, a), sample_token(kLogits, o, b));
}

TEST(Sampling, GreedyTakesTheLargestAndTheLowestIdOnATie) {
  Generator gen(0);
  EXPECT_EQ(sample_token(kLogits, {}, gen), 7);
  const std::vector<float> tie = {0.0f, 2.0f, 1.0f, 2.0f};
  EXPECT_EQ(sample_token(tie, {}, gen), 1);
}

TEST(Sampling, BadOptionsAreRefusedByName) {
  EXPECT_THROW(check_sampling_options({-1.0, 0, 1.0}), Error);
  EXPECT_THROW(check_sampling_options({1.0, -2, 1.0}), Error);
  EXPECT_THROW(check_sampling_options({1.0, 0, 0.0}), Error);
  EXPECT_THROW(check_sampling_options({1.0, 0, 1.5}), Error);
  try {
    check_sampling_options({1.0, 0, 1.5});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--top-p"), std::string::npos);
  }
}

}  // namespace
}  // namespace lt::train
