#pragma once
// How the profile times work (plan/profile.cpp, plan/profile_stages.cpp):
// medians of wall-clock runs, and on a GPU at the clock its power cap
// allows under sustained load.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <vector>

namespace lt::plan::timing {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double median(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

template <typename Fn>
double median_seconds(int repeats, Fn&& fn) {
  std::vector<double> s;
  for (int k = 0; k < repeats; ++k) {
    const auto t0 = Clock::now();
    fn();
    s.push_back(seconds_since(t0));
  }
  return median(std::move(s));
}

// A GPU's clock under sustained load is set by its power cap: on the H200
// a streaming training step draws 620-700 W and runs at 1.58-1.83 GHz,
// while short bursts run at 1.98 GHz (nvidia-smi beside
// bench/plan_vs_fixed.sh, 2026-11-30). Stage times taken from bursts came
// out 12% short of the run's. So on a GPU each figure is taken after
// kSustainSeconds of the same work queued back to back, and over batches of
// runs queued back to back (as the executor queues a stage's chunks), each
// batch lasting at least kMinBatchSeconds.
inline constexpr double kSustainSeconds = 0.5;
inline constexpr double kMinBatchSeconds = 0.1;
inline constexpr int kMaxRunsPerBatch = 1000;

// Runs in a batch of at least kMinBatchSeconds, from one run's `single` seconds.
inline int runs_per_batch(double single) {
  return static_cast<int>(std::clamp(std::ceil(kMinBatchSeconds / std::max(single, 1e-9)), 1.0,
                                     static_cast<double>(kMaxRunsPerBatch)));
}

// Queues `runs` runs back to back, waits for them (`finish`) and undoes
// what they leave behind (`reset`: gradients).
template <typename Run, typename Finish, typename Reset>
void run_batch(int runs, Run& run, Finish& finish, Reset& reset) {
  for (int k = 0; k < runs; ++k) run();
  finish();
  reset();
}

// Runs `batch` for kSustainSeconds, until the clock is the sustained one.
template <typename Batch>
void sustain_load(Batch&& batch) {
  const auto start = Clock::now();
  while (seconds_since(start) < kSustainSeconds) batch();
}

// Seconds per `run` at the sustained clock (run_batch's arguments).
template <typename Run, typename Finish, typename Reset>
double sustained_seconds(int repeats, Run&& run, Finish&& finish, Reset&& reset) {
  const auto batch_of = [&](int runs) { run_batch(runs, run, finish, reset); };
  const int runs = runs_per_batch(median_seconds(1, [&] { batch_of(1); }));
  sustain_load([&] { batch_of(runs); });
  return median_seconds(repeats, [&] { batch_of(runs); }) / runs;
}

// Note [Sizes timed in turns]
// The planner chooses a chunk size by the ratio of the profile's times at
// two sizes, so both must be taken under the same conditions. Timed one
// size after the other (each after its own half second of load), the
// largest, timed last, ran on a GPU that had been at its power cap longest:
// on the H200 two profiles back to back moved chunks of 32's block backward
// by 4% and chunks of 8's by 0.4% (bench/RESULTS.md, session 35), and runs
// measured chunks of 32 faster than chunks of 8 where the profile priced
// them 1-4% slower (sessions 27-38), so the planner chose the slower plan.
// Here every size is warmed once, the load is sustained on the largest,
// and then the sizes take turns, one batch each per round, ascending and
// descending in alternate rounds; each size's figure is the median of its
// rounds. On a GPU each timed batch follows one untimed run of its size,
// which takes whatever memory that size's runs need from the caching
// allocator (another size's runs left it split differently) and brings the
// clock to that size's load, so no batch pays for the switch.
//
// `run(i)` queues one run at size i (of `sizes`, ascending); the result is
// seconds per run at each size. `sustained`: on a GPU (batches of
// kMinBatchSeconds after kSustainSeconds); else one run per turn.
template <typename Run, typename Finish, typename Reset>
std::vector<double> seconds_in_turns(size_t sizes, int rounds, bool sustained, Run&& run,
                                     Finish&& finish, Reset&& reset) {
  const auto batch_of = [&](size_t i, int runs) {
    const auto run_i = [&] { run(i); };
    run_batch(runs, run_i, finish, reset);
  };
  std::vector<int> runs(sizes, 1);
  for (size_t i = 0; i < sizes; ++i) {
    batch_of(i, 1);  // warm-up: first-touch allocations, GEMM heuristics
    if (sustained) runs[i] = runs_per_batch(median_seconds(1, [&] { batch_of(i, 1); }));
  }
  if (sustained && sizes > 0) sustain_load([&] { batch_of(sizes - 1, runs[sizes - 1]); });
  std::vector<std::vector<double>> samples(sizes);
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < sizes; ++k) {
      const size_t i = r % 2 == 0 ? k : sizes - 1 - k;
      if (sustained) batch_of(i, 1);
      samples[i].push_back(median_seconds(1, [&] { batch_of(i, runs[i]); }) / runs[i]);
    }
  }
  std::vector<double> out;
  for (auto& s : samples) out.push_back(median(std::move(s)));
  return out;
}

}  // namespace lt::plan::timing
