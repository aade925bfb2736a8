// Data parallel in the offload executor (exec/offload_ranks.cpp), in one
// process, against the one-process offload run (the outside reference:
// checked against the resident executor by tests/exec/offload_test):
//  - all-reduce, with a stand-in for 2 ranks whose shards equal this one's
//    (every sum doubles, so the loss is divided by twice the targets and
//    the gradients doubled back: exact in binary floating point);
//  - ZeRO-1 on 1 rank, one group per stage (the reduce-scatter hands the
//    stage's whole buffer to the one shard).
// Losses and weights equal one process's bit for bit, the norm (taken of
// the sums in float64 instead of on the device) within 1e-12. And each
// stage's gradients are reduced as the last backward makes them final
// (Note [Offload reduces behind the backward]): one reduce per stage and
// step, the first started before the step's backward has made every
// gradient final (counted by grad-ready hooks on the device weights), and
// each but the step's last waited for only after more gradients became
// final (the stand-in reduces at the wait, so a download queued before the
// wait would miss it and part from one process).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/random.h"
#include "exec/offload.h"
#include "exec/stand_in_device.h"
#include "exec/streaming.h"
#include "exec/zero_optimizer.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "support/executor_steps.h"
#include "support/random_batch.h"

namespace lt::exec {
namespace {

// World 2 mirrored (sums double) for all-reduce, world 1 for ZeRO-1. The
// reduces take effect at the wait; each records how many gradients had
// become final (`ready`) when it started and when it was waited for.
class RecordingRanks final : public CrossRankSum {
 public:
  explicit RecordingRanks(int world) : world_(world) {}
  int rank() const override { return 0; }
  int world_size() const override { return world_; }
  void sum(std::span<double> values) override {
    for (double& v : values) v *= world_;
  }
  void sum(const std::vector<Tensor>& tensors) override {
    start_sum(tensors);
    wait_for_sums();
  }
  void start_sum(const std::vector<Tensor>& tensors) override {
    ready_at_start.push_back(ready);
    in_flight_.push_back({tensors, Tensor()});
  }
  void reduce_scatter(const Tensor& flat, const Tensor& shard) override {
    start_reduce_scatter(flat, shard);
    wait_for_sums();
  }
  void start_reduce_scatter(const Tensor& flat, const Tensor& shard) override {
    ASSERT_EQ(world_, 1);
    ready_at_start.push_back(ready);
    in_flight_.push_back({{flat}, shard});
  }
  void all_gather(const Tensor&) override { ASSERT_EQ(world_, 1); }
  void wait_for_sums() override { wait_for_oldest_sums(in_flight_.size()); }
  void wait_for_oldest_sums(size_t count) override {
    for (size_t k = 0; k < count && !in_flight_.empty(); ++k) {
      const auto& [tensors, shard] = in_flight_.front();
      if (shard.defined()) {
        shard.copy_(tensors[0]);
      } else {
        for (const Tensor& t : tensors) {
          float* d = t.data<float>();
          for (int64_t i = 0; i < t.numel(); ++i) d[i] *= static_cast<float>(world_);
        }
      }
      in_flight_.erase(in_flight_.begin());
      ready_at_wait.push_back(ready);
    }
  }
  int64_t ready = 0;                    // gradients made final so far
  std::vector<int64_t> ready_at_start;  // per reduce, over the run
  std::vector<int64_t> ready_at_wait;   // the same reduces', in start order

