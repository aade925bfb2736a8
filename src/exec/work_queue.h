#pragma once
// A single worker thread that runs tasks in the order they were queued: the
// streaming executor's stand-in for a CUDA copy stream on the CPU, and its
// optimizer thread. A task's completion is a Ticket; waiting on it rethrows
// whatever the task threw, so an error on a worker reaches the caller.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>

namespace lt::exec {

using Ticket = std::shared_future<void>;

// A ticket that is already complete.
Ticket ready_ticket();
// Waits for `ticket` and returns the seconds spent waiting (0 when it was
// already complete); rethrows the task's error.
double wait_seconds(const Ticket& ticket);
// Seconds from `start` to now, on the clock the executors time steps with.
double seconds_since(std::chrono::steady_clock::time_point start);

class WorkQueue {
 public:
  explicit WorkQueue(std::string name);
  ~WorkQueue();  // runs what is queued, then joins
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  Ticket enqueue(std::function<void()> work);
  // Test hook: before each task, sleep a random time in [0, max_us]
  // microseconds (seeded, so a failing interleaving can be replayed).
  void inject_delays(int64_t max_us, uint64_t seed);
  const std::string& name() const { return name_; }

 private:
  void run();
  std::string name_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> tasks_;
  bool stop_ = false;
  int64_t max_delay_us_ = 0;
  std::mt19937_64 delay_rng_;
  std::thread worker_;  // last: starts after the members it uses
};

}  // namespace lt::exec
