#pragma once
// Data parallelism as an executor sees it: every rank runs its shard of the
// global batch, then the ranks add up what they computed (gradients, loss
// and target counts), so that every rank updates the same weights with the
// global batch's gradient. dist/ implements it with MPI's or NCCL's
// all-reduce; nothing here knows which.
#include <span>
#include <vector>

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
};

}  // namespace lt::exec
