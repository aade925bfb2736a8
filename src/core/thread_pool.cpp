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
  // Several chunks per thread balance uneven work without much overhead.
  const int64_t target_chunks = static_cast<int64_t>(num_threads()) * 4;
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
    job_begin_ = begin;
    job_end_ = end;
    chunk_ = chunk;
    next_ = begin;
    active_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  wake_.notify_all();
  inside_pool_job = true;
  while (true) {
    int64_t b;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_ >= job_end_) break;
      b = next_;
      next_ = std::min(job_end_, next_ + chunk_);
    }
    job(b, std::min(job_end_, b + chunk_));
  }
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
    while (next_ < job_end_) {
      int64_t b = next_;
      next_ = std::min(job_end_, next_ + chunk_);
      const auto* job = job_;
      lock.unlock();
      (*job)(b, std::min(job_end_, b + chunk_));
      lock.lock();
    }
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
