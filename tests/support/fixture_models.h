#pragma once
// A random model of a fixture family (tests/models/fixtures/families/<family>)
// with `layers` blocks, and the AdamW / AdamW8bit the executor tests train it
// with (adamw8bit: small blocks, so most fixture tensors take the 8-bit path).
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "models/causal_lm.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"

namespace lt::testing {

inline models::CausalLM random_fixture_model(const std::string& family, int layers,
                                             uint64_t seed = 23) {
  const std::filesystem::path dir =
      std::filesystem::path(LT_SOURCE_DIR) / "tests/models/fixtures/families" / family;
  models::ModelConfig config = models::ModelConfig::from_file(dir / "config.json");
  config.num_hidden_layers = layers;
  Generator gen(seed);
  return models::CausalLM::random(config, gen);
}

// The qwen2 fixture widened to 12 blocks of hidden 256 (4/2 heads of 64,
// FFN 768, vocabulary 512): enough blocks for the GPU tests' streaming
// schedules to keep, offload and recompute, small enough to run in seconds.
inline models::ModelConfig twelve_block_qwen2_config() {
  models::ModelConfig config = models::ModelConfig::from_file(
      std::filesystem::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/qwen2/config.json");
  config.num_hidden_layers = 12;
  config.hidden_size = 256;
  config.num_attention_heads = 4;
  config.num_key_value_heads = 2;
  config.head_dim = 64;
  config.intermediate_size = 768;
  config.vocab_size = 512;
  return config;
}

enum class TestOptimizer { AdamW, AdamW8bit };

// lr 3e-3, weight decay 0.01 except on norms; `states_without_memory` as
// the optimizers' constructors take it.
inline std::unique_ptr<optim::Optimizer> test_optimizer(
    const models::CausalLM& model, TestOptimizer kind,
    const std::vector<bool>& states_without_memory = {}) {
  optim::AdamWOptions o;
  o.lr = 3e-3;
  o.weight_decay = 0.01;
  const std::vector<std::string> no_decay = {"norm"};
  if (kind == TestOptimizer::AdamW) {
    return std::make_unique<optim::AdamW>(model.parameters(), o, no_decay, states_without_memory);
  }
  optim::AdamW8bitOptions o8;
  o8.min_8bit_numel = 512;
  o8.block_size = 256;
  return std::make_unique<optim::AdamW8bit>(model.parameters(), o, no_decay, o8,
                                            states_without_memory);
}

}  // namespace lt::testing
