// SIGINT (and SIGTERM) stop a run cleanly: the current step finishes, a
// checkpoint is saved, a resume hint is printed and the exit status is 0.
// Note [Stopping a run] (train/trainer.cpp): an evaluation in flight is
// abandoned; a second signal ends the process at once by the signal.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>
#include <utility>

#include "train/checkpoint.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

// `through_pipe`: the run's stdout and stderr go to a pipe whose reader
// leaves before the signal, as tee does in `lazytrain train ... | tee log`
// when the terminal's Ctrl-C reaches both.
// `twice`: the signal comes again 5 ms later (a closed terminal's SIGHUPs).
void stop_mid_run(int sig, bool through_pipe = false, bool twice = false) {
  TempDir tmp(std::string("signal") + std::to_string(sig) + (through_pipe ? "pipe" : ""));
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const fs::path out = tmp / "out";
  const int64_t steps = 100000;
  int pipe_fds[2] = {-1, -1};
  if (through_pipe) {
    // Close-on-exec: the run must not hold the read end itself.
    ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
  }
  Child child({"train", "--no-sample",
               "--set", "model.path=" + fixture("qwen3").string(),
               "--set", "model.init=pretrained",
               "--set", "data.path=" + (tmp / "data.jsonl").string(),
               "--set", "data.format=tokens",
               "--set", "data.pack=false",
               "--set", "train.steps=" + std::to_string(steps),
               "--set", "train.batch_size=2",
               "--set", "train.seq_len=16",
               "--set", "train.save_every=0",
               "--set", "sched.warmup_steps=0",
               "--set", "sched.name=constant",
               "--set", "sched.min_lr=0",
               "--set", "out.dir=" + out.string()},
              tmp / "run.log", through_pipe ? pipe_fds[1] : -1, through_pipe);
  std::string output;
  if (through_pipe) {
    close(pipe_fds[1]);
    // Drained while the run logs its first steps (a full pipe would block
    // it), then closed: the reader is gone.
    fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
    char buffer[4096];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (count_lines(out / "metrics.jsonl") < 3 && child.running() &&
           std::chrono::steady_clock::now() < deadline) {
      for (ssize_t n; (n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0;)
        output.append(buffer, static_cast<size_t>(n));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    close(pipe_fds[0]);
    ASSERT_GE(count_lines(out / "metrics.jsonl"), 3u) << output;
  } else {
    ASSERT_TRUE(wait_for_lines(child, out / "metrics.jsonl", 3)) << child.output();
  }
  child.signal(sig);
  if (twice) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    child.signal(sig);
  }
  const int status = child.wait(30);
  if (!through_pipe) output = child.output();
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status << "\n" << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  if (!through_pipe) {
    EXPECT_EQ(output.find("started with SIGINT ignored"), std::string::npos) << output;
  }

  // The steps logged are the steps saved: the step in flight was finished.
  const auto metrics = read_metrics(out);
  ASSERT_GE(metrics.size(), 3u);
  ASSERT_LT(metrics.size(), static_cast<size_t>(steps));
  const fs::path latest = resolve_checkpoint("latest", out);
  // The checkpoint by its folder ("latest" named the config's out.dir).
  if (!through_pipe) {
    EXPECT_NE(output.find("; resume with --resume " + latest.string()), std::string::npos)
        << output;
  }
  EXPECT_EQ(latest, out / ("step-" + std::to_string(metrics.size())));
  EXPECT_EQ(read_checkpoint(latest).state.step, static_cast<int64_t>(metrics.size()));
  EXPECT_EQ(metrics.back().at("step").get<int64_t>(), static_cast<int64_t>(metrics.size()) - 1);
}

// A run started with SIGINT ignored (a script's `lazytrain train ... &`)
// keeps it ignored once training begins; SIGTERM still stops it cleanly.
TEST(StopSignal, AnIgnoredSigintStaysIgnored) {
  TempDir tmp("signal_ignored");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const fs::path out = tmp / "out";
  void (*before)(int) = std::signal(SIGINT, SIG_IGN);  // inherited through fork and exec
  Child child(
      {"train", "--no-sample",           "--set", "model.path=" + fixture("qwen3").string(),
       "--set", "model.init=pretrained", "--set", "data.path=" + (tmp / "data.jsonl").string(),
       "--set", "data.format=tokens",    "--set", "train.steps=100000",
       "--set", "train.batch_size=2",    "--set", "train.seq_len=16",
       "--set", "train.save_every=0",    "--set", "out.dir=" + out.string()},
      tmp / "run.log");
  std::signal(SIGINT, before);
  ASSERT_TRUE(wait_for_lines(child, out / "metrics.jsonl", 3)) << child.output();
  const size_t logged = count_lines(out / "metrics.jsonl");
  child.signal(SIGINT);
  // A run that took it would stop after the step in flight; ten steps more
  // (milliseconds each) say this one trains on.
  EXPECT_TRUE(wait_for_lines(child, out / "metrics.jsonl", logged + 10)) << child.output();
  EXPECT_TRUE(child.running()) << child.output();
  EXPECT_EQ(child.output().find("stop requested"), std::string::npos) << child.output();
  // Said at the start, with what does stop it.
  EXPECT_NE(child.output().find("note: this process was started with SIGINT ignored"),
            std::string::npos)
      << child.output();
  child.signal(SIGTERM);
  const int status = child.wait(30);
  ASSERT_TRUE(WIFEXITED(status)) << child.output();
  EXPECT_EQ(WEXITSTATUS(status), 0) << child.output();
  EXPECT_NE(child.output().find("stop requested"), std::string::npos) << child.output();
}

TEST(StopSignal, SigintFinishesTheStepSavesAndExitsZero) {
  stop_mid_run(SIGINT);
}
TEST(StopSignal, SigtermFinishesTheStepSavesAndExitsZero) {
  stop_mid_run(SIGTERM);
}
// A closed ssh session or terminal: SIGHUP stops the run as SIGTERM does.
TEST(StopSignal, SighupFinishesTheStepSavesAndExitsZero) {
  stop_mid_run(SIGHUP);
}
// The shell resends SIGHUP to its jobs and the kernel sends another as the
// shell exits: the second is not a second stop request (which ends the run
// unsaved, as a second Ctrl-C does).
TEST(StopSignal, ASecondSighupIsNotASecondStopRequest) {
  stop_mid_run(SIGHUP, false, /*twice=*/true);
}
// Writes to the pipe after tee left raised SIGPIPE, which killed the run
// (status 141 in a shell) before it saved.
TEST(StopSignal, AnOutputPipeWhoseReaderLeftDoesNotKillTheRun) {
  stop_mid_run(SIGINT, /*through_pipe=*/true);
}

class StopRequest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_random_tokens(tmp_ / "train.jsonl", 8, 97, 3);
    // Held-out rows enough that one evaluation of the fixture model takes
    // seconds on the CPU, far longer than the wait for the signal below.
    std::vector<std::vector<int64_t>> ids;
    for (int64_t r = 0; r < 5000; ++r) {
      std::vector<int64_t> row;
      for (int64_t i = 0; i < 32; ++i) row.push_back((r * 31 + i * 7) % 97);
      ids.push_back(std::move(row));
    }
    write_tokens_jsonl(tmp_ / "heldout.jsonl", ids, ids);
  }

  // Saves only at the end (or when stopped); `more` as --set.
  std::vector<std::string> args(const fs::path& out, const std::vector<std::string>& more) const {
    std::vector<std::string> a = {"train", "--no-sample",
                                  "--set", "model.path=" + fixture("llama").string(),
                                  "--set", "model.init=random",
                                  "--set", "data.path=" + (tmp_ / "train.jsonl").string(),
                                  "--set", "data.format=tokens",
                                  "--set", "train.steps=1000",
                                  "--set", "train.save_every=0",
                                  "--set", "train.batch_size=2",
                                  "--set", "train.seq_len=32",
                                  "--set", "train.device=cpu",
                                  "--set", "out.dir=" + out.string()};
    for (const std::string& set : more) {
      a.push_back("--set");
      a.push_back(set);
    }
    return a;
  }

  // A model large enough that a step takes about a second on the CPU, and
  // a save a good part of one.
  fs::path slow_model() const {
    nlohmann::json config = nlohmann::json::parse(read_text(fixture("llama") / "config.json"));
    config["hidden_size"] = 512;
    config["intermediate_size"] = 2048;
    config["num_hidden_layers"] = 4;
    config["num_attention_heads"] = 8;
    config["num_key_value_heads"] = 8;
    config["head_dim"] = 64;
    fs::create_directories(tmp_ / "model");
    write_text(tmp_ / "model" / "config.json", config.dump());
    return tmp_ / "model";
  }

  TempDir tmp_{"stop"};
};

