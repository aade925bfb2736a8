#pragma once
// ZeRO-1's cut of the parameters among the ranks (docs/distributed.md).
//
// The parameters, in model order, form one or more *groups* of consecutive
// parameters (the streaming and offload executors: one group per stage,
// so that each stage's gradients are reduce-scattered alone as its
// backward ends). A group's parameters,
// flattened and laid end to end, make an index space of P_g elements; with
// S_g = ceil(P_g / N) (rounded up to a multiple of `align`), rank r owns the
// group's elements [r S_g, min((r + 1) S_g, P_g)): the last ranks may own
// fewer, or none (P_g < N). Equal shards let the gradients' reduce-scatter
// and the weights' all-gather move one block of S_g elements per rank
// (MPI's *_block collectives, NCCL's ncclReduceScatter/ncclAllGather).
//
// The flat buffer holds the groups one after another, each padded to
// N S_g; a rank's shard buffer holds its S_g of each group, one after
// another (shard = the sum of the S_g). A rank's elements are cut into
// pieces, one per parameter they touch: a parameter may be split between
// ranks, and a rank holds at most one piece of each parameter.
//
// `align` (> 1: AdamW8bit's quantization block) also starts every parameter
// at a multiple of `align` in its group's space (zero padding between), so
// that every piece begins on a block boundary of its parameter and a piece
// quantizes in the same blocks as the whole parameter does.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lt::exec {

struct ZeroPiece {
  size_t param = 0;    // index in the parameter list
  int64_t begin = 0;   // first element, within the flattened parameter
  int64_t length = 0;  // elements, > 0
  int64_t flat = 0;    // where `begin` sits in the flat buffer
  size_t group = 0;    // index in ZeroShards::groups
};

struct ZeroGroup {
  size_t first = 0, last = 0;  // its parameters: [first, last)
  int64_t size = 0;            // P_g: its index space, the alignment padding included
  int64_t shard = 0;           // S_g, at least 1
  int64_t flat = 0;            // where its N S_g elements start in the flat buffer
  int64_t shard_at = 0;        // where this rank's S_g elements start in its shard buffer
};

struct ZeroShards {
  int rank = 0, world = 1;
  int64_t total = 0;                   // the parameters' elements, padding excluded
  int64_t shard = 0;                   // a rank's shard buffer: the sum of the groups' S_g
  int64_t flat_size = 0;               // the flat buffer: the sum of the groups' N S_g
  std::vector<int64_t> param_offsets;  // where each parameter starts in the flat buffer
  std::vector<ZeroGroup> groups;
  std::vector<ZeroPiece> pieces;  // this rank's, in flat order
  int64_t owned() const;          // this rank's elements: the pieces' lengths
  // Where piece k's elements sit in this rank's shard buffer.
  int64_t shard_offset(const ZeroPiece& piece) const;
};

// `numels`: the parameters' element counts (each > 0), in model order;
// `group_firsts`: each group's first parameter, ascending, starting at 0
// (empty: one group).
ZeroShards zero_shards(const std::vector<int64_t>& numels, int rank, int world,
                       const std::vector<size_t>& group_firsts = {}, int64_t align = 1);

}  // namespace lt::exec
