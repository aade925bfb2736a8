#pragma once
// The rule that goes with the embedded demo config (embedded_demo_config,
// config.h) when overrides are laid over it.
#include <string>
#include <vector>

#include "train/config.h"

namespace lt::train {

// The demo's held-out problems (data.eval_path, data.eval_task,
// data.eval_max_new_tokens, train.eval_every) belong to its data: when the
// overrides point the demo at other data (data.path, data.sources or
// data.format), each of those keys that the overrides leave unset goes
// back to its default, so `lazytrain train --set data.path=mine.jsonl`
// evaluates nothing it was not asked to.
void drop_demo_evaluation_for_other_data(TrainConfig& config,
                                         const std::vector<std::string>& overrides);

}  // namespace lt::train
