// A run stopped by SIGINT or SIGTERM while it sets up (loading the model,
// tokenizing, planning: before its first step) ends at once, says so, and
// leaves out.dir as it was before the run: no stray .lock, no new folder.
// Once the run is set up, the signal is the trainer's again (signal_test).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>

#include "train/out_dir_lock.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

void (*disposition_of(int signal))(int) {
  struct sigaction current {};
  ::sigaction(signal, nullptr, &current);
  return current.sa_handler;
}

// The lock's own cleanup, in a forked child (gtest's death test) that the
// signal ends: the folders the lock made go; a folder that was there keeps
// the user's files and loses only the lock file.
TEST(InterruptedSetup, TheLockRemovesWhatItMadeAndTheSignalEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "fast");  // the child shares this test's paths
  TempDir tmp("interrupted_setup");
  const fs::path made = tmp / "runs" / "out";
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) {
    EXPECT_EXIT(
        {
          // As a terminal starts a run: under nohup (as CI may run the
          // tests) SIGHUP stays ignored, rightly, and would not end it.
          std::signal(signal, SIG_DFL);
          OutDirLock lock(made);
          std::raise(signal);
        },
        ::testing::KilledBySignal(signal), " while the run was setting up: stopped; out.dir '.*");
    EXPECT_FALSE(fs::exists(tmp / "runs")) << "signal " << signal;
  }
  const fs::path there = tmp / "there";
  fs::create_directories(there);
  write_text(there / "notes.txt", "mine");
  EXPECT_EXIT(
      {
        OutDirLock lock(there);
        std::raise(SIGINT);
      },
      ::testing::KilledBySignal(SIGINT), "is left as it was before the run");
  EXPECT_FALSE(fs::exists(there / ".lock"));
  EXPECT_EQ(read_text(there / "notes.txt"), "mine");
}

// Once committed (the run writes out.dir) the lock file stays on a signal,
// and the default action is back; an exception in the setup (the lock
// destroyed uncommitted) removes what it made and restores it too.
TEST(InterruptedSetup, CommitAndDestructionGiveTheSignalsBack) {
  GTEST_FLAG_SET(death_test_style, "fast");
  TempDir tmp("interrupted_commit");
  const fs::path out = tmp / "runs" / "out";
  EXPECT_EXIT(
      {
        OutDirLock lock(out);
        lock.commit();
        std::raise(SIGINT);
      },
      ::testing::KilledBySignal(SIGINT), "");
  EXPECT_TRUE(fs::exists(out / ".lock"));
  fs::remove_all(tmp / "runs");

  EXPECT_EQ(disposition_of(SIGINT), SIG_DFL);
  try {
    OutDirLock lock(out);
    EXPECT_NE(disposition_of(SIGINT), SIG_DFL);
    EXPECT_NE(disposition_of(SIGTERM), SIG_DFL);
    throw Error("a model folder without its weights");
  } catch (const Error&) {
  }
  EXPECT_FALSE(fs::exists(tmp / "runs"));
  EXPECT_EQ(disposition_of(SIGINT), SIG_DFL);
  EXPECT_EQ(disposition_of(SIGTERM), SIG_DFL);
}

// A signal the program ignores (nohup, a background job) stays ignored.
TEST(InterruptedSetup, AnIgnoredSignalStaysIgnored) {
  TempDir tmp("interrupted_ignored");
  void (*before)(int) = std::signal(SIGINT, SIG_IGN);
  {
    OutDirLock lock(tmp / "out");
    EXPECT_EQ(disposition_of(SIGINT), SIG_IGN);
    std::raise(SIGINT);  // nothing happens
    EXPECT_TRUE(fs::exists(tmp / "out" / ".lock"));
  }
  EXPECT_EQ(disposition_of(SIGINT), SIG_IGN);
  std::signal(SIGINT, before);
  EXPECT_FALSE(fs::exists(tmp / "out"));
}

