#pragma once
// The tiny Llama whose memory counts memory_budget_test.cpp works out by
// hand: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, FFN 128, vocab 100,
// untied.
#include <string>

#include "models/config.h"
#include "plan/hardware.h"
#include "plan/planner.h"

namespace lt::testing {

inline constexpr const char* kTinyLlamaJson =
    R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
        "vocab_size": 100, "tie_word_embeddings": false})";

inline models::ModelConfig tiny_llama() {
  return models::ModelConfig::from_json_text(kTinyLlamaJson, "tiny");
}

// A small tied Llama of `layers` blocks (hidden 512, 8 heads, 2 KV heads,
// FFN 1408, vocab 32000): the planner tests' model, big enough for
// boundaries to matter on a profile of a few GB.
inline models::ModelConfig small_llama(int layers) {
  return models::ModelConfig::from_json_text(
      R"({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": )" +
          std::to_string(layers) +
          R"(, "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 1408,
          "vocab_size": 32000, "tie_word_embeddings": true})",
      "small");
}

// A machine for small_llama: `gpu_gb` and `host_gb` of memory, 0.4 GB of
// disk at `disk_gbps` each way, 2 GB/s links and 20 TFLOP/s, so that its
// boundaries are kept, offloaded or recomputed as the memory allows.
inline plan::HardwareProfile small_machine(double gpu_gb, double host_gb, double disk_gbps) {
  plan::HardwareProfile hw;
  hw.gpu_memory_gb = gpu_gb;
  hw.host_memory_gb = host_gb;
  hw.disk_gb = 0.4;
  hw.disk_read_gbps = hw.disk_write_gbps = disk_gbps;
  hw.bidir_gbps = 2;
  hw.gpu_tflops = 20;
  return hw;
}

// The planner's options for `batch` sequences of 1024 tokens within
// `time_limit_s` of solving, the rest as PlanOptions has them.
inline plan::PlanOptions options_for_batch(int64_t batch, double time_limit_s) {
  plan::PlanOptions o;
  o.batch_size = batch;
  o.seq_len = 1024;
  o.time_limit_s = time_limit_s;
  return o;
}

}  // namespace lt::testing
