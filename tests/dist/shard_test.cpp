// Each rank's rows of a global micro-batch, against a brute-force walk over
// the batch's rows: disjoint, in order, together the batch; target counts
// that add up to the batch's; the batch's tokens counted once.
#include "dist/shard.h"

#include <gtest/gtest.h>

#include "core/random.h"

namespace lt::dist {
namespace {

data::Batch random_batch(int64_t rows, int64_t columns, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> ids, targets;
  data::Batch b;
  for (int64_t i = 0; i < rows * columns; ++i) {
    ids.push_back(static_cast<int64_t>(gen.below(50)));
    const bool masked = gen.below(3) == 0;
    targets.push_back(masked ? data::kIgnoreLabel : static_cast<int64_t>(gen.below(50)));
    b.target_count += !masked;
  }
  b.ids = Tensor::from_vector(ids, {rows, columns});
  b.targets = Tensor::from_vector(targets, {rows, columns});
  b.tokens = rows * columns - 1;
  return b;
}

TEST(ShardRows, DisjointInOrderAndTogetherTheBatch) {
  for (int world : {1, 2, 3, 4, 6}) {
    const int64_t rows = 12, columns = 5;
    const data::Batch batch = random_batch(rows, columns, 7 + world);
    const std::vector<int64_t> ids = batch.ids.to_vector<int64_t>();
    const std::vector<int64_t> targets = batch.targets.to_vector<int64_t>();
    int64_t next_row = 0, target_count = 0, tokens = 0;
    for (int rank = 0; rank < world; ++rank) {
      const data::Batch shard = shard_rows(batch, rank, world);
      ASSERT_EQ(shard.ids.shape(), (Shape{rows / world, columns}));
      const std::vector<int64_t> shard_ids = shard.ids.to_vector<int64_t>();
      const std::vector<int64_t> shard_targets = shard.targets.to_vector<int64_t>();
      int64_t counted = 0;
      for (int64_t r = 0; r < rows / world; ++r, ++next_row) {
        for (int64_t c = 0; c < columns; ++c) {
          EXPECT_EQ(shard_ids[r * columns + c], ids[next_row * columns + c]);
          EXPECT_EQ(shard_targets[r * columns + c], targets[next_row * columns + c]);
          counted += targets[next_row * columns + c] != data::kIgnoreLabel;
        }
      }
      EXPECT_EQ(shard.target_count, counted) << "rank " << rank << " of " << world;
      target_count += shard.target_count;
      tokens += shard.tokens;
    }
    EXPECT_EQ(next_row, rows);
    EXPECT_EQ(target_count, batch.target_count);
    EXPECT_EQ(tokens, batch.tokens);
  }
}

TEST(ShardRows, RowsThatDoNotDivideAreRefused) {
  const data::Batch batch = random_batch(3, 4, 1);
  try {
    shard_rows(batch, 0, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.batch_size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lt::dist
