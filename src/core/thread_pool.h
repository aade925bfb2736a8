#pragma once
// A fixed pool of worker threads for CPU kernels. parallel_for splits a
// range into contiguous chunks, runs them on the workers and the calling
// thread, and returns when all are done. Nested calls from inside a worker
// run serially, so kernels may call each other freely.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lt {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // total threads including the caller
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(begin, end) over [begin, end) in chunks of at least `grain`.
  void parallel_for(int64_t begin, int64_t end, int64_t grain,
                    const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop();
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_end_ = 0, chunk_ = 0;
  std::atomic<int64_t> next_ = 0;  // next chunk start: taken by fetch_add, no lock
  int active_ = 0;                 // workers still inside the current job
  uint64_t generation_ = 0;        // bumps per job so workers join each job once
  bool stop_ = false;
  std::mutex run_mutex_;  // one job at a time
};

// The process-wide pool. Size: LT_NUM_THREADS, else the hardware threads.
ThreadPool& thread_pool();

inline void parallel_for(int64_t begin, int64_t end, int64_t grain,
                         const std::function<void(int64_t, int64_t)>& fn) {
  thread_pool().parallel_for(begin, end, grain, fn);
}

}  // namespace lt