// Signalled once step 1 and its evaluation are logged: the run is then in
// step 2's training or its evaluation, which takes seconds. The evaluation
// is abandoned, so step 2's line has no eval_loss, and step 2 is saved.
TEST_F(StopRequest, OneAbandonsTheEvaluationInFlightAndSavesTheStep) {
  const fs::path out = tmp_ / "once";
  // An evaluation after every step.
  Child child(
      args(out, {"data.eval_path=" + (tmp_ / "heldout.jsonl").string(), "train.eval_every=1"}),
      tmp_ / "once.log");
  ASSERT_TRUE(wait_for_lines(child, out / "metrics.jsonl", 1, 120)) << child.output();
  child.signal(SIGINT);
  const int status = child.wait(120);
  const std::string output = child.output();
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  const auto metrics = read_metrics(out);
  ASSERT_EQ(metrics.size(), 2u) << output;
  EXPECT_TRUE(metrics[0].contains("eval_loss"));
  EXPECT_FALSE(metrics[1].contains("eval_loss")) << metrics[1].dump();
  for (const char* said :
       {"step 2: evaluation skipped: stop requested", "signal again to exit now, unsaved"})
    EXPECT_NE(output.find(said), std::string::npos) << said << "\n" << output;
  EXPECT_TRUE(fs::is_directory(out / "step-2")) << output;
}

