// A run whose loss or gradient turns non-finite skips the updates, logs
// them, and stops after train.max_bad_steps such steps in a row with a
// non-zero exit and a message naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "io/hf_model.h"
#include "support/cli_run.h"
#include "train/checkpoint.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

bool finite_number(const nlohmann::json& v) {
  return v.is_number() && std::isfinite(v.get<double>());
}

TEST(NonFinite, SkipsUpdatesAndStopsAfterMaxBadSteps) {
  TempDir tmp("nonfinite");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const fs::path out = tmp / "out";
  // lr 1e30: the first update throws GPT-2's weights to ~1e30; the layer
  // norms' squares overflow f32 and every later loss is NaN.
  std::string output;
  const int code = run_program(
      {"train", "--no-sample",           "--set", "model.path=" + fixture("gpt2").string(),
       "--set", "model.init=pretrained", "--set", "data.path=" + (tmp / "data.jsonl").string(),
       "--set", "data.format=tokens",    "--set", "data.pack=false",
       "--set", "train.steps=50",        "--set", "train.batch_size=2",
       "--set", "train.seq_len=16",      "--set", "train.grad_clip=0",
       "--set", "train.save_every=1",    "--set", "train.keep_last=10",
       "--set", "train.max_bad_steps=3", "--set", "optim.lr=1e30",
       "--set", "sched.name=constant",   "--set", "sched.warmup_steps=0",
       "--set", "sched.min_lr=0",        "--set", "out.dir=" + out.string()},
      tmp / "run.log", &output);
  EXPECT_NE(code, 0) << output;
  EXPECT_GT(code, 0) << "should exit with an error, not die of a signal:\n" << output;
  EXPECT_NE(output.find("train.max_bad_steps"), std::string::npos) << output;
  EXPECT_NE(output.find("update skipped"), std::string::npos) << output;

  const auto metrics = read_metrics(out);
  ASSERT_EQ(metrics.size(), 4u) << output;  // one good step, then 3 bad ones
  EXPECT_TRUE(finite_number(metrics[0].at("loss")));
  EXPECT_FALSE(metrics[0].contains("skipped"));
  for (size_t i = 1; i < 4; ++i) {
    EXPECT_EQ(metrics[i].value("skipped", false), true) << metrics[i].dump();
    // JSON has no NaN: a non-finite loss is written as null.
    EXPECT_FALSE(finite_number(metrics[i].at("loss"))) << metrics[i].dump();
  }
  // The good step saved; the bad ones did not (Note [No save on a
  // non-finite streak]), each saying why.
  ASSERT_TRUE(fs::exists(out / "step-1")) << output;
  EXPECT_EQ(read_checkpoint(out / "step-1").state.consecutive_bad_steps, 0);
  for (const char* step : {"step-2", "step-3", "step-4"}) EXPECT_FALSE(fs::exists(out / step));
  EXPECT_MENTIONS(output,
                  "no step-2 checkpoint: the last 1 step had a non-finite loss or gradient, and "
                  "a save now could replace a good checkpoint (train.keep_last)");
  // Numbered as the progress bar counts, and as metrics.jsonl does.
  EXPECT_MENTIONS(output, "step 2 (\"step\": 1 in metrics.jsonl): non-finite loss or gradient");
}

