// ZeRO-1's streaming updates overlap the next forward, in one process.
// Over the weights shared by the ranks of a host (exec/shared_weights.h,
// Note [Weights shared by the ranks of a host]) this process is local rank
// 0 of 2, and a test thread plays local rank 1, publishing its updates
// through the same memory.
//  - The streaming executor with ZeRO-1 over the shared weights trains as
//    the one-process streaming executor with AdamW (the reference: that
//    executor, checked against the resident one and PyTorch by its own
//    tests): losses and weights within 1e-6.
//  - Its updates overlap the next forward: with local rank 1 late by
//    300 ms on the last stage's update, the next step's first forward
//    starts before that update ends, while the forward of a stage still
//    waits for local rank 1's update of that stage.
//  - A wait names the local rank that does not publish, within the timeout.
// Without shared weights (Note [Overlapped all-gathers]), with a stand-in
// for the ranks whose last stage's all-gather takes 300 ms: the same
// losses and weights, the next forward starts before that gather ends, and
// each stage's forward after its own gather.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

#include "core/random.h"
#include "exec/shared_weights.h"
#include "exec/stand_in_device.h"
#include "exec/streaming.h"
#include "exec/zero_optimizer.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "support/executor_steps.h"
#include "support/random_batch.h"

namespace lt::exec {
namespace {

using Clock = std::chrono::steady_clock;

models::CausalLM fixture() {
  return io::load_hf_model(std::filesystem::path(LT_SOURCE_DIR) /
                           "tests/models/fixtures/families/qwen3");
}

std::vector<std::vector<data::Batch>> batches(const models::CausalLM& model) {
  Generator gen(7);
  std::vector<std::vector<data::Batch>> out(3);
  for (auto& step : out)
    step.push_back(testing::random_token_batch(gen, 2, 9, model.config().vocab_size));
  return out;
}

optim::AdamWOptions adam_options() {
  optim::AdamWOptions o;
  o.lr = 3e-3;
  return o;
}

// One rank: sums are the values themselves, a reduce-scatter hands the
// whole buffer to the one shard; the all-gathers of the weights take time:
// the last of `groups` completes 300 ms after it starts (when each
// completed is kept).
class OneRank final : public CrossRankSum {
 public:
  explicit OneRank(size_t groups) : groups_(groups) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void sum(std::span<double>) override {}
  void sum(const std::vector<Tensor>&) override {}
  void reduce_scatter(const Tensor& flat, const Tensor& shard) override { shard.copy_(flat); }
  void all_gather(const Tensor&) override {}
  void start_all_gather(const Tensor&) override {
    in_flight_.push_back({started_++ % groups_, Clock::now()});
  }
  void wait_for_sums() override { wait_for_oldest_sums(in_flight_.size()); }
  void wait_for_oldest_sums(size_t count) override {
    for (size_t k = 0; k < count && !in_flight_.empty(); ++k) {
      const auto [group, start] = in_flight_.front();
      if (group == groups_ - 1)
        std::this_thread::sleep_until(start + std::chrono::milliseconds(300));
      gathered.push_back(Clock::now());
      in_flight_.erase(in_flight_.begin());
    }
  }
  std::vector<Clock::time_point> gathered;  // per gather, in start order

