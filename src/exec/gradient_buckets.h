#pragma once
// Data parallel's gradient all-reduce in buckets (the resident executor;
// docs/distributed.md). The parameters are cut, in reverse order (the
// backward makes the last stages' gradients first), into buckets of about
// `bucket_bytes`; a parameter larger than that is a bucket of its own. In
// the backward that makes every gradient final, each parameter's
// grad-ready hook marks it, and as soon as the next bucket in order has
// all its gradients, its sum across the ranks is started
// (CrossRankSum::start_sum), so that the communication overlaps the rest
// of the backward. finish() starts the buckets still waiting (a parameter
// without a gradient adds zeros) and waits for every sum.
//
// Buckets start strictly in their order, whatever order the hooks fire in,
// so that every rank starts the same collectives in the same sequence (MPI
// and NCCL match collectives by their order), also a rank whose shard had
// no targets and ran no backward at all.
#include <cstdint>
#include <memory>
#include <vector>

#include "exec/cross_rank_sum.h"
#include "nn/module.h"

namespace lt::exec {

class GradientBuckets {
 public:
  // `params`: the parameters whose gradients are summed, in model order;
  // those that do not require grad are left out. Registers a grad-ready
  // hook on each (hooks hold only a weak reference: they do nothing once
  // this object is gone, or while it is not armed). `ranks` outlives this.
  GradientBuckets(const nn::NamedParameters& params, int64_t bucket_bytes, CrossRankSum& ranks);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // For the coming backward, the one that makes every gradient final.
  void arm();
  // After it: starts what is left, waits for every sum, disarms. Every
  // parameter then has a gradient, the sum over the ranks.
  void finish();

  // The parameters of each bucket (indices into `params`), in start order.
  const std::vector<std::vector<size_t>>& buckets() const;
  // How many buckets the last armed backward started from its hooks
  // (the rest started in finish()).
  size_t started_in_backward() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace lt::exec
