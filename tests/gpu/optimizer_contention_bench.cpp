// How fast the CPU optimizer runs beside what a streaming step does at the
// same time, to find where the 7B's in-run 8-bit update (~3.7 G params/s)
// loses to the profile's (~4.9, measured alone): host memory traffic from
// the copy engines, a thread spinning in a CUDA wait, or both. A benchmark:
// set LT_BENCH=1; it prints a table and asserts nothing about speed.
// `lazytrain profile` measures the "copies" column
// (cpu_adam*_beside_copies_gparams_per_s).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/thread_pool.h"
#include "gpu_test_support.h"
#include "plan/profile.h"

namespace lt {
namespace {

// A thread that never yields, like one spinning in cudaEventSynchronize
// under the default (spin) scheduling.
class Spinner {
 public:
  Spinner()
      : worker_([this] {
          while (!stop_.load(std::memory_order_relaxed)) {
          }
        }) {}
  ~Spinner() {
    stop_ = true;
    worker_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread worker_;
};

TEST(OptimizerContentionBench, EightBitAndFp32BesideCopiesAndASpinner) {
  LT_REQUIRE_GPU();
  if (std::getenv("LT_BENCH") == nullptr) GTEST_SKIP() << "benchmark: set LT_BENCH=1";
  const int64_t n = 233'000'000;  // one Qwen2.5-7B block
  std::printf("threads %d\n| optimizer | alone | spinner | copies (GB/s) | copies + spinner |\n",
              thread_pool().num_threads());
  auto row = [&](const char* name, auto measure) {
    const double alone = measure();
    double spin = 0, copies = 0, both = 0, copy_gbps = 0;
    {
      Spinner s;
      spin = measure();
    }
    {
      plan::BackgroundCopies c(0, int64_t{256} << 20);
      copies = measure();
      copy_gbps = c.gbps();
      Spinner s;
      both = measure();
    }
    std::printf("| %s | %.2f | %.2f | %.2f (%.1f) | %.2f |\n", name, alone, spin, copies, copy_gbps,
                both);
  };
  row("adamw8bit", [&] { return plan::optimizer_gparams_per_s(true, n, 7, true); });
  row("adamw", [&] { return plan::optimizer_gparams_per_s(false, n, 7, true); });
}

}  // namespace
}  // namespace lt
