#pragma once
// train.compile (issue 24): the decoder blocks' forward runs through fused
// programs (autograd/fused_program.h). The first forward of a block for a
// given input shape, dtype and grad mode runs as before while its calls are
// traced; the fusion pass then compiles its chains (through the kernel
// cache: a graph compiles once per process, and once per machine with a
// cache folder) and later forwards of that shape replay the program. A
// block whose trace cannot be replayed keeps running as before, and the
// reason is kept for the run's log. On a CUDA device the chains run as
// cubins (compile/gpu_kernel.h); where the build cannot compile them (no
// MLIR) they must be in the cache folder already, else the block runs
// unfused and the log says which kernel was missing.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/fused_program.h"
#include "compile/kernel_cache.h"
#include "models/config.h"
#include "models/stage.h"

namespace lt::models {

struct CompiledBlockStats {
  int64_t programs = 0;         // traced and compiled (one per block and graph shape)
  int64_t chains = 0;           // fused chains over all programs
  int64_t chains_as_calls = 0;  // chains the chooser found faster as calls
  int64_t fused_calls = 0;      // calls inside them
  int64_t calls = 0;            // calls traced, fused or not
  int64_t fallbacks = 0;        // traces that could not become programs
  std::string first_fallback;   // why the first one could not
  double build_seconds = 0.0;   // tracing aside: the pass and compiling
};

class CompiledBlocks {
 public:
  // With a `chooser` (train.compile auto on a GPU), a chain runs compiled
  // only where that is measured faster (autograd/chain_choice.h).
  explicit CompiledBlocks(std::shared_ptr<compile::KernelCache> cache,
                          std::shared_ptr<autograd::ChainChooser> chooser = nullptr);

  // `stage`'s forward (a block stage; the head with its loss's softmax
  // cross-entropy from this cache, autograd/cross_entropy_kernels.h; others
  // as they are).
  Tensor forward(const Stage& stage, const Tensor& x, const StageContext& ctx);

  CompiledBlockStats stats() const;
  // The chooser's, or none.
  const std::shared_ptr<autograd::ChainChooser>& chooser() const { return chooser_; }
  compile::KernelCacheStats cache_stats() const { return cache_->stats(); }
  // Where the kernels come from (the optimizer's compiled updates share it).
  const std::shared_ptr<compile::KernelCache>& cache() const { return cache_; }

 private:
  using Key = std::tuple<const Stage*, Shape, DType, std::string, bool, const void*>;
  std::shared_ptr<compile::KernelCache> cache_;
  std::shared_ptr<autograd::ChainChooser> chooser_;
  mutable std::mutex mutex_;
  std::map<Key, std::shared_ptr<const autograd::FusedProgram>> programs_;  // null: fallback
  CompiledBlockStats stats_;
};

// One line for the run's log: "compile: 2 blocks traced, 8 chains (13 of
// 29 calls) fused, kernels 16 compiled / 0 from disk / 4 reused, 3.1 s".
std::string compile_summary(const CompiledBlockStats& stats, const compile::KernelCacheStats& cache,
                            const autograd::ChainChooser* chooser = nullptr);

// The kernel graphs training `config` with compiled blocks in `dtype` (the
// compute dtype: bf16 on a GPU) runs, forward and backward: one block of
// the config traced on the CPU (the blocks of a model trace alike; the
// graphs hold no sizes), and the head's two cross-entropy kernels. For
// filling a cache folder ahead on a machine with MLIR for a GPU machine
// without (bench/compile_e2e.sh prebuild).
std::vector<compile::KernelGraph> block_kernel_graphs(const ModelConfig& config, DType dtype);

}  // namespace lt::models
