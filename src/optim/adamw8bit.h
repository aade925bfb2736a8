#pragma once
// Blockwise 8-bit AdamW (issue 9), the "hybrid":
// - A parameter with at least `min_8bit_numel` elements keeps m and sqrt(v)
//   as 8-bit codes (optim/adamw8bit_kernel.h: a signed dynamic code for m,
//   an unsigned one for sqrt(v), which is representable wherever m is; v
//   itself is not, see the Note there) with one f32 absmax scale per block
//   of `block_size` elements: ~2 bytes of state per parameter instead of 8.
// - Smaller parameters (norms, biases) keep f32 states through the fp32
//   AdamW itself: they are few bytes, and their moments are the ones where
//   quantization noise is least diluted.
// Parameters may live on the CPU (the fused kernels of adamw8bit_kernel.h and
// kernels_simd.h, AVX2/AVX-512 when the CPU has them) or, in a CUDA build,
// on a CUDA device (cuda/adamw8bit.cu: the same codes, scales and layout,
// the same result bit for bit). The fp32 master stays fp32. The update math is AdamW's (decoupled
// decay, bias correction, grad_scale folded in) in the same operation order, so the only difference
// from AdamW is the rounding of m and sqrt(v) to the code. update() checks every gradient, then
// hands each 8-bit parameter to the backend of its device: on the CPU every block in one fused pass
// (dequantize, update, requantize) in parallel over blocks, a block by one thread alone, so results
// do not depend on the number of threads; on CUDA one kernel per parameter.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"

namespace lt::optim {

// The config keys optim.block_size and optim.min_8bit_numel.
struct AdamW8bitOptions {
  int64_t block_size = 2048;      // elements per absmax scale
  int64_t min_8bit_numel = 4096;  // smaller tensors keep f32 states
};

// The largest block_size (per-thread scratch is 8 bytes per element).
constexpr int64_t kMaxBlockSize = int64_t{1} << 20;

// Throws lt::Error naming the key (optim.block_size, optim.min_8bit_numel).
void validate(const AdamW8bitOptions& options);

class AdamW8bit final : public Optimizer {
 public:
  // `states_without_memory`: as AdamW's (codes, scales and small
  // parameters' moments alike).
  AdamW8bit(const nn::NamedParameters& params, AdamWOptions options,
            std::vector<std::string> no_decay_substrings = {}, AdamW8bitOptions opts8 = {},
            const std::vector<bool>& states_without_memory = {});

  size_t size() const override { return params_.size(); }
  void update(double lr, double grad_scale, size_t first, size_t last) override;
  void finish_step() override;
  void set_bf16_shadow(size_t index, Tensor shadow) override;
  void reset_state(size_t index) override;
  // The 8-bit parameters' updates then run compiled_adamw8bit_update, the
  // small ones AdamW's compiled update.
  bool use_compiled_updates(std::shared_ptr<compile::KernelCache> cache) override;
  int64_t compiled_updates() const override;
  std::string compiled_fallback() const override;

  // The instruction set of the CPU kernels (active_isa() unless set; same
  // result bit for bit on each).
  Isa isa() const { return isa_; }
  void set_isa(Isa isa);

  int64_t step_count() const { return step_count_; }
  const AdamWOptions& options() const { return options_; }
  const AdamW8bitOptions& options8() const { return opts8_; }

  // How many parameter elements (not tensors) take each path.
  struct Split {
    int64_t quantized = 0;  // 8-bit states
    int64_t fp32 = 0;       // f32 states (small tensors)
  };
  Split split() const;
  // Whether parameter i (constructor order) has 8-bit states.
  bool is_quantized(size_t i) const { return slot_.at(i) >= 0; }

  // Checkpoint state, in parameter order. An 8-bit parameter has
  //   "<name>.exp_avg.codes", "<name>.sqrt_exp_avg_sq.codes"    u8, the parameter's numel
  //   "<name>.exp_avg.scales", "<name>.sqrt_exp_avg_sq.scales"  f32, one per block
  //   "<name>.step"                                             i64 scalar
  // (sqrt_exp_avg_sq: the codes of sqrt(v)), an f32 one AdamW's
  // "<name>.exp_avg", "<name>.exp_avg_sq", "<name>.step", and last "step" =
  // step_count(). state() returns live tensors (no copy); load_state()
  // copies exactly these back (the codes, bit for bit) and refuses anything
  // else, naming the offending entry; the earlier layout's 8-bit v
  // ("<name>.exp_avg_sq.codes") is refused with a message of its own.
  NamedTensors state() const override;
  void load_state(const NamedTensors& state) override;

 private:
  struct Quantized {
    size_t param;                    // index into params_
    Tensor m_codes, sqrt_v_codes;    // u8 [numel]
    Tensor m_scales, sqrt_v_scales;  // f32 [blocks]
    int64_t steps = 0;
    Tensor shadow;  // bf16 [numel] or undefined
  };
  nn::NamedParameters params_;
  AdamWOptions options_;
  AdamW8bitOptions opts8_;
  std::vector<double> decay_;  // per parameter
  std::vector<int> slot_;      // per parameter: index into q_, or -1 (fp32 path)
  std::vector<Quantized> q_;
  nn::NamedParameters small_;    // the fp32-path parameters
  std::unique_ptr<AdamW> fp32_;  // their optimizer
  int64_t step_count_ = 0;
  Isa isa_ = active_isa();
  // train.compile: the 8-bit update's kernels, resolved once
  // (compiled_update_kernels.h)
  std::shared_ptr<CompiledUpdateKernels> compiled_;
  int64_t compiled_updates_ = 0;   // of 8-bit parameters
  std::string compiled_fallback_;  // of 8-bit parameters

  // update()'s backends, one per device kind (adamw8bit.cpp).
  struct Job;
  void update_on_cpu(const std::vector<Job>& jobs) const;
  void update_on_cuda(const std::vector<Job>& jobs) const;
  // Whether every kernel `jobs` need can be had; if not, says why in
  // compiled_fallback_ and drops the compiled updates.
  // If so, each job has its kernel.
  bool compiled_kernels_ready(const std::vector<std::vector<Job>*>& jobs);
  void update_compiled(const std::vector<Job>& cpu_jobs, const std::vector<Job>& cuda_jobs);
};

}  // namespace lt::optim
