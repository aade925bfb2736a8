#pragma once
// The tiny Llama whose memory counts memory_budget_test.cpp works out by
// hand: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, FFN 128, vocab 100,
// untied.
#include "models/config.h"

namespace lt::testing {

inline constexpr const char* kTinyLlamaJson =
    R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
        "vocab_size": 100, "tie_word_embeddings": false})";

inline models::ModelConfig tiny_llama() {
  return models::ModelConfig::from_json_text(kTinyLlamaJson, "tiny");
}

}  // namespace lt::testing
