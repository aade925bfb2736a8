#include "models/context_limit.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace lt::models {
namespace {

// What config.json says of the context, as the message names it: the key
// it holds ("has n_positions 1024"), or that it holds none and the length
// is the family's default (the message said the file "has" a value it
// never held).
std::string stated_context(const ModelConfig& config, const std::string& model) {
  const std::string length = std::to_string(config.max_position_embeddings);
  nlohmann::json root;
  try {
    std::ifstream in(model_config_file(model));
    root = nlohmann::json::parse(in);
  } catch (const std::exception&) {
    return "has max_position_embeddings " + length;  // parsed before; not read again
  }
  if (!root.is_object()) return "has max_position_embeddings " + length;
  const std::vector<std::string> keys =
      config.is_gpt2() ? std::vector<std::string>{"n_positions", "max_position_embeddings"}
                       : std::vector<std::string>{"max_position_embeddings"};
  for (const std::string& key : keys)  // null is absent, as the parser reads it
    if (root.contains(key) && !root.at(key).is_null()) return "has " + key + " " + length;
  return "has no " + keys.front() + ", so the context is " + length + ", " + config.model_type() +
         "'s default as transformers reads it (set it in config.json if the model takes longer "
         "rows)";
}

}  // namespace

std::string model_config_file(const std::string& model) {
  const std::filesystem::path p(model);
  return (std::filesystem::is_directory(p) ? p / "config.json" : p).string();
}

void check_seq_len_fits(int64_t seq_len, const std::string& setting, const ModelConfig& config,
                        const std::string& model) {
  if (seq_len <= config.exact_context()) return;
  if (seq_len <= config.max_position_embeddings)
    fail(setting, " ", seq_len,
         " is longer than the model's sliding window: ", model_config_file(model),
         " has sliding_window ", config.attention_window,
         ", and lazytrain computes full causal attention, which is the window's only up to that "
         "many tokens");
  fail(setting, " ", seq_len, " is longer than the model's context: ", model_config_file(model),
       " ", stated_context(config, model));
}

}  // namespace lt::models
