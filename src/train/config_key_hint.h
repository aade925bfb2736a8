#pragma once

#include <string>
#include <vector>

namespace lt::train {

// What a config key or section that is not known most likely meant, for its
// error: "; 'lr' is a key of optim (optim.lr)" when the name is a known key's
// in another section (train.lr, a top-level steps), else "; did you mean
// 'train.steps'?" for a near spelling (stpes, batchsize) among `known`, else
// "". `unknown` is the full name ("train.lr") or a section's ("steps");
// `known` every full key ("train.steps", "exec.zenflow.topk_ratio").
std::string config_key_hint(const std::string& unknown, const std::vector<std::string>& known);

}  // namespace lt::train
