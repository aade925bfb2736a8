#pragma once
// Data parallelism as an executor sees it: every rank runs its shard of the
// global batch, then the ranks add up what they computed (gradients, loss
// and target counts), so that every rank updates the same weights with the
// global batch's gradient. dist/ implements it with MPI's or NCCL's
// all-reduce; nothing here knows which.
#include <span>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace lt::exec {

class CrossRankSum {
 public:
  virtual ~CrossRankSum() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Every rank's `values` added element by element, in place on every rank.
  virtual void sum(std::span<double> values) = 0;
  // Every rank's tensors added element by element, in place on every rank:
  // the same list (order, shapes, dtypes) on every rank, contiguous, on the
  // device the communicator serves.
  virtual void sum(const std::vector<Tensor>& tensors) = 0;

  // Starts adding up `tensors` as sum() does and returns before the sums
  // are done: they are in place once wait_for_sums() returns, so that an
  // executor overlaps them with the rest of its backward (gradient
  // buckets). Every rank starts the same lists in the same order, and
  // nothing else may read or write the tensors until the wait. The default
  // sums at once.
  virtual void start_sum(const std::vector<Tensor>& tensors) { sum(tensors); }
  virtual void wait_for_sums() {}

  // ZeRO-1 (exec/zero_shards.h). `flat`: f32, world_size() equal shards of
  // `shard.numel()` elements each, laid out alike on every rank.
  // reduce_scatter: every rank's `flat` added element by element, and this
  // rank's shard of the sum (shard rank()) written to `shard`; `flat` is
  // left undefined. all_gather: every rank's own shard of `flat` copied into
  // the same place of every other rank's `flat`.
  // The defaults refuse: a communicator that cannot says so.
  virtual void reduce_scatter(const Tensor& flat, const Tensor& shard) {
    (void)flat, (void)shard;
    fail("dist.zero 1 needs a reduce-scatter, which this communicator does not have yet");
  }
  virtual void all_gather(const Tensor& flat) {
    (void)flat;
    fail("dist.zero 1 needs an all-gather, which this communicator does not have yet");
  }
  // The same, started as start_sum() starts a sum: done once
  // wait_for_sums() returns (the streaming executor reduce-scatters each
  // stage as its backward ends). The defaults run at once.
  virtual void start_reduce_scatter(const Tensor& flat, const Tensor& shard) {
    reduce_scatter(flat, shard);
  }
  virtual void start_all_gather(const Tensor& flat) { all_gather(flat); }
  // Weights shared per host on several hosts (Note [Weights shared by the
  // ranks of a host], exec/shared_weights.h): each rank needs only the
  // shards of `peers` (the world ranks, ascending, this rank among them;
  // every peer passes the same list). Called once on every rank of the run
  // (a collective); true when every rank can then gather among its peers
  // alone (start_peer_all_gather), false (the default) where the
  // communicator cannot, or some rank's peers disagree: all-gather over
  // every rank instead.
  virtual bool join_peers(const std::vector<int>& peers) {
    (void)peers;
    return false;
  }
  // After join_peers returned true: `blocks` holds one equal block per
  // peer, in the order of `peers`, this rank's filled in; every peer's
  // block copied into the same place of every other peer's `blocks`.
  // Started as start_all_gather is, done once waited for.
  virtual void start_peer_all_gather(const Tensor& blocks) {
    (void)blocks;
    fail("an all-gather among a rank's peers, which this communicator does not have");
  }
  // Waits for the `count` oldest collectives started and not yet waited
  // for (their results in place), leaving the later ones running. The
  // default waits for all of them.
  virtual void wait_for_oldest_sums(size_t count) {
    (void)count;
    wait_for_sums();
  }
};

}  // namespace lt::exec
