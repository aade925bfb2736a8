#include "exec/gradient_buckets.h"

#include "core/error.h"

namespace lt::exec {

struct GradientBuckets::State {
  CrossRankSum& ranks;
  std::vector<Tensor> params;                // as given
  std::vector<std::vector<size_t>> buckets;  // in start order
  std::vector<size_t> bucket_of;             // per parameter; npos: not summed
  std::vector<size_t> waiting;               // per bucket: gradients not yet final
  size_t next = 0;                           // the next bucket to start
  size_t started_in_backward = 0;
  bool armed = false;

  explicit State(CrossRankSum& r) : ranks(r) {}

  void start(size_t b) {
    std::vector<Tensor> grads;
    for (size_t i : buckets[b]) {
      const Tensor& p = params[i];
      if (!p.grad().defined()) {
        p.set_grad(Tensor::zeros(p.shape(), p.dtype(), p.device()));
      } else if (!p.grad().is_contiguous()) {
        p.set_grad(p.grad().contiguous());
      }
      grads.push_back(p.grad());
    }
    ranks.start_sum(grads);
  }
  void ready(size_t i) {
    const size_t b = bucket_of[i];
    if (!armed || b == kNone || waiting[b] == 0) return;
    --waiting[b];
    while (next < buckets.size() && waiting[next] == 0) {
      start(next++);
      ++started_in_backward;
    }
  }
  static constexpr size_t kNone = static_cast<size_t>(-1);
};

GradientBuckets::GradientBuckets(const nn::NamedParameters& params, int64_t bucket_bytes,
                                 CrossRankSum& ranks)
    : state_(std::make_shared<State>(ranks)) {
  LT_CHECK(bucket_bytes > 0, "gradient buckets: bucket size must be positive (dist.bucket_mb)");
  State& s = *state_;
  s.bucket_of.assign(params.size(), State::kNone);
  int64_t filled = 0;
  for (const auto& [name, p] : params) s.params.push_back(p);
  for (size_t k = params.size(); k-- > 0;) {
    const Tensor& p = params[k].second;
    if (!p.requires_grad()) continue;
    const int64_t bytes = static_cast<int64_t>(p.nbytes());
    if (s.buckets.empty() || (filled > 0 && filled + bytes > bucket_bytes)) {
      s.buckets.emplace_back();
      filled = 0;
    }
    s.buckets.back().push_back(k);
    s.bucket_of[k] = s.buckets.size() - 1;
    filled += bytes;
  }
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < params.size(); ++i) {
    if (s.bucket_of[i] == State::kNone) continue;
    params[i].second.register_grad_ready_hook([weak, i](const Tensor&) {
      if (const std::shared_ptr<State> state = weak.lock()) state->ready(i);
    });
  }
}

GradientBuckets::~GradientBuckets() {
  state_->armed = false;
}

void GradientBuckets::arm() {
  State& s = *state_;
  s.waiting.clear();
  for (const auto& b : s.buckets) s.waiting.push_back(b.size());
  s.next = 0;
  s.started_in_backward = 0;
  s.armed = true;
}

void GradientBuckets::finish() {
  State& s = *state_;
  if (!s.armed) arm();  // no backward ran on this rank: every bucket starts here
  s.armed = false;
  while (s.next < s.buckets.size()) s.start(s.next++);
  s.ranks.wait_for_sums();
}

const std::vector<std::vector<size_t>>& GradientBuckets::buckets() const {
  return state_->buckets;
}

size_t GradientBuckets::started_in_backward() const {
  return state_->started_in_backward;
}

}  // namespace lt::exec
