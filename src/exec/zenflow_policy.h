#pragma once
// ZenFlow's choices that do not touch tensors (exec/offload.h): its
// options, which columns a weight keeps on the device, when a window of
// accumulated gradients ends, and when the columns are chosen again. Kept
// apart so that each rule is tested against brute force and hand-made
// numbers.
#include <cstdint>
#include <string>
#include <vector>

namespace lt::exec {

enum class SelectStrategy { Auto, Step, Epoch };
const char* select_strategy_name(SelectStrategy s);  // "auto", "step", "epoch"
// Throws lt::Error naming `where` and the names allowed.
SelectStrategy parse_select_strategy(const std::string& name, const std::string& where);

// The keys of exec.zenflow.*, named as in DeepSpeed 0.19.
struct ZenFlowOptions {
  double topk_ratio = 0.1;  // share of each 2-D weight's columns updated on the device
  SelectStrategy select_strategy = SelectStrategy::Auto;
  int64_t select_interval = 0;      // steps (strategy step) or epochs (epoch); 0 = auto
  int64_t update_interval = 0;      // steps per CPU update; 0 = auto (window_should_end)
  bool overlap_step = true;         // the CPU update runs beside the next window
  int64_t full_warm_up_rounds = 0;  // first steps run as the synchronous offload
  // The run's steps per epoch (the trainer's; 0 = unknown), for the epoch
  // strategy.
  int64_t steps_per_epoch = 0;
};

// Throws lt::Error naming the key (exec.zenflow.topk_ratio, ...).
void validate(const ZenFlowOptions& options);

// Columns of a weight with `cols` columns kept on the device: the ceiling
// of topk_ratio * cols, at least 1 and at most cols.
int64_t selected_count(int64_t cols, double topk_ratio);

// The `k` columns with the largest scores, in ascending index order; among
// equal scores the lower index wins (so the choice is deterministic).
std::vector<int32_t> top_columns(const std::vector<float>& scores, int64_t k);

// One 2-D weight's gradient mass (L1) since the window began: in the
// columns the device owns (this step's gradient) and in the others (the
// gradient accumulated for the CPU).
struct ColumnMass {
  double selected = 0;
  double unselected = 0;
};

// update_interval auto: the window ends once the accumulated unselected
// mass exceeds the selected mass for at least 99% of the weights (the
// share is counted over `masses`, the weights the CPU updates). An empty
// list never ends a window (there is nothing for the CPU to update).
bool window_should_end(const std::vector<ColumnMass>& masses);

// Steps between reselections: select_interval steps (strategy step, auto:
// 100), or select_interval epochs of steps_per_epoch steps (strategy
// epoch, auto: 1). Strategy auto is epoch when the epoch length is known,
// else step. Reselection waits for the end of a window, so a reselection
// falls on the first window start at or after its step.
int64_t select_interval_steps(const ZenFlowOptions& options);

}  // namespace lt::exec
