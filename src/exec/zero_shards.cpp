#include "exec/zero_shards.h"

#include <algorithm>

#include "core/error.h"

namespace lt::exec {

int64_t ZeroShards::owned() const {
  int64_t n = 0;
  for (const ZeroPiece& p : pieces) n += p.length;
  return n;
}

ZeroShards zero_shards(const std::vector<int64_t>& numels, int rank, int world) {
  LT_CHECK(world >= 1 && rank >= 0 && rank < world, "ZeRO-1: rank ", rank, " of ", world);
  ZeroShards s;
  s.rank = rank;
  s.world = world;
  for (int64_t n : numels) {
    LT_CHECK(n > 0, "ZeRO-1: a parameter of ", n, " elements");
    s.param_offsets.push_back(s.total);
    s.total += n;
  }
  s.param_offsets.push_back(s.total);
  s.shard = std::max<int64_t>(1, (s.total + world - 1) / world);
  const int64_t begin = std::min(s.total, rank * s.shard);
  const int64_t end = std::min(s.total, begin + s.shard);
  for (size_t i = 0; i < numels.size(); ++i) {
    const int64_t from = std::max(begin, s.param_offsets[i]);
    const int64_t to = std::min(end, s.param_offsets[i + 1]);
    if (from >= to) continue;
    s.pieces.push_back({i, from - s.param_offsets[i], to - from, from});
  }
  return s;
}

}  // namespace lt::exec
