#pragma once
// Mean next-token loss of a model over pre-tokenized rows.
#include <functional>
#include <memory>

#include "data/batching.h"
#include "data/token_rows.h"
#include "models/causal_lm.h"

namespace lt::exec {

struct EvalResult {
  double loss = 0;     // mean over every predicted token of every row
  int64_t tokens = 0;  // predicted tokens counted
};

// Rows are batched `batch_size` at a time, padded to the longest row of the
// batch; padding is never predicted and, being after the real tokens, never
// attended to. `progress(done_rows, total_rows)` is called after each batch.
EvalResult evaluate_loss(const models::CausalLM& model, const std::vector<data::TokenRow>& rows,
                         int64_t batch_size,
                         const std::function<void(int64_t, int64_t)>& progress = {});

// The same over samples with labels: only tokens whose label is not -100
// are predicted (a masked prompt is context, not target). Samples are cut
// at `max_len` tokens (as training cuts them at train.seq_len), so a batch
// holds at most batch_size x max_len tokens.
EvalResult evaluate_samples(const models::CausalLM& model, const std::vector<data::Sample>& samples,
                            int64_t batch_size, int64_t max_len,
                            const std::function<void(int64_t, int64_t)>& progress = {});

// evaluate_samples' loss bit for bit, walking the model's stages in order
// over a group of batches at a time: `bring_in(s)` is held while stage s
// runs (an executor that keeps stages of weights on disk brings one in at
// a time, exec/staged_states.h). A group holds as many batches as keep
// their activations between two stages (batch x length x hidden_size
// values of the model's dtype) within `max_activation_bytes` (at least
// one batch), so each group brings every stage in once more.
EvalResult evaluate_samples_by_stage(const models::CausalLM& model,
                                     const std::vector<data::Sample>& samples, int64_t batch_size,
                                     int64_t max_len,
                                     const std::function<std::shared_ptr<void>(size_t)>& bring_in,
                                     int64_t max_activation_bytes = int64_t{1} << 31);

// Samples longer than `window` tokens (>= 2) cut into windows of `window`
// tokens, each starting one token before the previous one ends: that token
// is the next window's first context token, so every token the whole row
// would predict is predicted exactly once, from at most window - 1 tokens
// of context. Shorter samples are kept whole. `split` (optional) receives
// how many samples were split (none of their tokens is dropped). A model
// cannot attend past its max_position_embeddings, and a whole row of
// millions of tokens took memory for its full length in one forward pass.
std::vector<data::Sample> split_into_windows(std::vector<data::Sample> samples, int64_t window,
                                             int64_t* split = nullptr);

}  // namespace lt::exec
