#pragma once
// Data parallel's data: every rank runs the same seeded batcher over the
// same samples (so the sampler's state, saved in checkpoints, is one for the
// whole run and a resume may change the world size), and keeps rows
// [rank * B / N, (rank + 1) * B / N) of each global micro-batch of B rows.
// The shards are disjoint and together the global batch, row for row, so N
// ranks train on exactly the batches one process would. Reading the whole
// batch costs each rank the tokenized rows only, which are already in
// memory.
#include "data/batching.h"

namespace lt::dist {

// Rows of `batch` for `rank` of `world_size`, their target count recounted;
// rank 0's shard carries the batch's token count (the others 0). B must divide by world_size
// (dist::check_batch_divides).
data::Batch shard_rows(const data::Batch& batch, int rank, int world_size);

}  // namespace lt::dist
