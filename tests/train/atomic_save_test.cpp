// Checkpoints survive SIGKILL at any moment: the program is killed over and
// over while it saves every step; every step-N folder left behind is a
// complete, loadable checkpoint, and `--resume latest` finishes the run.
#include <gtest/gtest.h>

#include "io/hf_model.h"
#include "train/checkpoint.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

// Every step-N folder in `out` holds a complete checkpoint of step N.
void expect_checkpoints_complete(const fs::path& out, const std::string& when) {
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) != 0) continue;
    SCOPED_TRACE(when + ": " + name);
    EXPECT_TRUE(fs::exists(entry.path() / "trainer_state.json"));
    try {
      io::load_hf_model(entry.path());
      CheckpointContents ck = read_checkpoint(entry.path());
      EXPECT_EQ("step-" + std::to_string(ck.state.step), name);
      EXPECT_FALSE(ck.optimizer_state.empty());
    } catch (const std::exception& e) {
      ADD_FAILURE() << "does not load: " << e.what();
    }
  }
}

std::vector<std::string> train_args(const fs::path& data, const fs::path& out, int64_t steps) {
  return {"train", "--no-sample",
          "--set", "model.path=" + fixture("gpt2").string(),
          "--set", "model.init=pretrained",
          "--set", "data.path=" + data.string(),
          "--set", "data.format=tokens",
          "--set", "data.pack=false",
          "--set", "train.steps=" + std::to_string(steps),
          "--set", "train.batch_size=2",
          "--set", "train.seq_len=16",
          "--set", "train.save_every=1",
          "--set", "train.keep_last=2",
          "--set", "sched.name=constant",
          "--set", "sched.min_lr=0",
          "--set", "sched.warmup_steps=0",
          "--set", "optim.lr=1e-3",
          "--set", "out.dir=" + out.string()};
}

TEST(AtomicSave, SigkillDuringSavesNeverLeavesABrokenCheckpoint) {
  TempDir tmp("atomic");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const fs::path out = tmp / "out";
  const int64_t steps = 100000;  // never reached: every run is killed
  // Kill at staggered points: during start-up, early steps and many saves in.
  const int delays_ms[] = {40, 150, 230, 310, 370, 450, 520, 610};
  int killed_with_progress = 0;
  for (size_t k = 0; k < std::size(delays_ms); ++k) {
    auto args = train_args(tmp / "data.jsonl", out, steps);
    bool has_checkpoint = false;
    if (fs::exists(out)) {
      for (const auto& e : fs::directory_iterator(out)) {
        has_checkpoint |= e.path().filename().string().rfind("step-", 0) == 0;
      }
    }
    if (has_checkpoint) args.insert(args.begin() + 1, {"--resume", "latest"});
    const size_t lines_before =
        fs::exists(out / "metrics.jsonl") ? count_lines(out / "metrics.jsonl") : 0;
    Child child(args, tmp / ("run" + std::to_string(k) + ".log"));
    // Wait for the first step of this run, then the stagger.
    if (k > 0) wait_for_lines(child, out / "metrics.jsonl", lines_before + 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(delays_ms[k]));
    ASSERT_TRUE(child.running()) << "run " << k << " ended early:\n" << child.output();
    child.signal(SIGKILL);
    const int status = child.wait();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    if (fs::exists(out)) {
      expect_checkpoints_complete(out, "after kill " + std::to_string(k));
      killed_with_progress += count_lines(out / "metrics.jsonl") > lines_before;
    }
  }
  EXPECT_GE(killed_with_progress, 4) << "the runs made too little progress to test anything";

  // Resume to the end: a small target just past the newest checkpoint.
  fs::path latest = resolve_checkpoint("latest", out);
  const int64_t at = read_checkpoint(latest).state.step;
  ASSERT_GT(at, 0);
  std::cout << std::size(delays_ms) << " kills, " << killed_with_progress
            << " after progress; resuming at step " << at << "\n";
  auto args = train_args(tmp / "data.jsonl", out, at + 3);
  args.insert(args.begin() + 1, {"--resume", "latest"});
  std::string output;
  const int code = run_program(args, tmp / "final.log", &output);
  ASSERT_EQ(code, 0) << output;
  EXPECT_NE(output.find("resumed from"), std::string::npos) << output;
  expect_checkpoints_complete(out, "at the end");
  EXPECT_TRUE(fs::exists(out / ("step-" + std::to_string(at + 3)) / "trainer_state.json"));
  // metrics.jsonl reads as one run: steps 0 .. at+2, once each.
  auto metrics = read_metrics(out);
  ASSERT_EQ(metrics.size(), static_cast<size_t>(at + 3));
  for (size_t i = 0; i < metrics.size(); ++i) {
    EXPECT_EQ(metrics[i].at("step").get<int64_t>(), static_cast<int64_t>(i));
  }
  // No hidden leftovers of the killed saves remain after a clean run.
  for (const auto& e : fs::directory_iterator(out)) {
    EXPECT_NE(e.path().filename().string().rfind(".step-", 0), 0u) << e.path();
  }
}

TEST(AtomicSave, LeftoverTemporaryFolderIsRemovedAndNeverTaken) {
  TempDir tmp("leftover");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const fs::path out = tmp / "out";
  train_quietly(fixture_config(fixture("llama"), tmp / "data.jsonl", out, {"train.steps=2"}));
  ASSERT_TRUE(fs::exists(out / "step-2" / "trainer_state.json"));

  // A crashed save of step 7: a complete-looking copy under the temp name,
  // carrying the marker a save writes first, and a step-9 folder that never
  // got its trainer_state.json.
  const fs::path leftover = out / ".step-7.tmp-123";
  fs::copy(out / "step-2", leftover, fs::copy_options::recursive);
  write_text(leftover / ".lazytrain-save", "123\n");
  write_text(leftover / "trainer_state.json",
             R"({"step": 7, "sampler": {"epoch": 0, "position": 0, "offset": 0}})");
  fs::create_directories(out / "step-9");
  fs::copy_file(out / "step-2" / "model.safetensors", out / "step-9" / "model.safetensors");
  EXPECT_EQ(resolve_checkpoint("latest", out), out / "step-2");

  TrainRunResult r = train_quietly(
      fixture_config(fixture("llama"), tmp / "data.jsonl", out, {"train.steps=4"}), "latest");
  EXPECT_EQ(r.steps_done, 4);
  EXPECT_FALSE(fs::exists(leftover));
  auto metrics = read_metrics(out);
  ASSERT_EQ(metrics.size(), 4u);  // resumed at step 2, not 7 or 9
  EXPECT_EQ(metrics[2].at("step").get<int64_t>(), 2);
  EXPECT_EQ(resolve_checkpoint("latest", out), out / "step-4");
}

}  // namespace
}  // namespace lt::train::testing
