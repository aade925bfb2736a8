// Data parallel's gradient buckets (exec/gradient_buckets.h) in one
// process, with a stand-in for the other ranks: MirrorRanks says the world
// has 2 ranks whose shards equal this one's, so every sum doubles. The
// resident executor then divides each loss by twice the target count and
// doubles the gradients back, which is exact in binary floating point: its
// losses, gradient norms and weights must equal the one-process run's bit
// for bit (the outside reference is that run, checked against PyTorch by
// the resident tests). Also: the buckets against a brute-force cut of the
// parameters, and sums started while the backward still runs.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/random.h"
#include "exec/gradient_buckets.h"
#include "exec/resident.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "support/executor_steps.h"
#include "support/random_batch.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;

class MirrorRanks final : public CrossRankSum {
 public:
  // Counts the grad-ready hooks of `model`'s parameters. Made before the
  // executor, so its hook on a parameter runs before the bucket's: a
  // bucket that starts on the backward's last hook saw every count.
  explicit MirrorRanks(const models::CausalLM& model) {
    for (const auto& [name, p] : model.parameters())
      p.register_grad_ready_hook([this](const Tensor&) { ++hooks_fired_; });
  }
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  void sum(std::span<double> values) override {
    for (double& v : values) v *= 2;
  }
  void sum(const std::vector<Tensor>& tensors) override {
    for (const Tensor& t : tensors) {
      float* d = t.data<float>();
      for (int64_t i = 0; i < t.numel(); ++i) d[i] *= 2;
    }
  }
  // Records, per bucket, whether hooks fired after it started (it started
  // inside the backward); sums at the wait.
  void start_sum(const std::vector<Tensor>& tensors) override {
    hooks_at_start_.push_back(hooks_fired_);
    pending_.insert(pending_.end(), tensors.begin(), tensors.end());
  }
  void wait_for_sums() override {
    sum(pending_);
    pending_.clear();
    for (int64_t at : hooks_at_start_) started_in_backward.push_back(at < hooks_fired_);
    hooks_at_start_.clear();
  }
  std::vector<bool> started_in_backward;  // per bucket, over the run

 private:
  int64_t hooks_fired_ = 0;
  std::vector<int64_t> hooks_at_start_;
  std::vector<Tensor> pending_;
};

models::CausalLM load_qwen3() {
  return io::load_hf_model(fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/qwen3");
}

std::vector<std::vector<data::Batch>> batches(int64_t vocab, int micro) {
  Generator gen(7);
  std::vector<std::vector<data::Batch>> out(3);
  for (auto& step : out)
    for (int m = 0; m < micro; ++m) step.push_back(testing::random_token_batch(gen, 2, 9, vocab));
  return out;
}

testing::ExecutorRun run(CrossRankSum* ranks, int64_t bucket_bytes, int micro,
                         MirrorRanks** mirror = nullptr) {
  models::CausalLM model = load_qwen3();
  optim::AdamWOptions o;
  o.lr = 3e-3;
  optim::AdamW adam(model.parameters(), o, {"norm"});
  std::unique_ptr<MirrorRanks> own;
  if (mirror) {
    own = std::make_unique<MirrorRanks>(model);
    ranks = own.get();
    *mirror = own.get();
  }
  ResidentExecutor executor(model, adam, DType::F32, ranks, bucket_bytes);
  auto result =
      testing::run_executor_steps(executor, model, batches(model.config().vocab_size, micro), 0.5);
  if (mirror) own.release();  // the caller reads it; leaked with the test
  return result;
}

void expect_bitwise_equal(const testing::ExecutorRun& a, const testing::ExecutorRun& b) {
  ASSERT_EQ(a.stats.size(), b.stats.size());
  for (size_t s = 0; s < a.stats.size(); ++s) {
    EXPECT_EQ(a.stats[s].loss, b.stats[s].loss) << "step " << s;
    EXPECT_EQ(a.stats[s].grad_norm, b.stats[s].grad_norm) << "step " << s;
  }
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_EQ(0, std::memcmp(a.params[i].data(), b.params[i].data(), a.params[i].size() * 4))
        << "parameter " << i;
}

TEST(GradientBuckets, MirroredRanksGiveOneProcessBitForBit) {
  for (int micro : {1, 2}) {
    const testing::ExecutorRun one = run(nullptr, 0, micro);
    for (int64_t bucket_bytes : {int64_t{1} << 30, int64_t{4096}, int64_t{1}}) {
      MirrorRanks* mirror = nullptr;
      const testing::ExecutorRun two = run(nullptr, bucket_bytes, micro, &mirror);
      SCOPED_TRACE("micro-batches " + std::to_string(micro) + ", bucket bytes " +
                   std::to_string(bucket_bytes));
      expect_bitwise_equal(one, two);
      // Small buckets start inside the backward, one bucket of the whole
      // model after it.
      const auto& inside = mirror->started_in_backward;
      ASSERT_FALSE(inside.empty());
      if (bucket_bytes < (int64_t{1} << 30)) {
        EXPECT_TRUE(inside.front());
      } else {
        EXPECT_EQ(inside, std::vector<bool>(3, false));
      }
      delete mirror;
    }
  }
}

// The buckets against a brute-force cut: parameters in reverse order, a
// new bucket when the next one would pass the size (a large parameter
// alone), frozen parameters left out.
TEST(GradientBuckets, CutTheParametersInReverseBySize) {
  nn::NamedParameters params;
  const std::vector<int64_t> sizes = {3, 100, 1, 1, 40, 7, 1000, 2, 2};
  for (size_t i = 0; i < sizes.size(); ++i) {
    Tensor t = Tensor::zeros({sizes[i]});
    t.set_requires_grad(i != 5);
    params.emplace_back("p" + std::to_string(i), t);
  }
  MirrorRanks ranks(load_qwen3());
  for (int64_t bucket_bytes :
       {int64_t{4}, int64_t{16}, int64_t{200}, int64_t{420}, int64_t{1} << 20}) {
    GradientBuckets buckets(params, bucket_bytes, ranks);
    std::vector<std::vector<size_t>> want;
    int64_t filled = 0;
    for (size_t k = sizes.size(); k-- > 0;) {
      if (k == 5) continue;
      const int64_t bytes = sizes[k] * 4;
      if (want.empty() || (filled > 0 && filled + bytes > bucket_bytes)) {
        want.emplace_back();
        filled = 0;
      }
      want.back().push_back(k);
      filled += bytes;
    }
    EXPECT_EQ(buckets.buckets(), want) << bucket_bytes;
  }
}

}  // namespace
}  // namespace lt::exec
