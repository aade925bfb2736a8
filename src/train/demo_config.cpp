#include "train/demo_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <functional>
#include <string_view>

namespace lt::train {

// The demo: a tiny Llama-shaped model (assets/demo/addition/model, 128
// hidden, 2 layers), trained from scratch to add two-digit numbers written
// as word problems (scripts/make_demo_data.py), and scored by exact match
// on 200 problems whose number pairs it never saw, before its first step
// and every 100 steps. Its tokenizer makes each word one token and each
// digit one token, so every question is 22 tokens and its answer ("#### 57")
// 4 or 5 plus the end of text: seq_len 28 holds a whole row, unpacked, which
// lines up the digits of every row in a batch. The step count, batch and
// rate are where held-out accuracy, 0 before training, reaches ~90% in
// about a minute of two CPU cores; at 3e-3 it was 84%, at 6e-3 it had not
// left 2% by step 200, and in batches of 32 (the same time) 10%
// (bench/RESULTS.md).
// out.overwrite: `make demo` twice in a row starts the demo over in
// runs/demo, replacing the last demo's checkpoint; a run that is no longer
// the demo drops it (adapt_demo_to_overrides).
const char* embedded_demo_config() {
  return R"(model:
  path: "@assets/demo/addition/model"
  init: auto
data:
  path: "@assets/demo/addition/train.jsonl"
  format: query_response
  template: plain
  tokenizer: "@assets/demo/addition/tokenizer"
  pack: false
  eval_path: "@assets/demo/addition/test.jsonl"
  eval_task: math
  eval_max_new_tokens: 8
train:
  steps: 300
  batch_size: 128
  seq_len: 28
  grad_clip: 1.0
  seed: 0
  device: auto
  save_every: 0
  eval_every: 100
optim:
  name: adamw
  lr: 2.0e-3
  weight_decay: 0.01
sched:
  name: cosine
  warmup_ratio: 0.1
  min_lr_ratio: 0.1
out:
  dir: runs/demo
  overwrite: true
)";
}

bool overridden(const std::vector<std::string>& overrides, std::string_view key) {
  return std::any_of(overrides.begin(), overrides.end(), [&](const std::string& o) {
    return o.size() > key.size() && o.compare(0, key.size(), key) == 0 && o[key.size()] == '=';
  });
}

namespace {

// A key, and what puts its field back to the default (true when that
// changed it).
using Reset = std::pair<std::string_view, std::function<bool()>>;

// Each key the overrides leave unset goes back to its default; returns
// those that changed.
std::vector<std::string> reset_unset(TrainConfig& c, const std::vector<std::string>& overrides,
                                     const std::vector<Reset>& keys) {
  std::vector<std::string> reset;
  for (const auto& [key, to_default] : keys) {
    if (overridden(overrides, key) || !to_default()) continue;
    reset.emplace_back(key);
    c.key_origins.erase(std::string(key));  // the demo no longer sets it
  }
  return reset;
}

}  // namespace

std::vector<std::string> adapt_demo_to_overrides(TrainConfig& c,
                                                 const std::vector<std::string>& overrides) {
  const TrainConfig d;  // the defaults
  // Sets `field` to its default; whether that changed it.
  const auto back = [](auto& field, const auto& fallback) {
    const bool changed = !(field == fallback);
    field = fallback;
    return changed;
  };
  std::vector<std::string> notes;
  constexpr std::array<std::string_view, 3> data_keys = {"data.path", "data.sources",
                                                         "data.format"};
  const bool other_data = std::any_of(data_keys.begin(), data_keys.end(),
                                      [&](std::string_view k) { return overridden(overrides, k); });
  // data.sources in place of the demo's data.path: the two cannot both be
  // set, so the demo's file gives way (README: overriding data.sources
  // reads the sources named).
  if (overridden(overrides, "data.sources") && !overridden(overrides, "data.path") &&
      !c.data.path.empty()) {
    c.data.path.clear();
    notes.push_back("the demo's data.path gives way to the data.sources the overrides name");
  }
  if (other_data) {
    const auto reset = reset_unset(
        c, overrides,
        {{"data.format", [&] { return back(c.data.format, d.data.format); }},
         {"data.eval_path", [&] { return back(c.data.eval_path, d.data.eval_path); }},
         {"data.eval_task", [&] { return back(c.data.eval_task, d.data.eval_task); }},
         {"data.eval_max_new_tokens",
          [&] { return back(c.data.eval_max_new_tokens, d.data.eval_max_new_tokens); }},
         {"train.eval_every", [&] { return back(c.train.eval_every, d.train.eval_every); }}});
    if (!reset.empty())
      notes.push_back(fmt::format(
          "the demo's {} go with its data: back to their defaults for the data the overrides name",
          fmt::join(reset, ", ")));
  }
  // The demo's runs are throwaway, so it starts over in its out.dir; a run
  // on another model or other data is the user's own, and a second one
  // must not replace the first one's checkpoints.
  if ((other_data || overridden(overrides, "model.path")) &&
      !overridden(overrides, "out.overwrite"))
    c.out.overwrite = d.out.overwrite;
  if (overridden(overrides, "model.path")) {
    const auto reset = reset_unset(
        c, overrides,
        {{"data.tokenizer", [&] { return back(c.data.tokenizer, d.data.tokenizer); }},
         {"data.template", [&] { return back(c.data.template_name, d.data.template_name); }},
         {"train.seq_len", [&] { return back(c.train.seq_len, d.train.seq_len); }},
         {"train.batch_size", [&] { return back(c.train.batch_size, d.train.batch_size); }},
         {"train.steps", [&] { return back(c.train.steps, d.train.steps); }},
         {"optim.lr", [&] { return back(c.optim.lr, d.optim.lr); }},
         {"optim.weight_decay", [&] { return back(c.optim.weight_decay, d.optim.weight_decay); }},
         {"sched.name", [&] { return back(c.sched.name, d.sched.name); }},
         {"sched.warmup_ratio", [&] { return back(c.sched.warmup_ratio, d.sched.warmup_ratio); }},
         {"sched.min_lr_ratio", [&] { return back(c.sched.min_lr_ratio, d.sched.min_lr_ratio); }},
         {"out.dir", [&] { return back(c.out.dir, d.out.dir); }}});
    if (!reset.empty())
      notes.push_back(fmt::format(
          "the demo's {} were set to train its toy model from scratch: back to their defaults "
          "for model.path (the model's own tokenizer and chat template; set any with --set)",
          fmt::join(reset, ", ")));
  }
  return notes;
}

}  // namespace lt::train
