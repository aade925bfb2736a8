// ZeRO-1's shards (exec/zero_shards.h) against a brute-force walk over
// every element: element e of the flat space belongs to rank e / S with
// S = ceil(P / N); each rank's pieces must list exactly its elements, in
// order, one piece per parameter touched, with the right parameter and
// offset. Awkward sizes: P not divisible by N, one-element tensors, more
// ranks than elements.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
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

// Groups (one per stage, for the streaming executor) and an alignment
// (AdamW8bit's block): by brute force, each group's parameters laid end to
// end, each starting at a multiple of `align`; S_g = ceil(P_g / N) rounded
// up to `align`; element e of the group belongs to rank e / S_g. The flat
// buffer holds the groups' N S_g one after another, a rank's shard buffer
// its S_g of each.
void check_groups(const std::vector<int64_t>& numels, const std::vector<size_t>& firsts,
                  int64_t align, int world) {
  auto up = [&](int64_t n) { return (n + align - 1) / align * align; };
  for (int r = 0; r < world; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r) + " of " + std::to_string(world) + ", align " +
                 std::to_string(align));
    const ZeroShards s = zero_shards(numels, r, world, firsts, align);
    ASSERT_EQ(s.groups.size(), firsts.size());
    struct Want {
      size_t param;
      int64_t begin, length, flat, shard_at;
    };
    std::vector<Want> want;
    int64_t flat = 0, shard_at = 0, total = 0;
    for (size_t g = 0; g < firsts.size(); ++g) {
      const size_t last = g + 1 < firsts.size() ? firsts[g + 1] : numels.size();
      std::vector<std::pair<size_t, int64_t>> space;  // (param, element), -1: padding
      for (size_t i = firsts[g]; i < last; ++i) {
        EXPECT_EQ(s.param_offsets[i], flat + static_cast<int64_t>(space.size()));
        for (int64_t k = 0; k < numels[i]; ++k) space.push_back({i, k});
        while (static_cast<int64_t>(space.size()) % align != 0) space.push_back({i, -1});
        total += numels[i];
      }
      const int64_t size = static_cast<int64_t>(space.size());
      const int64_t shard = std::max(align, up((size + world - 1) / world));
      EXPECT_EQ(s.groups[g].shard, shard);
      EXPECT_EQ(s.groups[g].flat, flat);
      EXPECT_EQ(s.groups[g].shard_at, shard_at);
      for (int64_t e = r * shard; e < std::min(size, (r + 1) * shard); ++e) {
        const auto [param, k] = space[static_cast<size_t>(e)];
        if (k < 0) continue;
        if (!want.empty() && want.back().param == param &&
            want.back().begin + want.back().length == k) {
          ++want.back().length;
        } else {
          want.push_back({param, k, 1, flat + e, shard_at + e - r * shard});
        }
      }
      flat += world * shard;
      shard_at += shard;
    }
    EXPECT_EQ(s.flat_size, flat);
    EXPECT_EQ(s.shard, shard_at);
    EXPECT_EQ(s.total, total);
    ASSERT_EQ(s.pieces.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      const ZeroPiece& p = s.pieces[k];
      EXPECT_EQ(p.param, want[k].param) << k;
      EXPECT_EQ(p.begin, want[k].begin) << k;
      EXPECT_EQ(p.length, want[k].length) << k;
      EXPECT_EQ(p.flat, want[k].flat) << k;
      EXPECT_EQ(s.shard_offset(p), want[k].shard_at) << k;
      EXPECT_EQ(p.begin % align, 0) << "a piece starts off a block boundary";
    }
  }
}

TEST(ZeroShards, GroupsAndAlignmentMatchABruteForceWalk) {
  const std::vector<int64_t> numels = {5, 1, 12, 3, 1, 40, 7, 1000, 1, 2};
  for (const std::vector<size_t>& firsts : {std::vector<size_t>{0}, std::vector<size_t>{0, 2, 3, 6},
                                            std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}})
    for (int64_t align : {1, 4, 16})
      for (int world : {1, 2, 3, 5, 8}) check_groups(numels, firsts, align, world);
}

TEST(ZeroShards, BadGroupsAreRefused) {
  EXPECT_THROW(zero_shards({3, 4}, 0, 2, {1}), Error);
  EXPECT_THROW(zero_shards({3, 4}, 0, 2, {0, 0}), Error);
  EXPECT_THROW(zero_shards({3, 4}, 0, 2, {0, 2}), Error);
}

}  // namespace
}  // namespace lt::exec
