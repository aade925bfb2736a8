// ZeRO-1's shards (exec/zero_shards.h) against a brute-force walk over
// every element: element e of the flat space belongs to rank e / S with
// S = ceil(P / N); each rank's pieces must list exactly its elements, in
// order, one piece per parameter touched, with the right parameter and
// offset. Awkward sizes: P not divisible by N, one-element tensors, more
// ranks than elements.
#include <gtest/gtest.h>

#include <algorithm>

#include "exec/zero_shards.h"

namespace lt::exec {
namespace {

struct Owner {
  size_t param;
  int64_t index;  // within the parameter
};

void check(const std::vector<int64_t>& numels, int world) {
  std::vector<Owner> elements;  // the flat space, by brute force
  for (size_t i = 0; i < numels.size(); ++i)
    for (int64_t k = 0; k < numels[i]; ++k) elements.push_back({i, k});
  const int64_t total = static_cast<int64_t>(elements.size());
  const int64_t shard = std::max<int64_t>(1, (total + world - 1) / world);
  int64_t covered = 0;
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + " of " + std::to_string(world));
    const ZeroShards s = zero_shards(numels, r, world);
    EXPECT_EQ(s.total, total);
    EXPECT_EQ(s.shard, shard);
    // This rank's elements, in order, from the pieces.
    std::vector<Owner> mine;
    std::vector<size_t> params;
    int64_t flat = -1;
    for (const ZeroPiece& p : s.pieces) {
      EXPECT_GT(p.length, 0);
      EXPECT_GT(p.flat, flat);
      flat = p.flat;
      EXPECT_EQ(p.flat, s.param_offsets[p.param] + p.begin);
      params.push_back(p.param);
      for (int64_t k = 0; k < p.length; ++k) mine.push_back({p.param, p.begin + k});
    }
    EXPECT_TRUE(std::adjacent_find(params.begin(), params.end()) == params.end())
        << "two pieces of one parameter";
    std::vector<Owner> want;
    for (int64_t e = 0; e < total; ++e)
      if (e / shard == r) want.push_back(elements[static_cast<size_t>(e)]);
    ASSERT_EQ(mine.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(mine[k].param, want[k].param) << k;
      EXPECT_EQ(mine[k].index, want[k].index) << k;
    }
    if (!s.pieces.empty()) {
      EXPECT_EQ(s.pieces.front().flat, r * shard);
    }
    EXPECT_EQ(s.owned(), static_cast<int64_t>(want.size()));
    covered += s.owned();
  }
  EXPECT_EQ(covered, total);
}

TEST(ZeroShards, MatchABruteForceWalkForAwkwardSizes) {
  const std::vector<std::vector<int64_t>> models = {
      {7},                    // one tensor
      {1, 1, 1},              // tiny tensors
      {5, 1, 12, 3, 1, 40},   // uneven
      {64, 64, 64, 64},       // divisible
      {1000, 1, 2, 999, 17},  // large and tiny
  };
  for (const auto& numels : models)
    for (int world : {1, 2, 3, 4, 5, 8, 13}) check(numels, world);
}

}  // namespace
}  // namespace lt::exec
