// The resident executor's gradient norm, which it takes from the
// gradients' grad-ready hooks during the last micro-batch's backward
// (optim/grad_norm_partials.h), against a float64 sum of squares computed
// here from gradients made by the plain engine on an identical model with
// the same micro-batches. Tied embeddings (qwen2, gpt2), one and several
// micro-batches, a frozen parameter (no gradient), and a last micro-batch
// whose targets are all masked (so the armed backward is the one before).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "core/random.h"
#include "exec/resident.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "support/grad_squares.h"
#include "support/random_batch.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;

models::CausalLM load(const std::string& family) {
  return io::load_hf_model(fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families" / family);
}

// Gradients of the global batch by the plain engine (each micro-batch's
// loss over the global target count, as the executor does), then their
// float64 sum of squares. Leaves the model's gradients cleared.
double reference_squared_sum(const models::CausalLM& model,
                             const std::vector<data::Batch>& micro_batches) {
  int64_t targets = 0;
  for (const auto& mb : micro_batches) targets += mb.target_count;
  for (const auto& [name, p] : model.parameters()) p.set_grad(Tensor());
  for (const auto& mb : micro_batches) {
    if (mb.target_count == 0) continue;
    backward(model.loss(mb.ids, mb.targets, static_cast<double>(targets)));
  }
  const double s = lt::testing::grad_squares_f64(model.parameters());
  for (const auto& [name, p] : model.parameters()) p.set_grad(Tensor());
  return s;
}

void copy_parameters(const models::CausalLM& from, const models::CausalLM& to) {
  const auto src = from.parameters();
  const auto dst = to.parameters();
  ASSERT_EQ(src.size(), dst.size());
  for (size_t i = 0; i < src.size(); ++i) dst[i].second.detach().copy_(src[i].second);
}

// Three steps of `micro` micro-batches on `family`; each step's grad_norm
// against the reference on a model holding the executor's current values.
// `freeze`: a parameter name to freeze in both models (no gradient);
// `mask_last`: the last micro-batch of each step has no targets.
void check(const std::string& family, int micro, const std::string& freeze = "",
           bool mask_last = false) {
  models::CausalLM model = load(family);
  models::CausalLM ref = load(family);
  bool frozen = false;
  for (const auto& m : {&model, &ref}) {
    for (const auto& [name, p] : m->parameters()) {
      if (name == freeze) {
        Tensor(p).set_requires_grad(false);
        frozen = true;
      }
    }
  }
  ASSERT_EQ(frozen, !freeze.empty()) << freeze;
  optim::AdamWOptions o;
  o.lr = 3e-3;
  o.weight_decay = 0.01;
  optim::AdamW adam(model.parameters(), o, {"norm"});
  ResidentExecutor executor(model, adam);
  const int64_t vocab = model.config().vocab_size;
  Generator gen(31);
  for (int step = 0; step < 3; ++step) {
    std::vector<data::Batch> batches;
    for (int m = 0; m < micro; ++m) {
      const int64_t seq = 7 + (m % 2) * 3;
      if (mask_last && m == micro - 1) {
        data::Batch b = lt::testing::random_token_batch(gen, 2, seq, vocab);
        for (int64_t i = 0; i < b.targets.numel(); ++i) b.targets.data<int64_t>()[i] = -100;
        b.target_count = 0;
        batches.push_back(b);
      } else {
        batches.push_back(lt::testing::random_token_batch(gen, 2, seq, vocab, {0, 1}));
      }
    }
    copy_parameters(model, ref);
    const double want = std::sqrt(reference_squared_sum(ref, batches));
    StepOptions so;
    so.lr = 3e-3;
    so.max_grad_norm = 0.5;  // clipping on: the norm feeds the update
    const StepStats stats = executor.step(batches, so);
    EXPECT_FALSE(stats.skipped);
    EXPECT_NEAR(stats.grad_norm, want, 1e-12 * want)
        << family << " micro " << micro << " step " << step;
  }
}

TEST(ResidentGradNorm, UntiedOneMicroBatch) {
  check("llama", 1);
}
TEST(ResidentGradNorm, UntiedSeveralMicroBatches) {
  check("llama", 3);
}
TEST(ResidentGradNorm, TiedOneMicroBatch) {
  check("qwen2", 1);
}
TEST(ResidentGradNorm, TiedSeveralMicroBatches) {
  check("qwen2", 3);
  check("gpt2", 2);
}
TEST(ResidentGradNorm, FrozenParameterHasNoGradient) {
  check("llama", 2, "block.0.mlp.up_proj.weight");
}
TEST(ResidentGradNorm, LastMicroBatchWithoutTargets) {
  check("qwen2", 3, "", /*mask_last=*/true);
}

// A non-finite norm (here from an infinite weight: the loss and every
// gradient downstream are NaN) skips the update: the masters are unchanged.
TEST(ResidentGradNorm, NonFiniteNormSkipsTheStep) {
  models::CausalLM model = load("llama");
  const auto params = model.parameters();
  params.back().second.detach().fill_(std::numeric_limits<double>::infinity());
  std::vector<std::vector<double>> before;
  for (const auto& [name, p] : params) before.push_back(p.to_doubles());
  optim::AdamW adam(params, optim::AdamWOptions{}, {"norm"});
  ResidentExecutor executor(model, adam);
  Generator gen(3);
  std::vector<data::Batch> batches = {lt::testing::random_token_batch(gen, 2, 7, 97),
                                      lt::testing::random_token_batch(gen, 2, 5, 97)};
  StepOptions so;
  so.lr = 1e-2;
  const StepStats stats = executor.step(batches, so);
  EXPECT_TRUE(stats.skipped);
  EXPECT_FALSE(std::isfinite(stats.grad_norm));
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i].second.to_doubles(), before[i]) << params[i].first;
  }
}

}  // namespace
}  // namespace lt::exec
