#include "core/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <exception>

namespace lt {

namespace {
thread_local bool inside_pool_job = false;
}

ThreadPool::ThreadPool(int num_threads) {
  for (int i = 1; i < std::max(num_threads, 1); ++i)
    workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::parallel_for(int64_t begin, int64_t end, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  if (end <= begin) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t n = end - begin;
  if (inside_pool_job || workers_.empty() || n <= grain) {
    fn(begin, end);
    return;
  }
  std::lock_guard<std::mutex> run_lock(run_mutex_);
  // Many chunks per thread, so that a thread the OS takes away for a
  // while holds up the others for a short chunk only (the threads take
  // chunks without a lock). With 4 a thread, the streaming executor's CPU
  // update of a 7B kept its 16 threads 85% busy on the H200 machine,
  // beside the run's compute and copy threads; with 32, 95%, and the
  // update took 3.6% less time (bench/RESULTS.md, session 25).
  const int64_t target_chunks = static_cast<int64_t>(num_threads()) * 32;
  const int64_t chunk = std::max(grain, (n + target_chunks - 1) / target_chunks);
  std::exception_ptr error;
  std::mutex error_mutex;
  auto guarded = [&](int64_t b, int64_t e) {
    try {
      fn(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  const std::function<void(int64_t, int64_t)> job = guarded;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    job_end_ = end;
    chunk_ = chunk;
    next_.store(begin, std::memory_order_relaxed);
    active_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  inside_pool_job = true;
  for (int64_t b; (b = next_.fetch_add(chunk, std::memory_order_relaxed)) < end;)
    job(b, std::min(end, b + chunk));
  inside_pool_job = false;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return active_ == 0; });
    job_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  inside_pool_job = true;
  while (true) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    // The job's fields stay as they are until every worker has left it.
    const auto* job = job_;
    const int64_t end = job_end_, chunk = chunk_;
    lock.unlock();
    for (int64_t b; (b = next_.fetch_add(chunk, std::memory_order_relaxed)) < end;)
      (*job)(b, std::min(end, b + chunk));
    lock.lock();
    if (--active_ == 0) done_.notify_all();
  }
}

ThreadPool& thread_pool() {
  static ThreadPool* pool = [] {
    int n = static_cast<int>(std::thread::hardware_concurrency());
    if (const char* env = std::getenv("LT_NUM_THREADS")) n = std::atoi(env);
    return new ThreadPool(std::max(n, 1));  // never destroyed: workers outlive static teardown
  }();
  return *pool;
}

}  // namespace lt
