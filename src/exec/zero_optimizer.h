#pragma once
// ZeRO-1 for the CPU-master executors (dist.zero 1; docs/distributed.md):
// every rank holds the whole f32 masters (the executor uploads from them)
// but only its shard's AdamW states, and updates only its shard of the
// masters (exec/zero_shards.h). A step, on every rank together:
//
//   reduce_gradients: the gradients, laid end to end in one f32 buffer,
//       are reduce-scattered: each rank receives the sum over the ranks of
//       its own shard; returns the squared norm of the whole summed
//       gradient (for clipping, the same on every rank);
//   update: AdamW over this rank's pieces (views of the masters), the
//       gradients of its shard;
//   gather_masters: every rank's updated shard all-gathered into every
//       rank's masters.
//
// The parameters may form groups (exec/zero_shards.h; the streaming and
// offload executors: one per stage), each reduce-scattered and all-gathered alone:
// start_reduce(g) as group g's gradients land in its part of the flat
// buffer, take_reduced() once every group's has completed, and
// start_gather(g) / finish_gathers() once a group's update is done.
// reduce_gradients and gather_masters run every group at once.
//
// As an optim::Optimizer it speaks for the whole model: state() returns the
// whole model's states named as one AdamW names them (gathered from every
// rank: a collective, called on every rank), and load_state() takes such a
// state and keeps this rank's pieces, so checkpoints are those of one
// process and a run resumes on any number of ranks, with or without ZeRO.
//
// AdamW's update is elementwise, so a parameter cut between ranks updates
// exactly as whole. AdamW8bit (optim.name adamw8bit) is blockwise: its m
// and sqrt(v) codes share one scale per block of `block_size` elements,
// counted from the parameter's first element. So with adamw8bit the shards
// are aligned (zero_shards' `align` = block_size): every parameter starts
// on a block boundary of the flat space and every shard is a whole number
// of blocks, so each piece of a parameter covers whole blocks of it (the
// last one may be the parameter's short last block) and quantizes exactly
// as the whole parameter does. Its pieces of the parameters AdamW8bit
// quantizes (min_8bit_numel and up, judged on the whole parameter) go to an
// AdamW8bit that quantizes them whatever their length; the other pieces to
// AdamW, as AdamW8bit's own small tensors: the same states bit for bit as
// one process. The cost is up to a block of zero padding per parameter in
// the flat buffer.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/cross_rank_sum.h"
#include "exec/shared_weights.h"
#include "exec/zero_shards.h"
#include "nn/module.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "optim/optimizer.h"

namespace lt::exec {

class ZeroOptimizer final : public optim::Optimizer {
 public:
  // `masters`: the whole model's f32 contiguous CPU parameters, in model
  // order, the same on every rank. `ranks` outlives this.
  // `group_firsts`: each group's first parameter (empty: one group).
  // `adamw8bit`: set, the states are AdamW8bit's (optim.name adamw8bit).
  ZeroOptimizer(const nn::NamedParameters& masters, const optim::AdamWOptions& options,
                std::vector<std::string> no_decay, CrossRankSum& ranks,
                const std::vector<size_t>& group_firsts = {},
                std::optional<optim::AdamW8bitOptions> adamw8bit = std::nullopt);

  size_t size() const override { return masters_.size(); }
  // Updates this rank's pieces of parameters [first, last) whose gradient
  // reduce_gradients() made.
  void update(double lr, double grad_scale, size_t first, size_t last) override;
  void finish_step() override;
  void set_bf16_shadow(size_t index, Tensor shadow) override;
  // The pieces' optimizers (AdamW, AdamW8bit) take the compiled updates.
  bool use_compiled_updates(std::shared_ptr<compile::KernelCache> cache) override;
  int64_t compiled_updates() const override;
  std::string compiled_fallback() const override;
  optim::NamedTensors state() const override;
  void load_state(const optim::NamedTensors& state) override;
  // Where load_state_parts reads from: `part(i, field, dtype, from, to)`
  // gives units [from, to) of parameter i's whole state `field` ("exp_avg",
  // "exp_avg_sq"; with adamw8bit "exp_avg.codes", "sqrt_exp_avg_sq.scales",
  // ...; a unit is an element, or for scales a block), of `dtype`;
  // `step(i)` parameter i's step, and `step(npos)` the optimizer's.
  struct StateSource {
    std::function<Tensor(size_t i, const std::string& field, DType dtype, int64_t from, int64_t to)>
        part;
    std::function<Tensor(size_t i)> step;
  };
  // load_state, asking only for this rank's pieces (a checkpoint's shard
  // files are read in part: exec/zero_checkpoint.h).
  void load_state_parts(const StateSource& source);

  // `grads`: per master, its gradient on this rank (f32, the master's
  // element count, on the CPU) or undefined. A parameter has a summed
  // gradient when any rank has one (the others add zeros).
  double reduce_gradients(const std::vector<Tensor>& grads);
  // Parameter i's place in the flat buffer, shaped as the parameter: an
  // executor that downloads gradients there (the offload executor's slabs)
  // saves reduce_gradients a copy and the host a second set of gradients.
  // Overwritten by gather_masters (the weights travel in the same buffer).
  Tensor flat_gradient_view(size_t i) const;
  void gather_masters();