// The user's case: a resume with a mistyped optim.lr (1e39) wrote inf into
// the weights; its periodic saves during the NaN steps that followed pruned
// the good step-2 and step-4 by keep_last, and the stopping message then
// said to resume from a checkpoint before them. They stay now, and the run
// ends unsaved, naming the weights.
TEST(NonFinite, NonFiniteStepsNeitherSaveNorPruneTheGoodCheckpoints) {
  TempDir tmp("nonfinite_keep");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const fs::path out = tmp / "out";
  const std::vector<std::string> base = {"train.save_every=2", "train.keep_last=2",
                                         "train.grad_clip=0", "sched.name=constant",
                                         "sched.warmup_steps=0"};
  std::vector<std::string> first = base;
  first.push_back("train.steps=4");
  train_quietly(fixture_config(fixture("gpt2"), tmp / "data.jsonl", out, first));
  const std::string step4 = read_text(out / "step-4" / "model.safetensors");
  std::vector<std::string> resumed = base;
  for (const char* s : {"train.steps=9", "train.max_bad_steps=20", "optim.lr=1e39"})
    resumed.emplace_back(s);
  TrainConfig config = fixture_config(fixture("gpt2"), tmp / "data.jsonl", out, resumed);
  const std::string e = training_error(config, (out / "step-4").string());
  EXPECT_MENTIONS(e, "stopping without a save: the last");
  EXPECT_MENTIONS(e, "the model's weights hold NaN or inf");
  EXPECT_TRUE(fs::exists(out / "step-2"));
  ASSERT_TRUE(fs::exists(out / "step-4"));
  EXPECT_EQ(read_text(out / "step-4" / "model.safetensors"), step4);
  for (const char* step : {"step-6", "step-8", "step-9"}) EXPECT_FALSE(fs::exists(out / step));

  // The same with the masters and states of every stage on disk, read back
  // to be checked (they were not: the last save wrote inf and pruned step-2).
  const fs::path disk = tmp / "disk";
  std::vector<std::string> staged = first;
  for (const char* s : {"exec.mode=offload", "exec.state_placement=disk"}) staged.emplace_back(s);
  train_quietly(fixture_config(fixture("gpt2"), tmp / "data.jsonl", disk, staged));
  std::vector<std::string> staged_resumed = resumed;
  for (const char* s : {"exec.mode=offload", "exec.state_placement=disk"})
    staged_resumed.emplace_back(s);
  const std::string on_disk =
      training_error(fixture_config(fixture("gpt2"), tmp / "data.jsonl", disk, staged_resumed),
                     (disk / "step-4").string());
  EXPECT_MENTIONS(on_disk, "stopping without a save: the last");
  EXPECT_MENTIONS(on_disk, "the model's weights hold NaN or inf");
  EXPECT_TRUE(fs::exists(disk / "step-2"));
  EXPECT_FALSE(fs::exists(disk / "step-9"));

  // A save after every step, keep_last 1: the resumed run's first step has
  // a finite loss, and its update writes inf. That step is not a bad one,
  // yet its save (which pruned step-4, the only good checkpoint) waits.
  const fs::path every = tmp / "every";
  std::vector<std::string> each = {"train.save_every=1", "train.keep_last=1", "train.grad_clip=0",
                                   "sched.name=constant", "sched.warmup_steps=0"};
  std::vector<std::string> four = each;
  four.push_back("train.steps=4");
  train_quietly(fixture_config(fixture("gpt2"), tmp / "data.jsonl", every, four));
  for (const char* s : {"train.steps=9", "train.max_bad_steps=3", "optim.lr=1e39"})
    each.emplace_back(s);
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const std::string stopped =
      training_error(fixture_config(fixture("gpt2"), tmp / "data.jsonl", every, each),
                     (every / "step-4").string());
  const std::string said =
      ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(stopped, "train.max_bad_steps = 3");
  EXPECT_MENTIONS(said, "no step-5 checkpoint: step 5's update left NaN or inf in the weights");
  EXPECT_TRUE(fs::exists(every / "step-4" / "trainer_state.json"));
  for (const char* step : {"step-5", "step-6", "step-7"}) EXPECT_FALSE(fs::exists(every / step));
}

// The llama fixture (untied) with a NaN in token 96's embedding row, saved
// in `dir`: a row only text holding token 96 reads.
fs::path llama_with_a_nan_in_row_96(const fs::path& dir) {
  models::CausalLM model = io::load_hf_model(fixture("llama"));
  {
    NoGradGuard no_grad;
    for (auto& [name, w] : model.parameters())
      if (name == "embed.tokens.weight") w.detach().data<float>()[96 * w.shape()[1]] = NAN;
  }
  io::save_hf_model(model, dir, DType::F32, {}, fixture("llama") / "config.json");
  return dir;
}

