#pragma once
// optim.no_decay as the optimizer applies it. The optimizer matches
// substrings of lazytrain's own parameter names (block.0.input_norm.weight);
// a user reads the checkpoint's, Hugging Face's (transformer.h.0.ln_1.weight),
// and writes patterns from those. A pattern matches either: each parameter
// whose Hugging Face name holds one is added by its full internal name
// (no internal name holds another whole, so it matches that parameter
// alone). The default [bias, norm] keeps its meaning, which rests on the
// internal names for GPT-2 (its ln_1 is an input_norm).
#include <string>
#include <vector>

#include "models/config.h"

namespace lt::train {

struct NoDecay {
  std::vector<std::string> substrings;  // for the optimizer: the patterns, then names added
  std::vector<std::string> unmatched;   // patterns neither naming holds anywhere
};

NoDecay resolve_no_decay(const models::ModelConfig& model,
                         const std::vector<std::string>& patterns);

}  // namespace lt::train