  // Group g's gradients, in place in the flat buffer (flat_gradient_view;
  // zeros for a parameter without one on this rank), reduce-scattered
  // without waiting (CrossRankSum::start_reduce_scatter).
  void start_reduce(size_t group);
  // Once every group's reduce has been waited for (CrossRankSum::
  // wait_for_sums): the squared norm of this rank's shard of the summed
  // gradients (the ranks' add up to the whole gradient's: a parameter with
  // a gradient on no rank, or padding, sums to zeros); and the pieces'
  // gradients, for the parameters with `has_gradient` (on some rank).
  double shard_squares() const;
  void take_reduced(const std::vector<bool>& has_gradient);
  // Where group g's reduce-scatter leaves this rank's summed shard (f32,
  // host memory): an executor that reduces on the device downloads there.
  Tensor shard_gradient(size_t group) const;
  // The group holding parameter i.
  size_t group_of(size_t i) const;
  // Group g's updated shard of the masters all-gathered, without waiting;
  // finish_gathers(), after wait_for_sums(), copies them into the masters.
  void start_gather(size_t group);
  void finish_gathers();
  // The oldest started group's all-gather, once the CrossRankSum has
  // completed it (wait_for_oldest_sums(1)), copied into the masters; the
  // later ones stay in flight. Returns that group.
  size_t finish_oldest_gather();
  size_t gathers_in_flight() const { return gathering_.size(); }

  // The masters live in memory the ranks of this host share (Note [Weights
  // shared by the ranks of a host]); `shared` outlives this and is made
  // over the same parameters before this optimizer. From now on, on one
  // host, update() publishes each group it finishes and returns once every
  // rank of the host has finished it too, and nothing is all-gathered
  // (gather_masters, start_gather and finish_gathers do nothing); on
  // several hosts each rank copies in only the other hosts' shards it is
  // given (SharedWeights::copied_ranks), gathered among those ranks alone
  // where the communicator can (Note [Gathers among a host's peers]; a
  // collective here: CrossRankSum::join_peers), else all-gathered as
  // without sharing; then it publishes the group and waits for the host's
  // other ranks. A bf16 shadow is written by each rank for its own pieces
  // (and those copied in).
  void share_weights(SharedWeights& shared);
  // Every rank of the run shares one copy of the weights: nothing to
  // all-gather.
  bool shares_weights() const { return shared_ != nullptr && shared_->copied_ranks().empty(); }

  const ZeroShards& shards() const { return shards_; }
  // This rank's pieces' states, as AdamW (or AdamW8bit) names them
  // (exec/zero_checkpoint.h writes them per shard), and the parameters'
  // names; then "step".
  optim::NamedTensors shard_state() const;
  // adamw8bit: its block size (the states' scales are per block); else 0.
  int64_t block_size() const { return adamw8bit_ ? adamw8bit_->block_size : 0; }
  const nn::NamedParameters& masters() const { return masters_; }
  // This rank's optimizer states (AdamW's m and v), in bytes: 8 a parameter
  // of its shard.
  int64_t state_bytes() const;

 private:
  nn::NamedParameters masters_;
  CrossRankSum& ranks_;
  ZeroShards shards_;
  nn::NamedParameters pieces_;       // this rank's, views of masters_, in flat order
  std::vector<size_t> first_piece_;  // per master: its piece's index, or pieces_.size()
  std::optional<optim::AdamW8bitOptions> adamw8bit_;
  // The pieces' optimizers: AdamW over those updated in f32 (all, without
  // adamw8bit), AdamW8bit over those of the parameters it quantizes; per
  // piece, which one (0, 1) and its index there.
  std::unique_ptr<optim::AdamW> adam_;
  std::unique_ptr<optim::AdamW8bit> adam8_;
  std::vector<std::pair<int, size_t>> inner_of_;
  // f32 [world * shard]: gradients, then weights; made on first use (the
  // streaming executor with shared weights never needs it).
  const Tensor& flat() const;
  mutable Tensor flat_;
  Tensor shard_grad_;              // f32 [shard]: this rank's summed gradients
  std::vector<size_t> gathering_;  // groups whose all-gather has started
  std::vector<Tensor> shadows_;    // per master: its bf16 copy for a GPU, or undefined
  SharedWeights* shared_ = nullptr;
  void copy_in_other_hosts(size_t group);
  // Note [Gathers among a host's peers] (zero_optimizer.cpp): the world
  // ranks this rank gathers among, ascending (empty: every rank, into
  // flat_), and per group one block of its S_g per peer, the groups one
  // after another.
  std::vector<int> peers_;
  Tensor peer_flat_;
  int64_t peer_index(int rank) const;
  // Where rank `rank`'s shard of `group` lands in this rank's gather.
  float* gathered_shard(size_t group, int rank) const;
};

}  // namespace lt::exec
