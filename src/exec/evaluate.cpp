#include "exec/evaluate.h"

#include <algorithm>
#include <optional>

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
                                             int64_t* split) {
  LT_CHECK(window >= 2, "a window must hold at least 2 tokens, got ", window);
  std::vector<data::Sample> out;
  out.reserve(samples.size());
  int64_t split_count = 0;
  for (data::Sample& s : samples) {
    const int64_t n = static_cast<int64_t>(s.ids.size());
    if (n <= window) {
      out.push_back(std::move(s));
      continue;
    }
    ++split_count;
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
  if (split) *split = split_count;
  return out;
}

namespace {

// One batch of evaluate_samples: rows [begin, end) cut at max_len, padded
// to the longest; `count` targets. None when nothing is predicted.
struct EvalBatch {
  Tensor ids, targets;
  int64_t count = 0;
};

std::optional<EvalBatch> eval_batch(const std::vector<data::Sample>& samples, int64_t begin,
                                    int64_t end, int64_t max_len) {
  int64_t longest = 0;
  for (int64_t r = begin; r < end; ++r) {
    longest = std::max(longest, std::min(max_len, static_cast<int64_t>(samples[r].ids.size())));
  }
  if (longest < 2) return std::nullopt;
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
  if (count == 0) return std::nullopt;
  return EvalBatch{ids, targets, count};
}

}  // namespace

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
    if (const auto batch = eval_batch(samples, begin, end, max_len)) {
      // Denominator 1: the head returns the sum of token losses.
      loss_sum +=
          model.loss(batch->ids.to(model.device()), batch->targets.to(model.device()), 1.0).item();
      tokens += batch->count;
    }
    if (progress) progress(end, n);
  }
  LT_CHECK(tokens > 0, "no sample has a token to predict: nothing to evaluate");
  return {loss_sum / static_cast<double>(tokens), tokens};
}

EvalResult evaluate_samples_by_stage(const models::CausalLM& model,
                                     const std::vector<data::Sample>& samples, int64_t batch_size,
                                     int64_t max_len,
                                     const std::function<std::shared_ptr<void>(size_t)>& bring_in,
                                     int64_t max_activation_bytes) {
  LT_CHECK(batch_size > 0, "batch size must be positive, got ", batch_size);
  NoGradGuard no_grad;
  std::vector<EvalBatch> batches;
  int64_t tokens = 0;
  const int64_t n = static_cast<int64_t>(samples.size());
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    if (auto batch = eval_batch(samples, begin, std::min(n, begin + batch_size), max_len)) {
      tokens += batch->count;
      batches.push_back(std::move(*batch));
    }
  }
  LT_CHECK(tokens > 0, "no sample has a token to predict: nothing to evaluate");
  const int64_t value_bytes =
      model.config().hidden_size *
      static_cast<int64_t>(dtype_size(model.parameters().front().second.dtype()));
  double loss_sum = 0;
  for (size_t first = 0; first < batches.size();) {
    // The group [first, last), and per batch its context and latest output.
    size_t last = first;
    int64_t bytes = 0;
    std::vector<models::StageContext> contexts;
    std::vector<Tensor> x;
    while (last < batches.size()) {
      const int64_t more = batches[last].ids.numel() * value_bytes;
      if (last > first && bytes + more > max_activation_bytes) break;
      bytes += more;
      const EvalBatch& b = batches[last++];
      // As CausalLM::loss, denominator 1: the head returns the sum.
      contexts.push_back(model.context(b.ids.size(1), b.targets.to(model.device()), 1.0));
      x.push_back(b.ids.to(model.device()));
    }
    for (size_t s = 0; s < model.stages().size(); ++s) {
      const std::shared_ptr<void> held = bring_in(s);
      for (size_t b = 0; b < x.size(); ++b)
        x[b] = model.run_stage(*model.stages()[s], x[b], contexts[b]);
    }
    for (const Tensor& loss : x) loss_sum += loss.item();
    first = last;
  }
  return {loss_sum / static_cast<double>(tokens), tokens};
}

}  // namespace lt::exec