 private:
  int world_;
  std::vector<std::pair<std::vector<Tensor>, Tensor>> in_flight_;
};

models::CausalLM fixture() {
  return io::load_hf_model(std::filesystem::path(LT_SOURCE_DIR) /
                           "tests/models/fixtures/families/qwen3");
}

struct RankedRun {
  testing::ExecutorRun result;
  std::vector<int64_t> ready_after_step;  // gradients made final by the end of each step
};

enum class Mode { OneProcess, AllReduce, Zero };

RankedRun train(Mode mode, RecordingRanks* ranks) {
  models::CausalLM model = fixture();
  optim::AdamWOptions adam;
  adam.lr = 3e-3;
  std::unique_ptr<optim::Optimizer> optimizer;
  OffloadOptions oo;
  if (mode == Mode::Zero) {
    auto zero =
        std::make_unique<ZeroOptimizer>(model.parameters(), adam, std::vector<std::string>{"norm"},
                                        *ranks, streaming_zero_groups(model));
    oo.zero = zero.get();
    optimizer = std::move(zero);
  } else {
    optimizer =
        std::make_unique<optim::AdamW>(model.parameters(), adam, std::vector<std::string>{"norm"});
  }
  if (mode != Mode::OneProcess) oo.ranks = ranks;
  OffloadExecutor executor(model, *optimizer, std::make_unique<StandInDevice>(StandInOptions{}),
                           oo);
  if (ranks)
    for (const auto& [name, w] : executor.eval_model().parameters())
      w.register_grad_ready_hook([ranks](const Tensor&) { ++ranks->ready; });
  Generator gen(7);
  std::vector<std::vector<data::Batch>> batches(3);
  for (auto& step : batches)
    for (int m = 0; m < 2; ++m)
      step.push_back(testing::random_token_batch(gen, 2, 9, model.config().vocab_size));
  // The middle step has no targets at all: one process skips it; a rank
  // of several still runs it (no backward) and takes part in the reduces.
  for (data::Batch& b : batches[1]) {
    b.targets.fill_(-100);
    b.target_count = 0;
  }
  RankedRun r;
  for (size_t s = 0; s < batches.size(); ++s) {
    StepOptions o;
    o.lr = 3e-3 * (1.0 + 0.1 * static_cast<double>(s));
    o.max_grad_norm = 1e9;
    r.result.stats.push_back(executor.step(batches[s], o));
    r.ready_after_step.push_back(ranks ? ranks->ready : 0);
  }
  executor.sync_masters();
  for (const auto& [name, p] : model.parameters()) r.result.params.push_back(p.to_vector<float>());
  return r;
}

void expect_reduces_behind_the_backward(const RankedRun& run, const RecordingRanks& ranks,
                                        size_t stages) {
  ASSERT_EQ(ranks.ready_at_start.size(), 3 * stages) << "one reduce per stage and step";
  ASSERT_EQ(ranks.ready_at_wait.size(), ranks.ready_at_start.size());
  for (size_t step : {size_t{0}, size_t{2}}) {
    const size_t first = step * stages;
    EXPECT_LT(ranks.ready_at_start[first], run.ready_after_step[step])
        << "step " << step << ": the first reduce starts after the backward";
    for (size_t k = first; k + 1 < first + stages; ++k)
      EXPECT_GT(ranks.ready_at_wait[k], ranks.ready_at_start[k]) << "reduce " << k;
  }
  // The middle step runs no backward: its reduces all come after it.
  for (size_t k = stages; k < 2 * stages; ++k)
    EXPECT_EQ(ranks.ready_at_start[k], run.ready_after_step[1]) << "reduce " << k;
}

TEST(OffloadRanks, StagesReduceBehindTheBackwardAsOneProcess) {
  const RankedRun one = train(Mode::OneProcess, nullptr);
  const size_t stages = streaming_zero_groups(fixture()).size();
  ASSERT_GT(stages, 2u);
  for (Mode mode : {Mode::AllReduce, Mode::Zero}) {
    SCOPED_TRACE(mode == Mode::Zero ? "ZeRO-1, one rank" : "all-reduce, two mirrored ranks");
    const int world = mode == Mode::Zero ? 1 : 2;
    RecordingRanks ranks(world);
    const RankedRun many = train(mode, &ranks);
    ASSERT_EQ(one.result.stats.size(), many.result.stats.size());
    for (size_t s = 0; s < one.result.stats.size(); ++s) {
      const StepStats &a = one.result.stats[s], &b = many.result.stats[s];
      EXPECT_EQ(a.loss, b.loss) << "step " << s;
      EXPECT_EQ(a.loss == 0, s == 1);
      EXPECT_NEAR(a.grad_norm, b.grad_norm, 1e-12 * a.grad_norm) << "step " << s;
      EXPECT_EQ(world * a.target_count, b.target_count);
    }
    for (size_t i = 0; i < one.result.params.size(); ++i)
      EXPECT_EQ(0, std::memcmp(one.result.params[i].data(), many.result.params[i].data(),
                               one.result.params[i].size() * sizeof(float)))
          << "parameter " << i;
    expect_reduces_behind_the_backward(many, ranks, stages);
  }
}

}  // namespace
}  // namespace lt::exec
