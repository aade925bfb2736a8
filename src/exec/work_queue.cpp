#include "exec/work_queue.h"

#include <chrono>

namespace lt::exec {

Ticket ready_ticket() {
  std::promise<void> done;
  done.set_value();
  return done.get_future().share();
}

double wait_seconds(const Ticket& ticket) {
  if (!ticket.valid()) return 0;
  double waited = 0;
  if (ticket.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    const auto start = std::chrono::steady_clock::now();
    ticket.wait();
    waited = seconds_since(start);
  }
  ticket.get();  // rethrows the task's error
  return waited;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

WorkQueue::WorkQueue(std::string name) : name_(std::move(name)), worker_([this] { run(); }) {}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  worker_.join();
}

Ticket WorkQueue::enqueue(std::function<void()> work) {
  // The task's captures (device tensors a copy holds, say) are released
  // before its ticket completes: a caller that waited on the ticket may
  // count on that memory being free, whatever the worker thread does next.
  std::packaged_task<void()> task([work = std::move(work)]() mutable {
    std::function<void()> run = std::move(work);
    try {
      run();
    } catch (...) {
      run = nullptr;
      throw;
    }
    run = nullptr;
  });
  Ticket done = task.get_future().share();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
  return done;
}

void WorkQueue::inject_delays(int64_t max_us, uint64_t seed) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_delay_us_ = max_us;
  delay_rng_.seed(seed);
}

void WorkQueue::run() {
  for (;;) {
    std::packaged_task<void()> task;
    int64_t delay_us = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
      if (max_delay_us_ > 0) {
        delay_us = static_cast<int64_t>(delay_rng_() % static_cast<uint64_t>(max_delay_us_ + 1));
      }
    }
    if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    task();  // an exception is stored in the ticket
  }
}

}  // namespace lt::exec