// A NaN in a row of the embedding no text uses leaves every loss finite:
// the run warns of it at the start and saves as before (the first version
// of Note [No save on a non-finite streak] refused every save of such a
// run, then failed it saying an update wrote the NaN).
TEST(NonFinite, NanTheStartingWeightsHeldInAnUnusedRowIsSavedWithAWarning) {
  TempDir tmp("nonfinite_unused_row");
  write_random_tokens(tmp / "data.jsonl", 8, 50, 5);  // ids below 50 only
  const fs::path model_dir = llama_with_a_nan_in_row_96(tmp / "model");
  const TrainConfig config = fixture_config(model_dir, tmp / "data.jsonl", tmp / "out",
                                            {"train.steps=4", "train.save_every=2"});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  train_quietly(config);
  const std::string said =
      ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(said, "warning: the starting weights (model.path " + model_dir.string() +
                            ") hold NaN or inf, in model.embed_tokens.weight (1 value)");
  EXPECT_TRUE(fs::exists(tmp / "out" / "step-2" / "trainer_state.json")) << said;
  EXPECT_TRUE(fs::exists(tmp / "out" / "step-4" / "trainer_state.json")) << said;
  EXPECT_EQ(said.find("no step-"), std::string::npos) << said;
}

// A streak that ends: rows holding token 96, whose embedding row is NaN,
// give non-finite steps (skipped: the row stays as it was), the others
// finite ones. A periodic save that falls on a bad step waits, and the
// next finite step saves in its place.
TEST(NonFinite, APeriodicSaveThatWaitedIsMadeAfterTheNextFiniteStep) {
  TempDir tmp("nonfinite_streak_ends");
  std::vector<std::vector<int64_t>> rows;
  for (int64_t r = 0; r < 8; ++r) {
    std::vector<int64_t> row = {5 + r, 9, 13, 21, 30 + r};
    if (r % 2 == 1) row[2] = 96;
    rows.push_back(row);
  }
  write_tokens_jsonl(tmp / "data.jsonl", rows, rows);
  const fs::path model_dir = llama_with_a_nan_in_row_96(tmp / "model");
  const auto run = [&](const std::string& out, int64_t save_every) {
    const TrainConfig config = fixture_config(
        model_dir, tmp / "data.jsonl", tmp / out,
        {"train.steps=8", "train.batch_size=1", "train.max_bad_steps=8", "data.pack=false",
         "train.save_every=" + std::to_string(save_every), "train.keep_last=20"});
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    train_quietly(config);
    return ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  };
  run("probe", 0);
  const auto lines = read_metrics(tmp / "probe");
  ASSERT_EQ(lines.size(), 8u);
  // A step count N whose step was bad and whose next was finite.
  int64_t waits = 0;
  for (int64_t n = 2; n < 7 && waits == 0; ++n)  // step n + 1 not the last
    if (lines[n - 1].value("skipped", false) && !lines[n].value("skipped", false)) waits = n;
  ASSERT_GT(waits, 0) << "the data gives no bad step followed by a finite one";
  const std::string said = run("out", waits);
  EXPECT_MENTIONS(said, "no step-" + std::to_string(waits) + " checkpoint: the last");
  EXPECT_FALSE(fs::exists(tmp / "out" / ("step-" + std::to_string(waits))));
  EXPECT_TRUE(
      fs::exists(tmp / "out" / ("step-" + std::to_string(waits + 1)) / "trainer_state.json"))
      << said;
}

TEST(NonFinite, AGradientOverflowWithAFiniteLossIsSkippedToo) {
  TempDir tmp("nonfinite_grad");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const fs::path out = tmp / "out";
  // Llama's RMSNorm maps the ~1e30 weights to a uniform prediction (a finite
  // loss, ln 97) while the gradient overflows.
  TrainConfig config = fixture_config(fixture("llama"), tmp / "data.jsonl", out,
                                      {"train.steps=20", "train.max_bad_steps=2", "optim.lr=1e30"});
  try {
    train_quietly(config);
    ADD_FAILURE() << "the run did not stop";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.max_bad_steps = 2"), std::string::npos) << e.what();
  }
  const auto metrics = read_metrics(out);
  ASSERT_EQ(metrics.size(), 3u);
  EXPECT_FALSE(metrics[0].contains("skipped"));
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(metrics[i].value("skipped", false), true) << metrics[i].dump();
    EXPECT_FALSE(finite_number(metrics[i].at("grad_norm"))) << metrics[i].dump();
  }
}

