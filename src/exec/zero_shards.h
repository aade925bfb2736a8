#pragma once
// ZeRO-1's cut of the parameters among the ranks (docs/distributed.md).
// The parameters, flattened and laid end to end in model order, make one
// index space of P elements. With S = ceil(P / N), rank r owns the elements
// [r S, min((r + 1) S, P)): the last ranks may own fewer, or none (P < N).
// Equal shards let the gradients' reduce-scatter and the weights'
// all-gather move one block of S elements per rank (MPI's *_block
// collectives, NCCL's ncclReduceScatter/ncclAllGather), the flat buffer
// padded to N S. A rank's elements are cut into pieces, one per parameter
// they touch: a parameter may be split between ranks, and a rank holds at
// most one piece of each parameter.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lt::exec {

struct ZeroPiece {
  size_t param = 0;    // index in the parameter list
  int64_t begin = 0;   // first element, within the flattened parameter
  int64_t length = 0;  // elements, > 0
  int64_t flat = 0;    // where `begin` sits in the flat index space
};

struct ZeroShards {
  int rank = 0, world = 1;
  int64_t total = 0;                   // P
  int64_t shard = 0;                   // S, at least 1
  std::vector<int64_t> param_offsets;  // where each parameter starts in the flat space; then P
  std::vector<ZeroPiece> pieces;       // this rank's, in flat order
  int64_t owned() const;               // this rank's elements: the pieces' lengths
};

// `numels`: the parameters' element counts (each > 0), in model order.
ZeroShards zero_shards(const std::vector<int64_t>& numels, int rank, int world);

}  // namespace lt::exec