 private:
  size_t groups_, started_ = 0;
  std::vector<std::pair<size_t, Clock::time_point>> in_flight_;
};

// When each stage's forward (the head's step) starts, per step, through
// StreamingOptions::observe_use.
struct ForwardStarts {
  std::vector<std::vector<Clock::time_point>> at;
  std::vector<StageUse> uses;
  int step = -1;
  ForwardStarts(int steps, size_t stages)
      : at(static_cast<size_t>(steps), std::vector<Clock::time_point>(stages)) {}
  std::function<void(size_t, bool)> observer() {
    return [this](size_t u, bool computed) {
      if (computed) return;
      if (u == 0) ++step;
      if (uses[u].work == StageWork::Forward || uses[u].work == StageWork::HeadStep)
        at[static_cast<size_t>(step)][static_cast<size_t>(uses[u].stage)] = Clock::now();
    };
  }
};

testing::ExecutorRun one_process_streaming() {
  models::CausalLM model = fixture();
  optim::AdamW adam(model.parameters(), adam_options(), {"norm"});
  StandInDevice device(StandInOptions{});
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(model.config().num_hidden_layers);
  StreamingExecutor executor(model, adam, device, so);
  return testing::run_executor_steps(executor, model, batches(model), 1e9);
}

// The streaming executor over `model` with ZeRO-1 (`zero` over `ranks`),
// its forwards' starts recorded in `forward`.
testing::ExecutorRun run_zero(models::CausalLM& model, ZeroOptimizer& zero, CrossRankSum& ranks,
                              ForwardStarts& forward) {
  StandInDevice device(StandInOptions{});
  StreamingOptions so;
  so.schedule = Schedule::all_gpu(model.config().num_hidden_layers);
  so.ranks = &ranks;
  so.zero = &zero;
  so.observe_use = forward.observer();
  StreamingExecutor executor(model, zero, device, so);
  forward.uses = executor.stage_uses();
  return testing::run_executor_steps(executor, model, batches(model), 1e9);
}

void expect_same_run(const testing::ExecutorRun& run, const testing::ExecutorRun& reference) {
  ASSERT_EQ(run.stats.size(), reference.stats.size());
  for (size_t s = 0; s < run.stats.size(); ++s)
    EXPECT_NEAR(run.stats[s].loss, reference.stats[s].loss, 1e-6) << "step " << s;
  for (size_t i = 0; i < run.params.size(); ++i)
    for (size_t j = 0; j < run.params[i].size(); ++j)
      ASSERT_NEAR(run.params[i][j], reference.params[i][j], 1e-6) << "parameter " << i;
}

// A host's memory for `model` and `groups` groups, 2 local ranks.
struct HostMemory {
  std::shared_ptr<void> memory;
  size_t bytes = 0;
  HostMemory(const models::CausalLM& model, size_t groups) {
    bytes = SharedWeights::bytes_for(model.parameters(), groups, 2, false);
    memory = std::shared_ptr<void>(std::aligned_alloc(64, (bytes + 63) / 64 * 64), std::free);
    std::memset(memory.get(), 0, bytes);
  }
};

TEST(SharedWeights, StreamingZeroTrainsAsOneProcessAndOverlapsTheNextForward) {
  const testing::ExecutorRun reference = one_process_streaming();
  models::CausalLM model = fixture();
  const std::vector<size_t> groups = streaming_zero_groups(model);
  ASSERT_EQ(groups.size(), model.stages().size());  // every stage has parameters
  HostMemory host(model, groups.size());
  SharedWeights rank0(host.memory, host.memory.get(), host.bytes, model.parameters(), groups.size(),
                      0, 2, false, 20);
  SharedWeights rank1(host.memory, host.memory.get(), host.bytes, model.parameters(), groups.size(),
                      1, 2, false, 20);
  rank0.write_weights();
  rank0.adopt();
  OneRank one(groups.size());
  ZeroOptimizer zero(model.parameters(), adam_options(), {"norm"}, one, groups);
  zero.share_weights(rank0);

  // Local rank 1 publishes each group once rank 0 has, the last 300 ms late.
  const size_t last = groups.size() - 1;
  constexpr int kSteps = 3;
  std::vector<std::vector<Clock::time_point>> published(
      kSteps, std::vector<Clock::time_point>(groups.size()));
  std::thread other([&] {
    for (int k = 0; k < kSteps; ++k) {
      for (size_t g = 0; g < groups.size(); ++g) {
        while (rank0.published_by(g, 0) <= k)
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        if (g == last) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        published[static_cast<size_t>(k)][g] = Clock::now();
        rank1.publish(g);
      }
    }
  });

  ForwardStarts forward(kSteps, groups.size());
  const testing::ExecutorRun shared = run_zero(model, zero, one, forward);
  other.join();

  expect_same_run(shared, reference);

  for (size_t k = 0; k + 1 < kSteps; ++k) {
    // The next forward did not wait for the last stage's update...
    EXPECT_LT(forward.at[k + 1][0], published[k][last]) << "step " << k + 1;
    // ...but each stage's forward waited for local rank 1's update of it.
    for (size_t g = 0; g < groups.size(); ++g)
      EXPECT_GT(forward.at[k + 1][g], published[k][g]) << "step " << k + 1 << " stage " << g;
  }
}

TEST(SharedWeights, AWaitNamesTheLocalRankThatDoesNotPublish) {
  models::CausalLM model = fixture();
  HostMemory host(model, 1);
  SharedWeights rank0(host.memory, host.memory.get(), host.bytes, model.parameters(), 1, 0, 2,
                      false, 0.3);
  SharedWeights rank1(host.memory, host.memory.get(), host.bytes, model.parameters(), 1, 1, 2,
                      false, 0.3);
  rank0.publish(0);
  const auto start = Clock::now();
  try {
    rank0.wait_for(0, "the update of stage 'x'");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("local rank 1 of this host to finish the update of "
                                         "stage 'x'"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("dist.timeout_s = 0.3"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  rank1.publish(0);
  rank0.wait_for(0, "the update of stage 'x'");  // now at once
  // Adopting before local rank 0 wrote is refused.
  EXPECT_THROW(rank1.adopt(), Error);
}

TEST(StreamingZero, AllGathersOverlapTheNextForward) {
  const testing::ExecutorRun reference = one_process_streaming();
  models::CausalLM model = fixture();
  const std::vector<size_t> groups = streaming_zero_groups(model);
  ASSERT_EQ(groups.size(), model.stages().size());  // every stage has parameters
  OneRank ranks(groups.size());
  ZeroOptimizer zero(model.parameters(), adam_options(), {"norm"}, ranks, groups);
  constexpr int kSteps = 3;
  ForwardStarts forward(kSteps, groups.size());
  const testing::ExecutorRun run = run_zero(model, zero, ranks, forward);
  expect_same_run(run, reference);
  // Every step's gathers, the last step's finished by sync().
  ASSERT_EQ(ranks.gathered.size(), kSteps * groups.size());
  const size_t last = groups.size() - 1;
  for (size_t k = 0; k + 1 < kSteps; ++k) {
    const auto gathered = [&](size_t g) { return ranks.gathered[k * groups.size() + g]; };
    // The next forward did not wait for the last stage's gather...
    EXPECT_LT(forward.at[k + 1][0], gathered(last)) << "step " << k + 1;
    // ...but each stage's forward waited for its own.
    for (size_t g = 0; g < groups.size(); ++g)
      EXPECT_GT(forward.at[k + 1][g], gathered(g)) << "step " << k + 1 << " stage " << g;
  }
}

}  // namespace
}  // namespace lt::exec
