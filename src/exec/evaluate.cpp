#include "exec/evaluate.h"

#include <algorithm>

#include "autograd/grad_mode.h"

namespace lt::exec {

EvalResult evaluate_loss(const models::CausalLM& model, const std::vector<data::TokenRow>& rows,
                         int64_t batch_size,
                         const std::function<void(int64_t, int64_t)>& progress) {
  std::vector<data::Sample> samples;
  samples.reserve(rows.size());
  for (const auto& r : rows) samples.push_back({r, r, 0});
  return evaluate_samples(model, samples, batch_size, INT64_MAX, progress);
}

std::vector<data::Sample> split_into_windows(std::vector<data::Sample> samples, int64_t window,
                                             int64_t* cut) {
  LT_CHECK(window >= 2, "a window must hold at least 2 tokens, got ", window);
  std::vector<data::Sample> out;
  out.reserve(samples.size());
  int64_t cut_count = 0;
  for (data::Sample& s : samples) {
    const int64_t n = static_cast<int64_t>(s.ids.size());
    if (n <= window) {
      out.push_back(std::move(s));
      continue;
    }
    ++cut_count;
    // Window k covers [k (window - 1), k (window - 1) + window): its first
    // token was the last of window k - 1, whose prediction that was.
    for (int64_t start = 0; start + 1 < n; start += window - 1) {
      const int64_t end = std::min(n, start + window);
      out.push_back({std::vector<int32_t>(s.ids.begin() + start, s.ids.begin() + end),
                     std::vector<int32_t>(s.labels.begin() + start, s.labels.begin() + end),
                     s.line});
    }
    // Free the long row now rather than when `samples` goes.
    std::vector<int32_t>().swap(s.ids);
    std::vector<int32_t>().swap(s.labels);
  }
  if (cut) *cut = cut_count;
  return out;
}

EvalResult evaluate_samples(const models::CausalLM& model, const std::vector<data::Sample>& samples,
                            int64_t batch_size, int64_t max_len,
                            const std::function<void(int64_t, int64_t)>& progress) {
  LT_CHECK(batch_size > 0, "batch size must be positive, got ", batch_size);
  NoGradGuard no_grad;
  double loss_sum = 0;
  int64_t tokens = 0;
  const int64_t n = static_cast<int64_t>(samples.size());
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    const int64_t end = std::min(n, begin + batch_size);
    int64_t longest = 0;
    for (int64_t r = begin; r < end; ++r) {
      longest = std::max(longest, std::min(max_len, static_cast<int64_t>(samples[r].ids.size())));
    }
    if (longest < 2) {  // nothing to predict in this batch
      if (progress) progress(end, n);
      continue;
    }
    const int64_t b = end - begin, t = longest;
    Tensor ids = Tensor::zeros({b, t}, DType::I64);
    Tensor targets = Tensor::full({b, t}, -100, DType::I64);
    int64_t* pi = ids.data<int64_t>();
    int64_t* pt = targets.data<int64_t>();
    for (int64_t r = 0; r < b; ++r) {
      const auto& s = samples[begin + r];
      const int64_t len = std::min(t, static_cast<int64_t>(s.ids.size()));
      for (int64_t j = 0; j < len; ++j) pi[r * t + j] = s.ids[j];
      for (int64_t j = 0; j + 1 < len; ++j) pt[r * t + j] = s.labels[j + 1];
    }
    const int64_t count = models::count_targets(targets);
    if (count > 0) {
      // Denominator 1: the head returns the sum of token losses.
      loss_sum += model.loss(ids.to(model.device()), targets.to(model.device()), 1.0).item();
      tokens += count;
    }
    if (progress) progress(end, n);
  }
  LT_CHECK(tokens > 0, "no sample has a token to predict: nothing to evaluate");
  return {loss_sum / static_cast<double>(tokens), tokens};
}

}  // namespace lt::exec
