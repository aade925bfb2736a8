// A stop sent to `lazytrain launch` at any moment stops the run (Note [A
// stop before the ranks start], cli/launch.cpp). One sent in the launch's
// first tenth of a second, after mpirun had started and before its ranks
// had, went to mpirun, which dropped it (the run trained to the end and
// exited 0) or ended alone with status 1, by timing; and a launch started
// with SIGINT ignored (a script's background job) acted on it where
// `lazytrain train` keeps it ignored.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <thread>

#include "dist/dist_runs.h"

namespace lt::train::testing {
namespace {

bool has_checkpoint(const fs::path& out) {
  if (!fs::exists(out)) return false;
  for (const auto& entry : fs::directory_iterator(out))
    if (entry.path().filename().string().starts_with("step-")) return true;
  return false;
}

// The signal sent as soon as the launcher has started mpirun, before
// mpirun starts the ranks: the run ends by it within seconds, nothing
// trained or saved, as a stop in a run's setup ends it.
void expect_a_stop_at_mpiruns_start_ends_the_run(int sig) {
  Runs runs;
  const fs::path out = runs.tmp / "early";
  Child child(runs.args(2, out, {"train.batch_size=4", "train.steps=1000000"}),
              out.string() + ".log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (child.running() && children_of(child.pid()).empty() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ASSERT_FALSE(children_of(child.pid()).empty()) << "mpirun not started\n" << child.output();
  child.signal(sig);
  const int status = child.wait(60);
  // The ranks end by it in their setup (mpirun exits 128 + sig), or, past
  // it, stop before their first step and exit 0.
  const bool by_signal = WIFSIGNALED(status)
                             ? WTERMSIG(status) == sig
                             : WIFEXITED(status) && WEXITSTATUS(status) == 128 + sig;
  const bool before_first_step =
      WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
      child.output().find("stop requested before the first step") != std::string::npos;
  EXPECT_TRUE(by_signal || before_first_step) << "status " << status << "\n" << child.output();
  EXPECT_FALSE(has_checkpoint(out)) << child.output();
  EXPECT_EQ(child.output().find("step     1"), std::string::npos) << child.output();
}

TEST(LaunchStop, ASigintAtMpirunsStartEndsTheRun) {
  expect_a_stop_at_mpiruns_start_ends_the_run(SIGINT);
}

TEST(LaunchStop, ASigtermAtMpirunsStartEndsTheRun) {
  expect_a_stop_at_mpiruns_start_ends_the_run(SIGTERM);
}

// Started with SIGINT ignored, the launch says so with the SIGTERM that
// stops it, and trains on through a `kill -INT`; the SIGTERM then stops
// every rank after one save.
TEST(LaunchStop, ALaunchStartedWithSigintIgnoredKeepsItIgnored) {
  Runs runs;
  const fs::path out = runs.tmp / "ignored";
  struct sigaction ignore = {}, before = {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &before);  // inherited through fork and exec
  auto running = runs.start_long_run(out);
  ::sigaction(SIGINT, &before, nullptr);
  ASSERT_TRUE(running);
  Child& child = *running;
  EXPECT_MENTIONS(child.output(), "launch: note: this process was started with SIGINT ignored");
  EXPECT_MENTIONS(child.output(), "`kill " + std::to_string(child.pid()) + "` (SIGTERM)");
  const size_t before_int = read_metrics(out).size();
  child.signal(SIGINT);
  ASSERT_TRUE(wait_for_lines(child, out / "metrics.jsonl", before_int + 3, 60)) << child.output();
  EXPECT_TRUE(child.running()) << child.output();
  EXPECT_EQ(child.output().find("stop requested"), std::string::npos) << child.output();
  child.signal(SIGTERM);
  const int status = child.wait(60);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << "\n" << child.output();
  const size_t steps = read_metrics(out).size();
  EXPECT_EQ(resolve_checkpoint("latest", out), out / ("step-" + std::to_string(steps)))
      << child.output();
}

}  // namespace
}  // namespace lt::train::testing