// The program, stopped while it sets up. It holds the lock and is stuck
// printing the config it resolved (the first thing it does holding it) to
// a stdout nobody reads, a full pipe; the lock file naming its PID says
// the lock's handler is in place. So the signal lands in the setup every
// time, not only when it happens to be slow.
void stop_while_setting_up(int signal) {
  TempDir tmp("interrupted_run" + std::to_string(signal));
  write_random_tokens(tmp / "data.jsonl", 8, 97, 5);
  const fs::path out = tmp / "runs" / "out";
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK), 0);
  const char byte = 'x';
  while (::write(pipe_fds[1], &byte, 1) == 1) {
  }
  ASSERT_EQ(::fcntl(pipe_fds[1], F_SETFL, 0), 0);  // the program's writes wait
  Child child({"train", "--no-sample", "--set", "model.path=" + fixture("llama").string(), "--set",
               "model.init=random", "--set", "data.path=" + (tmp / "data.jsonl").string(), "--set",
               "data.format=tokens", "--set", "train.steps=2", "--set", "train.seq_len=16", "--set",
               "train.device=cpu", "--set", "out.dir=" + out.string()},
              tmp / "run.log", pipe_fds[1]);
  ::close(pipe_fds[1]);
  const std::string pid = std::to_string(child.pid()) + "\n";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!(fs::exists(out / ".lock") && read_text(out / ".lock") == pid) && child.running() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(child.running()) << child.output();
  ASSERT_TRUE(fs::exists(out / ".lock")) << child.output();
  child.signal(signal);
  const int status = child.wait(30);
  ::close(pipe_fds[0]);
  const std::string output = child.output();
  ASSERT_TRUE(WIFSIGNALED(status)) << output;
  EXPECT_EQ(WTERMSIG(status), signal) << output;
  EXPECT_MENTIONS(output, std::string(signal == SIGINT ? "SIGINT" : "SIGTERM") +
                              " while the run was setting up: stopped; out.dir '" + out.string() +
                              "' is left as it was before the run");
  EXPECT_FALSE(fs::exists(tmp / "runs"));
}

TEST(InterruptedSetup, SigintWhileTheProgramSetsUpLeavesNoFolder) {
  stop_while_setting_up(SIGINT);
}
TEST(InterruptedSetup, SigtermWhileTheProgramSetsUpLeavesNoFolder) {
  stop_while_setting_up(SIGTERM);
}

// data.eval_task math's scoring before the first step comes before the
// lock's commit: a Ctrl-C in it said "stop requested before the first
// step" but left a new out.dir holding .lock and config.yaml (and, with
// exec.state_placement disk, the executor's state file). It stops the run
// there, exit 0, out.dir as it was.
TEST(InterruptedSetup, SigintInTheEvaluationBeforeTrainingLeavesNoFolder) {
  TempDir tmp("interrupted_eval");
  // The demo's 200 held-out problems ten times over: seconds of answers.
  const std::string heldout = read_text(assets_dir() / "demo" / "addition" / "test.jsonl");
  std::string rows;
  for (int i = 0; i < 10; ++i) rows += heldout;
  write_text(tmp / "heldout.jsonl", rows);
  // Once (the run stops, exit 0), and twice (the second request ends it at
  // once, by the signal, having removed what the lock made).
  for (const auto& [placement, signals] :
       {std::pair{std::string("host"), 1}, std::pair{std::string("disk"), 1},
        std::pair{std::string("host"), 2}}) {
    const fs::path out = tmp / "runs" / "out";
    Child child({"train", "--no-sample", "--set", "train.steps=2", "--set",
                 "data.eval_path=" + (tmp / "heldout.jsonl").string(), "--set", "exec.mode=offload",
                 "--set", "exec.state_placement=" + placement, "--set", "out.dir=" + out.string()},
                tmp / (placement + std::to_string(signals) + ".log"));  // not the last one's
    // The plan's line ends the rest of the setup; the scoring follows it.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (child.output().find("plan: executor") == std::string::npos && child.running() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(child.running()) << child.output();
    ASSERT_EQ(child.output().find("eval accuracy"), std::string::npos) << child.output();
    for (int k = 0; k < signals; ++k) {
      child.signal(SIGINT);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const int status = child.wait(60);
    const std::string output = child.output();
    if (signals == 1) {
      ASSERT_TRUE(WIFEXITED(status)) << output;
      EXPECT_EQ(WEXITSTATUS(status), 0) << output;
      EXPECT_MENTIONS(output,
                      "stop requested before the first step: nothing trained, nothing "
                      "saved; out.dir is left as it was before the run");
    } else {
      ASSERT_TRUE(WIFSIGNALED(status)) << output;
      EXPECT_EQ(WTERMSIG(status), SIGINT) << output;
      EXPECT_MENTIONS(output, "second stop request: exiting now, unsaved");
    }
    EXPECT_FALSE(fs::exists(tmp / "runs")) << placement << " " << signals << "\n" << output;
  }
}

}  // namespace
}  // namespace lt::train::testing
