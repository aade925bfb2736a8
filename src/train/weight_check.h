#pragma once
// Whether a run's weights hold NaN or inf, where they are: in host memory,
// on the device, or in the state files of stages on disk (read back one
// stage at a time), for Note [No save on a non-finite streak].
#include <string>
#include <vector>

#include "exec/staged_states.h"
#include "models/causal_lm.h"

namespace lt::train {

// The parameters holding NaN or inf, as "name (N values)". `staged`: the
// executor's stages on disk (null: every master is in memory).
std::vector<std::string> non_finite_parameters(const models::CausalLM& model,
                                               exec::StagedStates* staged);

}  // namespace lt::train
