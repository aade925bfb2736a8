#pragma once
// Which optimizer state tensors belong to which parameter, by name: the
// executors that move a stage's states (to disk, to the device) move each
// parameter's with it.
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace lt::exec {

// Per parameter of `names` (the optimizer's order), its tensors of
// `optimizer_state`: each "<param>.<field...>" goes with the longest
// parameter name it starts with; the per-parameter step counts
// ("<param>.step") are scalars the optimizer rebuilds for state(), not
// memory of its own, and are left out, as is anything that names no
// parameter (the global "step").
std::vector<optim::NamedTensors> states_by_parameter(const std::vector<std::string>& names,
                                                     const optim::NamedTensors& optimizer_state);

}  // namespace lt::exec
