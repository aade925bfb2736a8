#include "train/config.h"

namespace lt::train {

// The demo: a tiny Llama-shaped model, trained from scratch on 2,000
// GSM8K problems for about a minute on two CPU cores. Batch 8 x 128 tokens
// and lr 3e-3 with a short warmup (a tenth of the steps, so that any
// train.steps works) make the loss fall visibly within the
// first dozen steps (from ~10.8 = ln 50257).
const char* embedded_demo_config() {
  return R"(model:
  path: "@assets/demo/model"
  init: auto
data:
  path: "@assets/demo/gsm8k_train_2000.jsonl"
  format: query_response
  template: plain
  tokenizer: "@assets/demo/tokenizer"
  pack: true
train:
  steps: 60
  batch_size: 8
  seq_len: 128
  grad_clip: 1.0
  seed: 0
  device: auto
  save_every: 30
optim:
  name: adamw
  lr: 3.0e-3
  weight_decay: 0.01
sched:
  name: cosine
  warmup_ratio: 0.1
  min_lr_ratio: 0.1
out:
  dir: runs/demo
)";
}

}  // namespace lt::train