// SIGINT twice, the second once the first is handled (signals of one kind
// pending together are delivered once): its handler has said so. The
// run's exit status.
int stop_twice(Child& child) {
  child.signal(SIGINT);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (child.output().find("stop requested: the run saves") == std::string::npos &&
         child.running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  child.signal(SIGINT);
  return child.wait(30);
}

// A second signal ends the process by that signal, without finishing the
// step in flight or saving. The model is large enough that a step takes
// a few hundred milliseconds on the CPU, so that both signals land in step 2.
TEST_F(StopRequest, ASecondSignalExitsAtOnceUnsaved) {
  const fs::path out = tmp_ / "twice";
  Child child(
      args(out, {"model.path=" + slow_model().string(), "train.batch_size=16", "train.seq_len=64"}),
      tmp_ / "twice.log");
  ASSERT_TRUE(wait_for_lines(child, out / "metrics.jsonl", 1, 120)) << child.output();
  const int status = stop_twice(child);
  ASSERT_TRUE(WIFSIGNALED(status)) << child.output();
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_FALSE(fs::exists(out / "step-1"));
  EXPECT_FALSE(fs::exists(out / "step-2"));
  // Nothing saved, nothing to resume from.
  EXPECT_MENTIONS(child.output(),
                  "second stop request: exiting now, unsaved (the last checkpoint "
                  "stays; a save in flight leaves its .step-N.tmp folder, removed "
                  "when a run next starts in out.dir)\n");
  EXPECT_EQ(child.output().find("resume with"), std::string::npos) << child.output();
}

// The second request's line named no checkpoint: it names the one a resume
// takes, as the first request's closing line does.
TEST_F(StopRequest, ASecondSignalNamesTheCheckpointToResumeFrom) {
  const fs::path out = tmp_ / "twice_saved";
  Child child(args(out, {"model.path=" + slow_model().string(), "train.batch_size=16",
                         "train.seq_len=64", "train.save_every=1", "train.keep_last=100"}),
              tmp_ / "twice_saved.log");
  ASSERT_TRUE(wait_for_lines(child, out / "metrics.jsonl", 2, 120)) << child.output();
  const int status = stop_twice(child);
  const std::string output = child.output();
  ASSERT_TRUE(WIFSIGNALED(status)) << output;
  const std::string said = "removed when a run next starts in out.dir); resume with --resume " +
                           (out / "step-").string();
  const size_t at = output.find(said);
  ASSERT_NE(at, std::string::npos) << output;
  const size_t end = output.find('\n', at);
  const fs::path named = output.substr(at + said.size() - (out / "step-").string().size(),
                                       end - at - said.size() + (out / "step-").string().size());
  EXPECT_NO_THROW(read_checkpoint(named)) << named;
}

// A stop asked for while a periodic save is being written exits after that
// save: the run trained one more step and saved a second whole checkpoint
// (for a 7B model, a step and some 100 GB of writes more).
TEST_F(StopRequest, OneDuringASaveExitsAfterThatSave) {
  const fs::path out = tmp_ / "during_save";
  Child child(args(out, {"model.path=" + slow_model().string(), "train.batch_size=16",
                         "train.seq_len=64", "train.save_every=1", "train.keep_last=100"}),
              tmp_ / "during_save.log");
  // The save of step N is written as .step-N.tmp-PID, then renamed.
  int64_t saving = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (saving == 0 && child.running() && std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(out, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(".step-", 0) == 0 && name.find(".tmp-") != std::string::npos)
        saving = std::stoll(name.substr(6, name.find(".tmp-") - 6));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(saving, 0) << child.output();
  child.signal(SIGINT);
  const int status = child.wait(120);
  const std::string output = child.output();
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_EQ(read_metrics(out).size(), static_cast<size_t>(saving)) << output;
  EXPECT_EQ(resolve_checkpoint("latest", out), out / ("step-" + std::to_string(saving))) << output;
  EXPECT_FALSE(fs::exists(out / ("step-" + std::to_string(saving + 1)))) << output;
  // Said as what it is, after the save's line (it read "stop requested:
  // exiting after this save" once the save was done).
  EXPECT_MENTIONS(output, "the stop came during step " + std::to_string(saving) +
                              "'s save, which stands for the save it asked for: exiting without "
                              "training another step");
}

// A stop within the last step finishes the run normally, also when that
// step is a one-step run's first update over another run (out.overwrite):
// it kept the other run and saved nothing.
TEST_F(StopRequest, OneInTheOnlyStepOfARunOverAnotherFinishesIt) {
  const fs::path out = tmp_ / "only_step";
  const std::vector<std::string> slow = {"model.path=" + slow_model().string(),
                                         "train.batch_size=32", "train.seq_len=64",
                                         "out.overwrite=true"};
  std::vector<std::string> earlier = slow;
  earlier.push_back("train.steps=2");
  std::string output;
  ASSERT_EQ(run_program(args(out, earlier), tmp_ / "earlier.log", &output, 300), 0) << output;
  std::vector<std::string> one = slow;
  one.push_back("train.steps=1");
  Child child(args(out, one), tmp_ / "only_step.log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (child.output().find("\nplan: ") == std::string::npos && child.running() &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // in the step (seconds)
  child.signal(SIGINT);
  const int status = child.wait(120);
  output = child.output();
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_TRUE(fs::exists(out / "step-1" / "trainer_state.json")) << output;
  EXPECT_FALSE(fs::exists(out / "step-2")) << output;
  EXPECT_EQ(read_metrics(out).size(), 1u) << output;
}

// out.overwrite and a stop before the first step (here in the demo's
// evaluation before training): the earlier run's checkpoints,
// metrics.jsonl and config.yaml stay, since this run trained nothing to
// replace them (they were removed, or rewritten, as the run was set up).
TEST(StopSignal, AStopBeforeTheFirstStepKeepsTheEarlierRunUnderOverwrite) {
  TempDir tmp("stop_overwrite");
  const fs::path out = tmp / "run";
  std::string output;
  ASSERT_EQ(run_program({"train", "--no-sample", "--set", "train.steps=2", "--set",
                         "out.dir=" + out.string()},
                        tmp / "first.log", &output, 300),
            0)
      << output;
  const std::string first_config = read_text(out / "config.yaml");
  // Signalled once the run has printed `after` (and `wait_ms` more):
  //  - its plan: it is set up (past the setup's own stop, which ends it by
  //    the signal), and the evaluation of 200 problems follows for a
  //    second or more;
  //  - the evaluation's result, and 20 ms: the signal comes during the
  //    first step (about 300 ms), whose save would have replaced the
  //    earlier run of 2 steps (or, on a slow machine, just before it).
  for (const auto& [after, wait_ms] :
       {std::pair{"\nplan: ", 100}, std::pair{"step 0 (before training)", 20}}) {
    Child child({"train", "--no-sample", "--set", "train.steps=2", "--set", "out.overwrite=true",
                 "--set", "data.eval_max_new_tokens=9", "--set", "out.dir=" + out.string()},
                tmp / "second.log");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (child.output().find(after) == std::string::npos && child.running() &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    child.signal(SIGINT);
    const int status = child.wait(120);
    output = child.output();
    ASSERT_TRUE(WIFEXITED(status)) << output;
    EXPECT_EQ(WEXITSTATUS(status), 0) << output;
    EXPECT_TRUE(
        output.find("stop requested before the first step: nothing trained") != std::string::npos ||
        output.find("stop requested before this run's first update was kept") != std::string::npos)
        << output;
    EXPECT_TRUE(fs::exists(out / "step-2" / "trainer_state.json")) << output;
    EXPECT_FALSE(fs::exists(out / "step-1")) << output;
    EXPECT_EQ(read_metrics(out).size(), 2u) << output;
    // Its config.yaml too: the stopped run's (eval_max_new_tokens 9) would
    // describe a run the folder does not hold.
    EXPECT_EQ(read_text(out / "config.yaml"), first_config);
  }
}

}  // namespace
}  // namespace lt::train::testing
