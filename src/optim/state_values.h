#pragma once
// A checkpoint's optimizer states are read back as they were written; a
// NaN or inf in a moment (a damaged file, or one edited by hand) would pass
// into the first update and from there into every weight, and a run could
// end with exit 0 having saved them. load_state() refuses such states.
#include <string>

#include "core/tensor.h"

namespace lt::optim {

// Refuses (lt::Error naming `name` and the first bad element) an f32 state
// `t` holding NaN or inf, or, when `non_negative`, a value below 0 (a
// second moment, or its square root, is never negative).
void check_state_values(const Tensor& t, const std::string& name, bool non_negative);

}  // namespace lt::optim
