#pragma once
// A training batch of random tokens, as the executor tests draw them: ids
// uniform in [0, vocab) from `gen` in row-major order, targets = ids shifted
// by one (each row's last position -100, as labels=ids in torch), and the
// flat target positions in `masked` set to -100 (a masked prompt).
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "data/batching.h"
#include "models/causal_lm.h"

namespace lt::testing {

inline data::Batch random_token_batch(Generator& gen, int64_t rows, int64_t seq, int64_t vocab,
                                      std::initializer_list<int64_t> masked = {}) {
  std::vector<int64_t> ids(static_cast<size_t>(rows * seq));
  for (auto& id : ids) id = static_cast<int64_t>(gen.below(static_cast<uint64_t>(vocab)));
  data::Batch b;
  b.ids = Tensor::from_vector(ids, {rows, seq});
  b.targets = models::shift_targets(b.ids);
  for (const int64_t position : masked) b.targets.data<int64_t>()[position] = -100;
  b.tokens = rows * seq;
  b.target_count = models::count_targets(b.targets);
  return b;
}

// `steps` global batches, each of two micro-batches of 2 rows of `seq`
// tokens, drawn in order from `gen`.
inline std::vector<std::vector<data::Batch>> random_token_steps(Generator& gen, int steps,
                                                                int64_t seq, int64_t vocab) {
  std::vector<std::vector<data::Batch>> out;
  for (int s = 0; s < steps; ++s) {
    out.push_back({random_token_batch(gen, 2, seq, vocab), random_token_batch(gen, 2, seq, vocab)});
  }
  return out;
}

}  // namespace lt::testing
