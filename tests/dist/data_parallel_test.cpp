// Data parallel on the CPU, end to end: `lazytrain launch --nproc 2 train`
// (mpirun, MPI_Allreduce) against one process at the same global batch on
// the qwen3 fixture. The outside reference is the one-process run, which
// the resident executor's own tests check against PyTorch: two ranks must
// give its losses, gradient norms (with clipping on) and weights within
// float tolerance, resume across world sizes as an uninterrupted run, stop
// together on a signal, and refuse a batch that does not divide.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <thread>
#include <vector>

#include "dist/dist_runs.h"

namespace lt::train::testing {
namespace {

struct Shape {
  const char* name;
  std::vector<std::string> sets;
  const char* split;  // rank 0's line on the split, worked by hand
};

class TwoRanks : public ::testing::TestWithParam<Shape> {};

TEST_P(TwoRanks, GiveOneProcessLossesNormsAndWeights) {
  Runs runs;
  std::vector<std::string> sets = GetParam().sets;
  sets.push_back("train.steps=4");
  std::string output;
  runs.train(0, runs.tmp / "one", sets, &output);
  EXPECT_EQ(output.find("data parallel:"), std::string::npos) << "one process" << output;
  runs.train(2, runs.tmp / "two", sets, &output);
  // Rank 0 alone speaks and writes, saying first how the batch is split.
  EXPECT_EQ(output.find("rank 1"), std::string::npos) << output;
  const std::string split = std::string("dist: 2 ranks, data parallel: each rank runs ") +
                            GetParam().split +
                            ", and the ranks sum their gradients over MPI before each update\n";
  EXPECT_NE(output.find(split), std::string::npos) << output;
  EXPECT_EQ(output.find(split), output.rfind(split)) << "once" << output;
  expect_same_steps(runs.tmp / "one", runs.tmp / "two");
  expect_same_weights(runs.tmp / "one" / "step-4", runs.tmp / "two" / "step-4");
}

INSTANTIATE_TEST_SUITE_P(
    Batches, TwoRanks,
    ::testing::Values(Shape{"padded",
                            {"train.batch_size=4", "data.pack=false"},
                            "2 of train.batch_size 4 sequences a step"},
                      Shape{"accumulated",
                            {"train.batch_size=4", "train.grad_accum=2"},
                            "2 of train.batch_size 4 sequences a step (1 of each micro-batch of 2, "
                            "train.grad_accum 2)"},
                      Shape{"packed",
                            {"train.batch_size=6", "data.pack=true"},
                            "3 of train.batch_size 6 sequences a step"},
                      // Buckets of 1 KB: many, started during the backward.
                      Shape{"bucketed",
                            {"train.batch_size=4", "train.grad_accum=2", "dist.bucket_mb=0.001"},
                            "2 of train.batch_size 4 sequences a step (1 of each micro-batch of 2, "
                            "train.grad_accum 2)"}),
    [](const auto& info) { return std::string(info.param.name); });

// A run stopped after 2 steps and resumed to 4, on another world size each
// way, continues as an uninterrupted one-process run.
TEST(DataParallel, ResumeAcrossWorldSizesContinuesAsUninterrupted) {
  Runs runs;
  const std::vector<std::string> at2 = {"train.batch_size=4", "train.steps=2"};
  const std::vector<std::string> at4 = {"train.batch_size=4", "train.steps=4"};
  runs.train(0, runs.tmp / "whole", at4);
  for (const auto& [first, then] : {std::pair{2, 0}, std::pair{0, 2}}) {
    const fs::path out = runs.tmp / ("from" + std::to_string(first) + "to" + std::to_string(then));
    runs.train(first, out, at2);
    runs.train(then, out, at4, nullptr, "latest");
    expect_same_steps(runs.tmp / "whole", out);
    expect_same_weights(runs.tmp / "whole" / "step-4", out / "step-4");
  }
}

// A stop signal on the launcher (SIGINT: a terminal's Ctrl-C reaches the
// launcher alone) stops every rank after the same step with one save, and
// launch exits 0 as `lazytrain train` does (mpirun, signalled itself,
// exited 1: Note [Stopping ranks under mpirun]).
void expect_one_save_and_exit_zero(int sig) {
  Runs runs;
  const fs::path out = runs.tmp / "stopped";
  auto running = runs.start_long_run(out);
  ASSERT_TRUE(running);
  Child& child = *running;
  child.signal(sig);
  const int status = child.wait(60);
  const std::string output = child.output();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << "\n"
                                                             << output;
  EXPECT_NE(output.find("stop requested: saving and exiting"), std::string::npos) << output;
  const auto metrics = read_metrics(out);
  const fs::path latest = resolve_checkpoint("latest", out);
  EXPECT_EQ(latest, out / ("step-" + std::to_string(metrics.size()))) << output;
  EXPECT_EQ(read_checkpoint(latest).state.step, static_cast<int64_t>(metrics.size()));
  EXPECT_NE(output.find("stopped at step " + std::to_string(metrics.size()) + " on request"),
            std::string::npos)
      << output;
}

// A set exec.mode resident is counted for a rank's share of the batch: 2
// ranks at batch 24 run 12 sequences each, counted as one process at 12
// (warned about, within the slack), where the whole 24 in one process is
// refused. The count was of the global batch, and refused the 2 ranks.
TEST(DataParallel, AResidentRankIsCountedForItsShareOfTheBatch) {
  Runs runs;
  const auto run = [&](int nproc, int batch, std::string* output) {
    const fs::path out = runs.tmp / ("r" + std::to_string(nproc) + "_" + std::to_string(batch));
    return run_program(runs.args(nproc, out,
                                 {"exec.mode=resident", "exec.device_memory_gb=0.00125",
                                  "train.steps=1", "train.batch_size=" + std::to_string(batch)}),
                       out.string() + ".log", output, 120);
  };
  std::string one_at_12, one_at_24, two_at_24;
  ASSERT_EQ(run(0, 12, &one_at_12), 0) << one_at_12;
  EXPECT_NE(run(0, 24, &one_at_24), 0) << one_at_24;
  EXPECT_MENTIONS(one_at_24, "over 1.15 times what exec.device_memory_gb");
  ASSERT_EQ(run(2, 24, &two_at_24), 0) << two_at_24;
  EXPECT_MENTIONS(two_at_24, "12 a rank over 2 ranks");
  // The rank's estimate is one process's at 12.
  const auto estimate = [](const std::string& text) {
    const size_t at = text.find("need an estimated ");
    return at == std::string::npos ? std::string() : text.substr(at, text.find(')', at) - at);
  };
  EXPECT_FALSE(estimate(one_at_12).empty()) << one_at_12;
  EXPECT_EQ(estimate(two_at_24), estimate(one_at_12));
}

// The refusal of a set resident over ranks suggests a train.grad_accum whose
// micro-batches the ranks share evenly: at batch 42 on 2 ranks, grad_accum
// 2 would make micro-batches of 21, which the run refuses (they must divide
// by the world size), so the next divisor, 3 (micro-batches of 14, 7 a
// rank), is named.
TEST(DataParallel, AResidentRefusalOverRanksSuggestsMicroBatchesTheRanksShare) {
  Runs runs;
  const auto run = [&](int grad_accum, std::string* output) {
    const fs::path out = runs.tmp / ("accum" + std::to_string(grad_accum));
    return run_program(
        runs.args(2, out,
                  {"exec.mode=resident", "exec.device_memory_gb=0.00125", "train.steps=1",
                   "train.batch_size=42", "train.grad_accum=" + std::to_string(grad_accum)}),
        out.string() + ".log", output, 120);
  };
  std::string refused, odd;
  EXPECT_NE(run(1, &refused), 0) << refused;
  EXPECT_MENTIONS(refused, "21 a rank over 2 ranks");
  EXPECT_MENTIONS(refused, "train.grad_accum 3 (micro-batches of 14) fits");
  // What grad_accum 2 would give: refused for its micro-batches of 21.
  EXPECT_NE(run(2, &odd), 0) << odd;
  EXPECT_MENTIONS(odd, "21 sequences per micro-batch, which must divide by the world size 2");
}

// States on disk over ranks are refused for ZenFlow as for offload, naming
// the mode the run set.
TEST(DataParallel, StatesOnDiskOverRanksAreRefusedNamingZenFlow) {
  Runs runs;
  const fs::path out = runs.tmp / "zenflow_disk";
  std::string output;
  EXPECT_NE(run_program(runs.args(2, out,
                                  {"exec.mode=zenflow", "exec.state_placement=disk",
                                   "train.steps=1", "train.batch_size=4"}),
                        out.string() + ".log", &output, 120),
            0)
      << output;
  EXPECT_MENTIONS(output,
                  "a run of several processes keeps every master and optimizer state of "
                  "exec.mode zenflow in host memory so far; set exec.state_placement: host");
}

// A rank's run plan is priced on its share of the host: 2 ranks on one
// host split its cores (launch's LT_NUM_THREADS) and memory bandwidth, so
// each rank's CPU update is priced as one process's on a profile with half
// the rates, written by hand; under ZeRO-1 each updates half the
// parameters, one process's on the whole profile. `launch ... plan
// --config` prints each rank's plan (for a GPU, from the profiles; every
// stage streamed and the head apart, as ranks run).
TEST(DataParallel, ARanksPlanIsPricedOnItsShareOfTheHost) {
  Runs runs;
  write_text(runs.tmp / "run.yaml",
             "model:\n  path: " + fixture("qwen3").string() +
                 "\n  init: pretrained\ndata:\n  path: " + runs.data.string() +
                 "\n  format: tokens\ntrain:\n  seq_len: 16\n  device: cuda\n  dtype: bf16\n"
                 "exec:\n  mode: streaming\n  stages_on_device: none\n  fused_tail: off\n");
  const auto profile = [&](const std::string& name, double cpu_gparams_per_s, double host_gbps) {
    write_text(runs.tmp / name,
               fmt::format("cpu_adam_gparams_per_s: {}\ncpu_adam8bit_gparams_per_s: {}\n"
                           "host_mem_gbps: {}\n",
                           cpu_gparams_per_s, cpu_gparams_per_s, host_gbps));
    return (runs.tmp / name).string();
  };
  const std::string whole = profile("whole.yaml", 1e-4, 0.5);
  const std::string half = profile("half.yaml", 5e-5, 0.25);
  // The predicted step `plan` prints, by `nproc` ranks (0: one process).
  const auto predicted = [&](int nproc, int batch, const std::string& hw, const std::string& zero) {
    std::vector<std::string> args;
    if (nproc > 0) args = {"launch", "--nproc", std::to_string(nproc)};
    args.insert(args.end(), {"plan", "--config", (runs.tmp / "run.yaml").string(), "--set",
                             "train.batch_size=" + std::to_string(batch), "--set",
                             "exec.hardware=" + hw, "--set", "dist.zero=" + zero});
    std::string output;
    EXPECT_EQ(run_program(args, runs.tmp / "plan.log", &output, 60), 0) << output;
    const size_t at = output.find("schedule: predicted step ");
    return at == std::string::npos ? output : output.substr(at, output.find(' ', at + 25) - at);
  };
  const std::string one_whole = predicted(0, 4, whole, "0");
  EXPECT_EQ(predicted(2, 8, whole, "0"), predicted(0, 4, half, "0"));
  EXPECT_NE(predicted(2, 8, whole, "0"), one_whole) << "the CPU update shows in the step";
  EXPECT_EQ(predicted(2, 8, whole, "1"), one_whole);
}

TEST(DataParallel, SigtermOnTheLauncherStopsEveryRankAfterOneSave) {
  expect_one_save_and_exit_zero(SIGTERM);
}

TEST(DataParallel, SigintOnTheLauncherStopsEveryRankAfterOneSave) {
  expect_one_save_and_exit_zero(SIGINT);
}

// A closed terminal's SIGHUP reached the launcher alone, which died by it
// while the ranks trained on to the end; it goes to them as one SIGTERM.
TEST(DataParallel, SighupOnTheLauncherStopsEveryRankAfterOneSave) {
  expect_one_save_and_exit_zero(SIGHUP);
}

// A rank that dies (SIGKILL: no chance to say anything) ends the run on
// every rank, non-zero, with a line naming it, in seconds.
TEST(DataParallel, KillingOneRankEndsTheOthersNamingIt) {
  Runs runs;
  const fs::path out = runs.tmp / "killed";
  auto running = runs.start_long_run(out);
  ASSERT_TRUE(running);
  Child& child = *running;
  const pid_t victim = find_process(out.string(), "OMPI_COMM_WORLD_RANK=1");
  ASSERT_GT(victim, 0) << "rank 1 not found";
  ::kill(victim, SIGKILL);
  const auto start = std::chrono::steady_clock::now();
  const int status = child.wait(30);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_TRUE(!WIFEXITED(status) || WEXITSTATUS(status) != 0);
  EXPECT_NE(child.output().find("process rank 1 with PID"), std::string::npos) << child.output();
  EXPECT_EQ(find_process(out.string(), "OMPI_COMM_WORLD_RANK=0"), 0) << "rank 0 still runs";
  // Rank 0 says what mpirun's SIGTERM is; it promised a save mpirun's
  // SIGKILL then cut short.
  EXPECT_EQ(child.output().find("the run saves after the step in flight"), std::string::npos)
      << child.output();
  EXPECT_NE(child.output().find("SIGTERM from mpirun: it is ending the job"), std::string::npos)
      << child.output();
}

// Whether `pid` still runs a command whose line holds `marker` (a zombie's
// line is empty; a reused pid's is another's).
bool still_runs(pid_t pid, const std::string& marker) {
  std::ifstream in(fs::path("/proc") / std::to_string(pid) / "cmdline");
  const std::string cmdline(std::istreambuf_iterator<char>(in), {});
  return cmdline.find(marker) != std::string::npos;
}

// The launcher killed outright (SIGKILL: it forwards nothing) takes its
// children with it: mpirun and the ranks trained on as orphans, holding
// out.dir's lock. The kernel's SIGTERM (launch.cpp, Note [Children die
// with the launcher]) makes mpirun end the ranks, in seconds.
TEST(DataParallel, KillingTheLauncherEndsMpirunAndTheRanks) {
  Runs runs;
  const fs::path out = runs.tmp / "orphaned";
  auto running = runs.start_long_run(out);
  ASSERT_TRUE(running);
  Child& child = *running;
  const std::vector<pid_t> started = children_of(child.pid());
  ASSERT_EQ(started.size(), 1u) << "the launcher starts mpirun alone";
  std::vector<pid_t> children = {started[0], find_process(out.string(), "OMPI_COMM_WORLD_RANK=0"),
                                 find_process(out.string(), "OMPI_COMM_WORLD_RANK=1")};
  ASSERT_GT(children[1], 0) << "rank 0 not found";
  ASSERT_GT(children[2], 0) << "rank 1 not found";
  child.signal(SIGKILL);
  child.wait(10);
  const auto start = std::chrono::steady_clock::now();
  const auto any_runs = [&] {
    return std::any_of(children.begin(), children.end(),
                       [&](pid_t pid) { return still_runs(pid, out.string()); });
  };
  while (any_runs() && std::chrono::steady_clock::now() - start < std::chrono::seconds(15))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t i = 0; i < children.size(); ++i) {
    EXPECT_FALSE(still_runs(children[i], out.string()))
        << (i == 0 ? "mpirun" : "rank " + std::to_string(i - 1)) << " outlived the launcher";
    if (still_runs(children[i], out.string())) ::kill(children[i], SIGKILL);
  }
  // mpirun's abort: SIGTERM to each rank, SIGKILL a second later.
  EXPECT_LT(waited, 5) << "seconds for the children to end";
}

// A rank that hangs (SIGSTOP: alive, silent; mpirun sees nothing wrong)
// makes the others give up after dist.timeout_s, naming it, and the run
// ends non-zero (dist/mpi_sum.cpp, Note [Naming the rank that does not
// come]).
TEST(DataParallel, AHungRankIsNamedWithinTheTimeout) {
  Runs runs;
  const fs::path out = runs.tmp / "hung";
  constexpr double kTimeoutS = 3;
  auto running = runs.start_long_run(out, {"dist.timeout_s=" + std::to_string(kTimeoutS)});
  ASSERT_TRUE(running);
  Child& child = *running;
  const pid_t victim = find_process(out.string(), "OMPI_COMM_WORLD_RANK=1");
  ASSERT_GT(victim, 0) << "rank 1 not found";
  ::kill(victim, SIGSTOP);
  const auto start = std::chrono::steady_clock::now();
  const int status = child.wait(60);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (find_process(out.string(), "OMPI_COMM_WORLD_RANK=1") == victim) ::kill(victim, SIGKILL);
  EXPECT_GT(waited, kTimeoutS - 0.5);  // not before the timeout...
  EXPECT_LT(waited, kTimeoutS + 15);   // ...and soon after it
  EXPECT_TRUE(!WIFEXITED(status) || WEXITSTATUS(status) != 0);
  // Rank 0's line names rank 1: not arrived at the collective, or stopped
  // inside it (SIGSTOP may land either side of the notice).
  const std::string output = child.output();
  const std::string head = "rank 0 of 2: error: waited dist.timeout_s = 3 s for";
  const size_t at = output.find(head);
  ASSERT_NE(at, std::string::npos) << output;
  const std::string line = output.substr(at, output.find('\n', at) - at);
  EXPECT_TRUE(line.find("): rank 1 has not reached it") != std::string::npos ||
              line.find("): rank 1 reached it but went silent inside it") != std::string::npos)
      << line;
}

TEST(DataParallel, TimeoutMustBePositiveNamingTheKey) {
  Runs runs;
  std::string output;
  EXPECT_NE(run_program(runs.args(0, runs.tmp / "bad", {"dist.timeout_s=0"}), runs.tmp / "bad.log",
                        &output, 60),
            0);
  EXPECT_NE(output.find("config key 'dist.timeout_s' must be a positive number of seconds"),
            std::string::npos)
      << output;
}

TEST(DataParallel, BatchThatDoesNotDivideNamesTheKeyAndTheRank) {
  Runs runs;
  const auto args = runs.args(2, runs.tmp / "bad", {"train.batch_size=3"});
  std::string output;
  EXPECT_NE(run_program(args, runs.tmp / "bad.log", &output, 60), 0);
  // Both ranks fail alike; the first to speak aborts the other, so either
  // may be the one named, and the message is said once (it came once per
  // rank).
  const std::string message =
      " of 2: error: --set train.batch_size=3: train.batch_size 3 is the global batch and must "
      "divide by the world size 2";
  const size_t at = output.find(message);
  EXPECT_NE(at, std::string::npos) << output;
  EXPECT_EQ(output.find(message, at + 1), std::string::npos) << output;
  // Refused before the data is read and the weights load.
  EXPECT_EQ(output.find("weights:"), std::string::npos) << output;
  EXPECT_EQ(output.find("samples from"), std::string::npos) << output;

  // A config error, found by every rank before its run starts, is said once
  // too, naming a rank (it came once per rank, unnamed).
  std::string config_error;
  EXPECT_NE(run_program(runs.args(2, runs.tmp / "typo", {"train.stepz=2"}), runs.tmp / "typo.log",
                        &config_error, 60),
            0);
  const std::string unknown = " of 2: error: --set train.stepz=2: unknown key 'train.stepz'";
  const size_t first = config_error.find(unknown);
  EXPECT_NE(first, std::string::npos) << config_error;
  EXPECT_EQ(config_error.find("unknown key", first + unknown.size()), std::string::npos)
      << config_error;
}

}  // namespace
}  // namespace lt::train::testing
