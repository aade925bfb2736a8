#include "dist/shard.h"

#include <vector>

#include "core/error.h"

namespace lt::dist {

namespace {

// Rows [first, first + count) of an [B, T] i64 tensor, as a new tensor.
Tensor row_range(const Tensor& t, int64_t first, int64_t count) {
  const Tensor c = t.contiguous();
  const int64_t columns = c.shape()[1];
  const int64_t* rows = c.data<int64_t>() + first * columns;
  return Tensor::from_vector(std::vector<int64_t>(rows, rows + count * columns), {count, columns});
}

}  // namespace

data::Batch shard_rows(const data::Batch& batch, int rank, int world_size) {
  if (world_size == 1) return batch;
  LT_CHECK(batch.ids.dim() == 2 && batch.ids.dtype() == DType::I64 && batch.ids.device().is_cpu(),
           "shard_rows: a batch's ids are [B, T] i64 on the CPU, got ", batch.ids.str());
  const int64_t rows = batch.ids.shape()[0];
  LT_CHECK(rows % world_size == 0, "a micro-batch of ", rows,
           " rows does not divide among world size ", world_size, " (train.batch_size)");
  const int64_t per_rank = rows / world_size;
  data::Batch shard;
  shard.ids = row_range(batch.ids, rank * per_rank, per_rank);
  shard.targets = row_range(batch.targets, rank * per_rank, per_rank);
  const int64_t* targets = shard.targets.data<int64_t>();
  for (int64_t i = 0; i < shard.targets.numel(); ++i)
    shard.target_count += targets[i] != data::kIgnoreLabel;
  // The batch's real (non-padding) tokens, a figure for the logs, cannot be
  // recounted per row (padding may be a real id, EOS), so rank 0's shard
  // carries the whole batch's and the ranks' sum is the global count.
  shard.tokens = rank == 0 ? batch.tokens : 0;
  return shard;
}

}  // namespace lt::dist
