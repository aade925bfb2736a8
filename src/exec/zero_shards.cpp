#include "exec/zero_shards.h"

#include <algorithm>

#include "core/error.h"

namespace lt::exec {

namespace {

int64_t round_up(int64_t n, int64_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

int64_t ZeroShards::owned() const {
  int64_t n = 0;
  for (const ZeroPiece& p : pieces) n += p.length;
  return n;
}

int64_t ZeroShards::shard_offset(const ZeroPiece& piece) const {
  const ZeroGroup& g = groups[piece.group];
  return g.shard_at + (piece.flat - g.flat - rank * g.shard);
}

ZeroShards zero_shards(const std::vector<int64_t>& numels, int rank, int world,
                       const std::vector<size_t>& group_firsts, int64_t align) {
  LT_CHECK(world >= 1 && rank >= 0 && rank < world, "ZeRO-1: rank ", rank, " of ", world);
  LT_CHECK(align >= 1, "ZeRO-1: alignment ", align);
  std::vector<size_t> firsts = group_firsts.empty() ? std::vector<size_t>{0} : group_firsts;
  LT_CHECK(firsts.front() == 0 && std::is_sorted(firsts.begin(), firsts.end()) &&
               std::adjacent_find(firsts.begin(), firsts.end()) == firsts.end() &&
               firsts.back() < std::max<size_t>(numels.size(), 1),
           "ZeRO-1: groups must start at parameter 0 and ascend within the ", numels.size(),
           " parameters");
  ZeroShards s;
  s.rank = rank;
  s.world = world;
  for (size_t g = 0; g < firsts.size(); ++g) {
    ZeroGroup group;
    group.first = firsts[g];
    group.last = g + 1 < firsts.size() ? firsts[g + 1] : numels.size();
    group.flat = s.flat_size;
    group.shard_at = s.shard;
    std::vector<int64_t> starts;  // within the group's space
    for (size_t i = group.first; i < group.last; ++i) {
      LT_CHECK(numels[i] > 0, "ZeRO-1: a parameter of ", numels[i], " elements");
      starts.push_back(group.size);
      s.param_offsets.push_back(group.flat + group.size);
      s.total += numels[i];
      group.size = round_up(group.size + numels[i], align);
    }
    group.shard = std::max<int64_t>(align, round_up((group.size + world - 1) / world, align));
    const int64_t begin = std::min(group.size, rank * group.shard);
    const int64_t end = std::min(group.size, begin + group.shard);
    for (size_t i = group.first; i < group.last; ++i) {
      const int64_t at = starts[i - group.first];
      const int64_t from = std::max(begin, at), to = std::min(end, at + numels[i]);
      if (from < to) s.pieces.push_back({i, from - at, to - from, group.flat + from, g});
    }
    s.flat_size += world * group.shard;
    s.shard += group.shard;
    s.groups.push_back(group);
  }
  return s;
}

}  // namespace lt::exec
