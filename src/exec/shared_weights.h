#pragma once
// Note [Weights shared by the ranks of a host]
// Under ZeRO-1 (exec/zero_optimizer.h) every rank of a CPU-master executor
// used to hold the whole f32 masters (what the stand-in uploads from) and,
// on a GPU, their pinned bf16 copies (what the GPU uploads from): 6 bytes
// a parameter per rank, 48 on a host of 8 GPUs. Instead the ranks of a
// host map one segment of shared memory (dist/host_segment.h) holding the
// masters and the bf16 copies once, and the model's own parameter tensors
// point into it (exec/weight_binding.h's point_at), so the executors,
// checkpoints and evaluation read it without knowing.
//
// Who writes what: the segment is filled once by local rank 0, before the
// optimizer and executor exist. Then each rank's ZeRO-1 update writes only
// its shard's pieces of the masters (and of the bf16 copies), which no
// other rank writes; so no weight is all-gathered between the ranks of one
// host at all. The one thing left to share is *when*: as a rank finishes
// its update of a group (a stage, in the streaming and offload executors)
// it publishes it, bumping its own counter of that group in the
// segment's header, and then waits until every rank of the host has
// published the group as often as it has (publish / wait_for). Only then
// is its update's ticket done, so the next forward's upload of stage s,
// which waits for that ticket alone, reads weights every rank has
// finished, while later stages' updates still run: the updates overlap the
// next forward as in one process.
//
// Why nobody reads a piece while its owner writes it: a rank writes its
// pieces of stage s in step k + 1 only after the step's sum of the
// gradient norm over all ranks, which every rank reaches only after its
// whole backward of step k + 1, the last use of the weights of step k; and
// every reader of stage s in step k + 2 (an upload, an evaluation, a
// checkpoint after sync()) waits for the publication of every rank.
//
// The wait is bounded by dist.timeout_s and names the local ranks that
// had not published. Every rank of the host must run the same updates in
// the same order (they do: the updates follow the same sums).
//
// A run of several hosts: each host has its segment. Each rank copies
// into its host's segment, masters and bf16 copies, the shards of some
// ranks of the other hosts (copied_ranks: world rank r, not on this host,
// goes to local rank r % local_size, so each is copied by exactly one rank
// of the host and no two write the same place), and only then publishes
// the group (on the thread that waited for the gather, not in the
// update). Those shards are gathered among the rank and its copied ranks
// alone (MPI; Note [Gathers among a host's peers], exec/zero_optimizer.cpp):
// each shard reaches each other host once, and a rank holds one block per
// host; where the communicator cannot (NCCL, so far) each group is
// all-gathered over every rank as without sharing, into each rank's own
// flat buffer. The host's ranks thus hold one copy of the weights instead
// of one each.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"

namespace lt::exec {

class SharedWeights {
 public:
  // The bytes a segment needs for `params` (f32, and bf16 copies when
  // `bf16_copies`), `groups` groups and `local_size` ranks: the header's
  // counters, then each master, then each copy, every tensor aligned to 64
  // bytes.
  static size_t bytes_for(const nn::NamedParameters& params, size_t groups, int local_size,
                          bool bf16_copies);

  // `memory`: a segment of bytes_for(...) bytes shared by the `local_size`
  // ranks of this host, zeroed when made; `keep` holds it mapped (tensors
  // pointing into it hold `keep`). `timeout_s` bounds every wait.
  SharedWeights(std::shared_ptr<void> keep, void* memory, size_t bytes,
                const nn::NamedParameters& params, size_t groups, int local_rank, int local_size,
                bool bf16_copies, double timeout_s);
  SharedWeights(const SharedWeights&) = delete;
  SharedWeights& operator=(const SharedWeights&) = delete;

  // Local rank 0, once, before any rank adopts: copies the parameters'
  // values (and their bf16 roundings) into the segment.
  void write_weights();
  // Every rank, after local rank 0 has written: the parameters (the same
  // tensors as at construction) read and write the segment from now on;
  // their own memory is dropped (freed unless held elsewhere).
  void adopt();
  // Parameter i's bf16 copy in the segment (undefined without copies).
  Tensor bf16_copy(size_t i) const;

  // This rank has written its part of `group` (Note [Weights shared by the
  // ranks of a host]).
  void publish(size_t group);
  // Returns once every rank of the host has published `group` as many
  // times as this rank has; `what` names the group in the error.
  void wait_for(size_t group, const std::string& what);
  // Every rank of the host reaches it before any returns.
  void barrier(const std::string& what);

  // How often local rank `rank` has published `group` so far.
  int64_t published_by(size_t group, int rank) const {
    return counter(group, rank).load(std::memory_order_acquire);
  }

  // Several hosts: the world ranks on other hosts whose ZeRO-1 shards this
  // rank copies into the segment after each all-gather; empty when every
  // rank of the run is on this host.
  void copy_in_shards_of(std::vector<int> ranks) { copied_ranks_ = std::move(ranks); }
  const std::vector<int>& copied_ranks() const { return copied_ranks_; }

  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  size_t bytes() const { return bytes_; }
  // The private bytes adopt() let go of (4 a parameter).
  int64_t weight_bytes() const;

 private:
  std::atomic<int64_t>& counter(size_t group, int rank) const;

  std::shared_ptr<void> keep_;
  char* memory_;
  size_t bytes_;
  nn::NamedParameters params_;
  size_t groups_;  // + 1 more counter row: barrier()
  int local_rank_, local_size_;
  double timeout_s_;
  std::vector<size_t> master_at_, copy_at_;  // byte offsets per parameter
  std::vector<int64_t> published_;           // per group (and the barrier): by this rank
  std::vector<int> copied_ranks_;
};

}  // namespace lt::exec
