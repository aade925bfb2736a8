// The host memory of a checkpoint saved with every stage's masters and
// optimizer states on disk (exec.state_placement disk): the save reads one
// stage at a time (exec/staged_states.h, train/staged_checkpoint.h), so it
// holds at most the largest stage's masters and states (and a tensor in
// the Hugging Face layout, GPT-2's transposed and fused ones) beyond what
// host memory held when the step ended; reading every stage back first
// (sync(), as saves did before) holds them all. And the files are the
// host-placed run's, byte for byte: the outside reference, for the llama
// layout and for GPT-2's (transposed, fused q/k/v, tied head), adamw and
// adamw8bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/allocator.h"
#include "core/random.h"
#include "exec/staged_states.h"
#include "exec/streaming.h"
#include "io/safetensors.h"
#include "support/fixture_models.h"
#include "support/random_batch.h"
#include "train/checkpoint.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

using lt::testing::TestOptimizer;

constexpr int kLayers = 8;

// Two steps of the stand-in streaming executor; `on_disk`: every stage's
// states on disk in `scratch`.
void train_two_steps(exec::StreamingExecutor& ex, int64_t vocab) {
  Generator gen(9);
  for (int s = 0; s < 2; ++s) {
    exec::StepOptions o;
    o.lr = 3e-3;
    o.max_grad_norm = 0.05;
    ex.step({lt::testing::random_token_batch(gen, 2, 9, vocab),
             lt::testing::random_token_batch(gen, 2, 9, vocab)},
            o);
  }
}

exec::StreamingOptions options(const fs::path& scratch, bool on_disk) {
  exec::StreamingOptions so;
  so.schedule = exec::Schedule::all_gpu(kLayers);
  if (on_disk) {
    so.disk.directory = scratch.string();
    so.states_on_disk.assign(kLayers + 2, true);
  }
  return so;
}

fs::path save(const fs::path& out, const models::CausalLM& model, optim::Optimizer& opt,
              exec::StagedStates* staged) {
  CheckpointOptions o;
  o.staged = staged;
  TrainerState state;
  state.step = 2;
  fs::create_directories(out);  // a run's lock makes out.dir
  return save_checkpoint(out, model, opt.state(), state, o);
}

// What save() adds to host memory at its peak.
template <typename Fn>
int64_t extra_peak(Fn&& fn) {
  const int64_t before = cpu_allocator().stats().current_bytes;
  cpu_allocator().reset_peak();
  fn();
  return cpu_allocator().stats().peak_bytes - before;
}

TEST(StagedSave, HoldsOneStageBeyondTheStepAndWritesTheHostRunsFiles) {
  for (const char* family : {"llama", "gpt2"}) {
    for (TestOptimizer kind : {TestOptimizer::AdamW, TestOptimizer::AdamW8bit}) {
      SCOPED_TRACE(std::string(family) + (kind == TestOptimizer::AdamW ? " adamw" : " adamw8bit"));
      const TempDir tmp("staged_save");
      fs::path host_saved;
      {
        models::CausalLM model = lt::testing::random_fixture_model(family, kLayers);
        auto opt = lt::testing::test_optimizer(model, kind);
        exec::StreamingExecutor ex(model, *opt, std::make_unique<exec::StandInDevice>(),
                                   options(tmp / "scratch", false));
        train_two_steps(ex, model.config().vocab_size);
        ASSERT_EQ(ex.sync_staged(), nullptr);
        ex.sync();
        host_saved = save(tmp / "host", model, *opt, nullptr);
      }
      models::CausalLM model = lt::testing::random_fixture_model(family, kLayers);
      auto opt = lt::testing::test_optimizer(model, kind);
      exec::StreamingExecutor ex(model, *opt, std::make_unique<exec::StandInDevice>(),
                                 options(tmp / "scratch", true));
      train_two_steps(ex, model.config().vocab_size);
      exec::StagedStates* staged = ex.sync_staged();
      ASSERT_NE(staged, nullptr);
      // Each stage's masters and states, by the names the executor gives.
      std::map<std::string, int64_t> bytes;
      for (const auto& [name, p] : model.parameters())
        bytes[name] = static_cast<int64_t>(p.nbytes());
      for (const auto& [name, t] : opt->state()) bytes[name] = static_cast<int64_t>(t.nbytes());
      int64_t largest_stage = 0, all_stages = 0;
      for (size_t s = 0; s < staged->on_disk().size(); ++s) {
        ASSERT_TRUE(staged->on_disk()[s]) << s;
        int64_t stage = 0;
        for (const std::string& name : staged->names(s)) stage += bytes.at(name);
        largest_stage = std::max(largest_stage, stage);
        all_stages += stage;
      }
      fs::path disk_saved;
      const int64_t staged_extra =
          extra_peak([&] { disk_saved = save(tmp / "disk", model, *opt, staged); });
      // A tensor made in the Hugging Face layout (GPT-2's transposed and
      // fused ones) is new memory, with a transposed copy while it is made.
      int64_t largest_hf = 0;
      const io::SafetensorsFile weights(disk_saved / "model.safetensors");
      for (const auto& e : weights.header().entries)
        largest_hf = std::max(largest_hf, static_cast<int64_t>(e.nbytes()));
      const int64_t bound = largest_stage + 2 * largest_hf;
      EXPECT_LE(staged_extra, bound) << "all stages: " << all_stages;
      EXPECT_LT(staged_extra, all_stages);
      for (const char* file : {"model.safetensors", "optimizer.safetensors", "config.json"})
        EXPECT_TRUE(read_text(disk_saved / file) == read_text(host_saved / file)) << file;
      // The bound means something: every stage read back at once (the old
      // way, which frees the gradient slabs first) goes over it.
      const int64_t whole_extra = extra_peak([&] {
        ex.sync();
        save(tmp / "whole", model, *opt, nullptr);
      });
      EXPECT_GT(whole_extra, bound) << "all stages: " << all_stages;
      EXPECT_GT(all_stages, 4 * largest_stage);
    }
  }
}

}  // namespace
}  // namespace lt::train::testing
