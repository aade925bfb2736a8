#include "train/generation_sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace lt::train {

void check_sampling_options(const SamplingOptions& o) {
  LT_CHECK(std::isfinite(o.temperature) && o.temperature >= 0,
           "--temperature must be 0 (greedy) or positive, got ", o.temperature);
  LT_CHECK(o.top_k >= 0, "--top-k must be 0 (no limit) or positive, got ", o.top_k);
  LT_CHECK(o.top_p > 0 && o.top_p <= 1, "--top-p must be in (0, 1], got ", o.top_p);
}

int32_t argmax_token(std::span<const float> logits) {
  LT_CHECK(!logits.empty(), "argmax over an empty row of logits");
  size_t best = 0;
  for (size_t v = 1; v < logits.size(); ++v) {
    if (logits[v] > logits[best]) best = v;
  }
  return static_cast<int32_t>(best);
}

int32_t sample_token(std::span<const float> logits, const SamplingOptions& o, Generator& gen) {
  if (o.temperature == 0) return argmax_token(logits);
  const auto vocab = static_cast<int64_t>(logits.size());
  LT_CHECK(vocab > 0, "sampling from an empty row of logits");
  // exp((l - max) / T) in double, once per token: every sum below reads these.
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> weight(static_cast<size_t>(vocab));
  for (int64_t v = 0; v < vocab; ++v)
    weight[v] = std::exp((static_cast<double>(logits[v]) - max_logit) / o.temperature);
  if (o.top_k == 0 && o.top_p >= 1) {
    const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
    const double u = gen.uniform() * total;
    double run = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      run += weight[v];
      if (run > u) return static_cast<int32_t>(v);
    }
    return static_cast<int32_t>(vocab - 1);
  }

  // The candidates in order of probability (ties by id). Only as many as
  // the limits can keep are sorted: top_k, or for top_p alone a prefix that
  // grows until it holds the nucleus (a vocabulary of 150k sorted whole
  // per token would cost more than the forward of a small model).
  auto before = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const int64_t k_limit = o.top_k > 0 ? std::min(o.top_k, vocab) : vocab;
  int64_t sorted = o.top_k > 0 ? k_limit : std::min<int64_t>(vocab, 256);
  // The normalizer of the distribution top_p reads: over the top_k when
  // set (Hugging Face filters top_k first), else over the vocabulary.
  double total = 0;
  if (o.top_k == 0) total = std::accumulate(weight.begin(), weight.end(), 0.0);
  std::vector<double> kept;
  while (true) {
    // The `sorted` best in O(V), then only those sorted.
    if (sorted < vocab)
      std::nth_element(order.begin(), order.begin() + sorted, order.end(), before);
    std::sort(order.begin(), order.begin() + sorted, before);
    if (o.top_k > 0) {
      total = 0;
      for (int64_t i = 0; i < sorted; ++i) total += weight[order[i]];
    }
    kept.clear();
    double mass_before = 0;
    bool nucleus_closed = false;
    for (int64_t i = 0; i < sorted; ++i) {
      if (i > 0 && mass_before >= o.top_p) {
        nucleus_closed = true;
        break;
      }
      kept.push_back(weight[order[i]]);
      mass_before += weight[order[i]] / total;
    }
    if (nucleus_closed || sorted == k_limit) break;
    sorted = std::min<int64_t>(k_limit, sorted * 4);
  }
  const double kept_total = std::accumulate(kept.begin(), kept.end(), 0.0);
  const double u = gen.uniform() * kept_total;
  double run = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    run += kept[i];
    if (run > u) return order[i];
  }
  return order[kept.size() - 1];
}

void check_stop_strings(const std::vector<std::string>& stops) {
  for (const std::string& stop : stops)
    LT_CHECK(!stop.empty(), "--stop: an empty stop string would stop every row at once");
}

}  // namespace lt::train
