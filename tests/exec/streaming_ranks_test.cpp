// Data parallel in the streaming executor (exec/streaming_ranks.cpp), in
// one process, with a stand-in for 2 ranks whose shards equal this one's
// (every sum doubles, so the loss is divided by twice the targets and the
// gradients doubled back: exact in binary floating point). Losses and
// weights must equal the one-process run's bit for bit (the outside
// reference: that run, checked against the resident executor by the
// streaming tests); the norm, taken of the sums in float64 instead of
// per stage, within 1e-12. And a stage's gradients are summed on the
// device as its backward ends, before the step's last stage use, and the
// sum runs behind the next stage's backward: it is started as one stage's
// backward ends and waited for only after the next one's (the stand-in
// doubles the gradients at the wait, so a download queued before the wait
// would miss the doubling and part from one process).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/random.h"
#include "exec/stand_in_device.h"
#include "exec/streaming.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "support/executor_steps.h"
#include "support/random_batch.h"

namespace lt::exec {
namespace {

class MirrorRanks final : public CrossRankSum {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void sum(std::span<double> values) override {
    for (double& v : values) v *= 2;
  }
  void sum(const std::vector<Tensor>& tensors) override {
    start_sum(tensors);
    wait_for_sums();
  }
  // A stage's gradients, on the (stand-in) device before their download:
  // summed (doubled) when waited for.
  void start_sum(const std::vector<Tensor>& tensors) override {
    uses_at_start.push_back(uses_seen);
    in_flight_.push_back(tensors);
  }
  void wait_for_sums() override { wait_for_oldest_sums(in_flight_.size()); }
  void wait_for_oldest_sums(size_t count) override {
    for (size_t k = 0; k < count && !in_flight_.empty(); ++k) {
      for (const Tensor& t : in_flight_.front()) {
        float* d = t.data<float>();
        for (int64_t i = 0; i < t.numel(); ++i) d[i] *= 2;
      }
      in_flight_.erase(in_flight_.begin());
      uses_at_wait.push_back(uses_seen);
    }
  }
  int64_t uses_seen = 0;               // stage uses computed so far (observe_use)
  std::vector<int64_t> uses_at_start;  // per stage sum, over the run
  std::vector<int64_t> uses_at_wait;   // the same sums', in the order started

 private:
  std::vector<std::vector<Tensor>> in_flight_;
};

testing::ExecutorRun run(MirrorRanks* ranks, int micro) {
  models::CausalLM model = io::load_hf_model(std::filesystem::path(LT_SOURCE_DIR) /
                                             "tests/models/fixtures/families/qwen3");
  optim::AdamWOptions o;
  o.lr = 3e-3;
  optim::AdamW adam(model.parameters(), o, {"norm"});
  StandInDevice device(StandInOptions{});
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(model.config().num_hidden_layers);
  so.ranks = ranks;
  if (ranks) so.observe_use = [ranks](size_t, bool computed) { ranks->uses_seen += computed; };
  StreamingExecutor executor(model, adam, device, so);
  Generator gen(7);
  std::vector<std::vector<data::Batch>> batches(3);
  for (auto& step : batches)
    for (int m = 0; m < micro; ++m)
      step.push_back(testing::random_token_batch(gen, 2, 9, model.config().vocab_size));
  // The middle step has no targets at all: one process skips it; a rank
  // of several still runs it (no compute) and takes part in the sums.
  for (data::Batch& b : batches[1]) {
    b.targets.fill_(-100);
    b.target_count = 0;
  }
  return testing::run_executor_steps(executor, model, batches, 1e9);
}

TEST(StreamingRanks, MirroredRanksGiveOneProcessBitForBit) {
  for (int micro : {1, 2}) {
    SCOPED_TRACE("micro-batches " + std::to_string(micro));
    const testing::ExecutorRun one = run(nullptr, micro);
    MirrorRanks ranks;
    const testing::ExecutorRun two = run(&ranks, micro);
    ASSERT_EQ(one.stats.size(), two.stats.size());
    for (size_t s = 0; s < one.stats.size(); ++s) {
      EXPECT_EQ(one.stats[s].loss, two.stats[s].loss) << "step " << s;
      EXPECT_EQ(one.stats[s].loss == 0, s == 1);
      EXPECT_NEAR(one.stats[s].grad_norm, two.stats[s].grad_norm, 1e-12 * one.stats[s].grad_norm);
      EXPECT_EQ(2 * one.stats[s].target_count, two.stats[s].target_count);  // both "ranks"
    }
    for (size_t i = 0; i < one.params.size(); ++i)
      EXPECT_EQ(0, std::memcmp(one.params[i].data(), two.params[i].data(),
                               one.params[i].size() * sizeof(float)))
          << "parameter " << i;
    // A sum per stage and step, the first before the step's last stage
    // use (the middle step, with no targets, sums zeros after its none).
    const size_t stages = ranks.uses_at_start.size() / 3;
    ASSERT_EQ(ranks.uses_at_start.size(), 3 * stages);
    const int64_t uses_per_step = ranks.uses_seen / 2;
    EXPECT_LT(ranks.uses_at_start[0], uses_per_step);
    EXPECT_LT(ranks.uses_at_start[2 * stages], 2 * uses_per_step);
    // Each sum but a step's last waited for after another stage use (the
    // middle step computes nothing).
    ASSERT_EQ(ranks.uses_at_wait.size(), ranks.uses_at_start.size());
    for (size_t step : {size_t{0}, size_t{2}})
      for (size_t k = step * stages; k + 1 < (step + 1) * stages; ++k)
        EXPECT_GT(ranks.uses_at_wait[k], ranks.uses_at_start[k]) << "sum " << k;
  }
}

}  // namespace
}  // namespace lt::exec
