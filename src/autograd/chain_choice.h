#pragma once
// Which chains of a fused program run compiled (train.compile auto on a
// GPU, issue 24): a chain runs compiled only where its compiled kernels,
// forward and backward, take less time than its calls one by one on the
// same inputs. On the H200 the compiled chains ran from 0.7x to 1.2x the
// hand-written kernels' time depending on the chain and the row width
// (GPT-2's LayerNorm chains at rows of 768 slower, the wide SwiGLU and
// AdamW faster; bench/RESULTS.md), so no fixed list is right for every
// model and GPU.
//
// Each chain class (its forward kernel graph and its inputs' shapes and
// dtypes, on this machine, for these kernels) is measured once: both ways
// on random inputs, a warm-up then the median of five trials of four
// forward + backward runs each. The choice is kept beside the kernels in the cache folder
// (<hash>.choice, compile/cache_entry.h), so that later runs on the machine
// make the same plan, and so the same numbers, without measuring; a damaged
// entry is measured again.
//
// A linear's bias split off into a chain goes back into the linear when the
// chain runs as calls (cuBLASLt adds it in the GEMM's epilogue), so the
// calls' time leaves the bias_add out.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "autograd/fusion_pass.h"
#include "autograd/trace.h"
#include "compile/kernel_cache.h"
#include "core/device.h"

namespace lt::autograd {

struct ChainTimes {
  double compiled_ms = 0;  // the chain's compiled forward + backward
  double calls_ms = 0;     // its calls one by one, forward + backward
};

struct ChainChoiceStats {
  int64_t measured = 0;       // chain classes timed in this process
  int64_t from_disk = 0;      // chain classes whose choice an earlier run kept
  int64_t compiled = 0;       // chain classes that run compiled
  int64_t as_calls = 0;       // chain classes that run as calls (slower, or not timed)
  std::string first_failure;  // why a chain could not be timed (it then runs as calls)
};

class ChainChooser {
 public:
  // `cache`: the chains' kernels, and the folder the choices are kept in
  // (none: memory only); it must outlive this. `machine`: what the times
  // depend on besides the chain (the GPU's name, the driver, the host).
  ChainChooser(compile::KernelCache& cache, std::string machine);
  virtual ~ChainChooser() = default;
  ChainChooser(const ChainChooser&) = delete;
  ChainChooser& operator=(const ChainChooser&) = delete;

  // Whether chain `chain` of (graph, plan) runs compiled on `device`;
  // `again` runs graph's nodes one by one (call_graph's). A rotary chain
  // does whenever its kernels can be had (its compiled kernel reads the
  // tables in place, where the calls copy them), untimed.
  bool runs_compiled(const CallGraph& graph, const FusionPlan& plan, int32_t chain,
                     const std::vector<CallAgain>& again, Device device);

  ChainChoiceStats stats() const;

 protected:
  // Both ways' times (tests replace it to force a choice).
  virtual ChainTimes measure(const CallGraph& graph, const FusionPlan& plan, int32_t chain,
                             const std::vector<CallAgain>& again, Device device);

 private:
  compile::KernelCache& cache_;
  std::string machine_;
  mutable std::mutex mutex_;
  std::map<std::string, bool> choices_;  // by entry key: runs compiled
  ChainChoiceStats stats_;
};

}  // namespace lt::autograd
