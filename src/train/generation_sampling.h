#pragma once
// Choosing the next token from one row of logits, as Hugging Face's
// generate does: greedy when the temperature is 0 (the largest logit, ties
// to the lowest id, as torch.argmax), else a draw from
// softmax(logits / temperature) restricted first to the top_k largest
// (0 = all) and then to the nucleus: the most likely tokens, taken in
// order of probability, until the mass before the next reaches top_p (at
// least one token is kept; ties in probability are ordered by id).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/random.h"

namespace lt::train {

struct SamplingOptions {
  double temperature = 0.0;  // 0: greedy
  int64_t top_k = 0;         // 0: no limit
  double top_p = 1.0;        // 1: no limit
};

// Throws lt::Error naming the option when a value is out of range:
// temperature >= 0 and finite, top_k >= 0, 0 < top_p <= 1.
void check_sampling_options(const SamplingOptions& options);
// The same for --stop: an empty stop string would end every row at its
// first token. Checked by generate() and, before a model loads, by the CLI.
void check_stop_strings(const std::vector<std::string>& stops);

int32_t argmax_token(std::span<const float> logits);

// One token. `gen` is used only when sampling (one uniform draw per call).
int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, Generator& gen);

}  // namespace lt::train
