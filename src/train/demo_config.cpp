#include "train/demo_config.h"

#include <algorithm>
#include <array>
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
)";
}

void drop_demo_evaluation_for_other_data(TrainConfig& config,
                                         const std::vector<std::string>& overrides) {
  const auto overridden = [&](std::string_view key) {
    return std::any_of(overrides.begin(), overrides.end(), [&](const std::string& o) {
      return o.size() > key.size() && o.compare(0, key.size(), key) == 0 && o[key.size()] == '=';
    });
  };
  constexpr std::array<std::string_view, 3> data_keys = {"data.path", "data.sources",
                                                         "data.format"};
  if (std::none_of(data_keys.begin(), data_keys.end(), overridden)) return;
  const TrainConfig defaults;
  if (!overridden("data.eval_path")) config.data.eval_path = defaults.data.eval_path;
  if (!overridden("data.eval_task")) config.data.eval_task = defaults.data.eval_task;
  if (!overridden("data.eval_max_new_tokens"))
    config.data.eval_max_new_tokens = defaults.data.eval_max_new_tokens;
  if (!overridden("train.eval_every")) config.train.eval_every = defaults.train.eval_every;
}

}  // namespace lt::train