// A NaN in the weights a run starts from makes every step non-finite; the
// stop names the tensor and where it came from, not the learning rate.
TEST(NonFinite, NanInTheStartingWeightsIsNamedWhenTheRunStops) {
  TempDir tmp("nonfinite_weights");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  models::CausalLM model = io::load_hf_model(fixture("llama"));
  const fs::path model_dir = tmp / "model";
  {
    NoGradGuard no_grad;
    for (auto& [name, w] : model.parameters())
      if (name == "block.1.mlp.up_proj.weight")
        w.detach().data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  }
  io::save_hf_model(model, model_dir, DType::F32, {}, fixture("llama") / "config.json");
  TrainConfig config = fixture_config(model_dir, tmp / "data.jsonl", tmp / "out",
                                      {"train.steps=10", "train.max_bad_steps=2"});
  try {
    train_quietly(config);
    ADD_FAILURE() << "the run did not stop";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("train.max_bad_steps = 2"), std::string::npos) << what;
    EXPECT_NE(what.find("model.layers.1.mlp.up_proj.weight (1 value)"), std::string::npos) << what;
    EXPECT_NE(what.find("model.path " + model_dir.string()), std::string::npos) << what;
    EXPECT_EQ(what.find("lower optim.lr"), std::string::npos) << what;
  }
  // A run shorter than train.max_bad_steps fails at its end the same way,
  // saving nothing: it exited 0 and saved the NaN weights as step-2.
  try {
    train_quietly(fixture_config(model_dir, tmp / "data.jsonl", tmp / "short", {"train.steps=2"}));
    ADD_FAILURE() << "the run did not fail";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("none of this run's 2 steps applied an update (the last 2 had a "
                        "non-finite loss or gradient), so nothing is saved"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("model.layers.1.mlp.up_proj.weight (1 value)"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(tmp / "short" / "step-2"));
  // Nor a save on the way (Note [Taking over out.dir]): it held the NaN
  // weights the run started from. Nor, under out.overwrite, is an earlier
  // run's checkpoint removed.
  train_quietly(
      fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "saving", {"train.steps=2"}));
  try {
    train_quietly(fixture_config(model_dir, tmp / "data.jsonl", tmp / "saving",
                                 {"train.steps=4", "train.save_every=2", "out.overwrite=true"}));
    ADD_FAILURE() << "the run did not fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("applied an update (the last 4 had a non-finite loss "
                                         "or gradient), so nothing is saved"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::exists(tmp / "saving" / "step-2" / "trainer_state.json"));
  EXPECT_EQ(read_metrics(tmp / "saving").size(), 2u);
  EXPECT_EQ(read_metrics(tmp / "saving").front().at("loss").is_number(), true);
  // eval reads the folder to use it: it says so before its NaN loss.
  const lt::testing::CliResult eval =
      lt::testing::run_lazytrain("eval --model " + model_dir.string() + " --data " +
                                 (tmp / "data.jsonl").string() + " --seq-len 16");
  EXPECT_NE(eval.out.find("warning: " + model_dir.string() +
                          " holds weights that are NaN or inf, so what the model computes is "
                          "NaN: model.layers.1.mlp.up_proj.weight (1 value)"),
            std::string::npos)
      << eval.out;
}

// The demo's model at lr 1e6 collapses on its first update (loss ln 426,
// every logit alike) with finite numbers: the gradient is exactly zero from
// then on and the run trained nothing, saved and exited 0 without a word.
// It warns once; at the demo's own rate, no warning.
TEST(NonFinite, AGradientOfExactlyZeroIsSaidOnce) {
  TempDir tmp("zero_gradient");
  const std::string demo = std::string(LT_SOURCE_DIR) + "/assets/demo/addition/";
  for (const auto& [lr, warned] : {std::pair{"1e6", true}, std::pair{"3e-3", false}}) {
    std::string output;
    const fs::path out = tmp / (std::string("lr_") + lr);
    ASSERT_EQ(run_program({"train", "--no-sample",
                           "--set", "model.path=" + demo + "model",
                           "--set", "data.path=" + demo + "train.jsonl",
                           "--set", "data.tokenizer=" + demo + "tokenizer",
                           "--set", "train.steps=6",
                           "--set", "train.batch_size=8",
                           "--set", "train.seq_len=28",
                           "--set", std::string("optim.lr=") + lr,
                           "--set", "sched.name=constant",
                           "--set", "sched.warmup_steps=0",
                           "--set", "out.dir=" + out.string()},
                          tmp / "run.log", &output),
              0)
        << output;
    const size_t at = output.find("had a gradient of exactly zero");
    EXPECT_EQ(at != std::string::npos, warned) << lr << ": " << output;
    if (warned) {
      EXPECT_EQ(output.find("had a gradient of exactly zero", at + 1), std::string::npos)
          << "said once: " << output;
      EXPECT_NE(output.find("optim.lr 1e+06"), std::string::npos) << output;
    }
  }
}

// optim.lr 1e6 (a slip for 1e-6) was taken without a word: the run only
// learnt of it steps later, from a collapsed model. The start says it,
// naming optim.lr, where it was set and the usual range; the run goes on.
// A rate far below the range (1e-12) is said too; the demo's 3e-3 is not.
TEST(NonFinite, ALearningRateFarOutsideTheUsualRangeIsSaidAtTheStart) {
  TempDir tmp("lr_warning");
  const std::string demo = std::string(LT_SOURCE_DIR) + "/assets/demo/addition/";
  // The config file sets the rate on its line 4; --set overrides name themselves.
  write_text(tmp / "run.yaml", "train:\n  steps: 1\noptim:\n  lr: 1.0e+6\n");
  const std::string usual =
      "the learning rates language models train at (about 1e-6 to 1e-4 to fine-tune one, up to "
      "a few 1e-3 from scratch)";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "warning: " + (tmp / "run.yaml").string() + " (line 4): optim.lr is 1e+06, far above " +
               usual},
      {"optim.lr=1e-12", "warning: --set optim.lr=1e-12: optim.lr is 1e-12, far below " + usual},
      {"optim.lr=3e-3", ""},
  };
  for (const auto& [lr, warning] : cases) {
    std::string output;
    std::vector<std::string> args = {"train",
                                     (tmp / "run.yaml").string(),
                                     "--no-sample",
                                     "--set",
                                     "model.path=" + demo + "model",
                                     "--set",
                                     "data.path=" + demo + "train.jsonl",
                                     "--set",
                                     "data.tokenizer=" + demo + "tokenizer",
                                     "--set",
                                     "train.batch_size=4",
                                     "--set",
                                     "train.seq_len=28",
                                     "--set",
                                     "out.dir=" + (tmp / ("out" + lr)).string()};
    if (!lr.empty()) args.insert(args.end(), {"--set", lr});
    ASSERT_EQ(run_program(args, tmp / "run.log", &output), 0) << output;
    if (warning.empty()) {
      EXPECT_EQ(output.find("optim.lr is"), std::string::npos) << output;
    } else {
      // Said before the plan's line, with the run's other remarks on its config.
      const size_t at = output.find(warning);
      ASSERT_NE(at, std::string::npos) << output;
      EXPECT_LT(at, output.find("plan:")) << output;
    }
    // `lazytrain plan` of the same config says it too.
    args[0] = "plan";
    args.erase(args.begin() + 2);  // --no-sample is train's
    ASSERT_EQ(run_program(args, tmp / "plan.log", &output), 0) << output;
    EXPECT_EQ(output.find("optim.lr is") != std::string::npos, !warning.empty()) << output;
    if (!warning.empty()) {
      EXPECT_MENTIONS(output, warning);
    }
  }
}

}  // namespace
}  // namespace lt::train::testing
