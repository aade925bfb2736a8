#pragma once
// The rules that go with the embedded demo config (embedded_demo_config,
// config.h) when overrides are laid over it.
#include <string>
#include <string_view>
#include <vector>

#include "train/config.h"

namespace lt::train {

// What the embedded demo config means when overrides point it elsewhere;
// each key named below that the overrides leave unset goes back to its
// default, and the returned lines say which (printed as the run starts):
// - other data (data.path, data.sources or data.format): the demo's
//   held-out problems (data.eval_path, data.eval_task,
//   data.eval_max_new_tokens, train.eval_every) and its data.format belong
//   to its data, so `--set data.path=mine.jsonl` reads the file's own
//   format and evaluates nothing it was not asked to;
// - another model (model.path): the demo's tokenizer, template, lengths,
//   batch, steps, optimizer settings, schedule and out.dir were chosen to
//   train its toy model from scratch (a learning rate of 2e-3 would wreck
//   pretrained weights, seq_len 28 cuts real rows to nothing), so
//   `--set model.path=DIR --set data.path=rows.jsonl` fine-tunes DIR with
//   DIR's tokenizer and chat template and the defaults;
// - either: out.overwrite (the demo starts over in its out.dir because its
//   runs are throwaway; the user's own training must not replace an
//   earlier run's checkpoints).
std::vector<std::string> adapt_demo_to_overrides(TrainConfig& config,
                                                 const std::vector<std::string>& overrides);

// Whether `overrides` (--set's "key=value" items) set `key`.
bool overridden(const std::vector<std::string>& overrides, std::string_view key);

}  // namespace lt::train
