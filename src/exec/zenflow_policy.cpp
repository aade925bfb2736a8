#include "exec/zenflow_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace lt::exec {

namespace {

// The share of weights whose unselected mass must exceed their selected
// mass before the CPU update runs (DeepSpeed's auto rule compares the same
// two masses; the 99% is the issue's).
constexpr double kEndShare = 0.99;
// Steps between reselections for strategy step with select_interval auto.
constexpr int64_t kAutoSelectSteps = 100;

}  // namespace

const char* select_strategy_name(SelectStrategy s) {
  switch (s) {
    case SelectStrategy::Auto:
      return "auto";
    case SelectStrategy::Step:
      return "step";
    case SelectStrategy::Epoch:
      return "epoch";
  }
  return "?";
}

SelectStrategy parse_select_strategy(const std::string& name, const std::string& where) {
  for (SelectStrategy s : {SelectStrategy::Auto, SelectStrategy::Step, SelectStrategy::Epoch})
    if (name == select_strategy_name(s)) return s;
  fail(where, " must be auto, step or epoch, got \"", name, "\"");
}

void validate(const ZenFlowOptions& o) {
  LT_CHECK(std::isfinite(o.topk_ratio) && o.topk_ratio > 0 && o.topk_ratio <= 1,
           "config key 'exec.zenflow.topk_ratio': must be in (0, 1], got ", o.topk_ratio);
  LT_CHECK(o.select_interval >= 0,
           "config key 'exec.zenflow.select_interval': must be auto or >= 1, got ",
           o.select_interval);
  LT_CHECK(o.update_interval >= 0,
           "config key 'exec.zenflow.update_interval': must be auto or >= 1, got ",
           o.update_interval);
  LT_CHECK(o.full_warm_up_rounds >= 0,
           "config key 'exec.zenflow.full_warm_up_rounds': must be >= 0, got ",
           o.full_warm_up_rounds);
  // Columns are chosen again only at a window's start, so a shorter select
  // interval than the window would silently mean the window's length.
  if (o.select_strategy != SelectStrategy::Epoch && o.select_interval > 0 &&
      o.update_interval > 0) {
    LT_CHECK(o.select_interval >= o.update_interval, "config key 'exec.zenflow.select_interval' (",
             o.select_interval, ") must be at least exec.zenflow.update_interval (",
             o.update_interval, ")");
  }
}

int64_t selected_count(int64_t cols, double topk_ratio) {
  const auto k = static_cast<int64_t>(std::ceil(topk_ratio * static_cast<double>(cols) - 1e-9));
  return std::clamp<int64_t>(k, 1, std::max<int64_t>(cols, 1));
}

std::vector<int32_t> top_columns(const std::vector<float>& scores, int64_t k) {
  const auto n = static_cast<int64_t>(scores.size());
  LT_CHECK(k >= 0 && k <= n, "top_columns: k = ", k, " of ", n, " columns");
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // NaN scores rank last, so a weight with a NaN gradient still gets k columns.
  auto better = [&](int32_t a, int32_t b) {
    const float sa = scores[static_cast<size_t>(a)], sb = scores[static_cast<size_t>(b)];
    const bool na = std::isnan(sa), nb = std::isnan(sb);
    if (na != nb) return nb;
    if (!na && sa != sb) return sa > sb;
    return a < b;
  };
  std::nth_element(order.begin(), order.begin() + k, order.end(), better);
  order.resize(static_cast<size_t>(k));
  std::sort(order.begin(), order.end());
  return order;
}

bool window_should_end(const std::vector<ColumnMass>& masses) {
  if (masses.empty()) return false;
  int64_t over = 0;
  for (const ColumnMass& m : masses) over += m.unselected > m.selected ? 1 : 0;
  return static_cast<double>(over) >= kEndShare * static_cast<double>(masses.size());
}

int64_t select_interval_steps(const ZenFlowOptions& o) {
  const bool epoch = o.select_strategy == SelectStrategy::Epoch ||
                     (o.select_strategy == SelectStrategy::Auto && o.steps_per_epoch > 0);
  if (!epoch) return o.select_interval > 0 ? o.select_interval : kAutoSelectSteps;
  LT_CHECK(o.steps_per_epoch > 0,
           "exec.zenflow.select_strategy epoch: the run's epoch length is unknown");
  return (o.select_interval > 0 ? o.select_interval : 1) * o.steps_per_epoch;
}

}  // namespace lt::exec
