#pragma once
// A causal language model of one of the supported families, as a chain of
// stages, built from a ModelConfig and loaded from / saved to a Hugging
// Face folder (config.json + safetensors) by io/hf_model.h.

#include <map>
#include <memory>

#include "core/random.h"
#include "models/config.h"
#include "models/stages.h"

namespace lt::models {

class CompiledBlocks;

class CausalLM {
 public:
  // Hugging Face's initialization: N(0, 0.02) for linear and embedding
  // weights, zero biases, unit norm weights.
  static CausalLM random(const ModelConfig& config, Generator& gen, DType dtype = DType::F32);
  // Parameters allocated but not initialized, for loading (io/hf_model.h).
  static CausalLM uninitialized(const ModelConfig& config, DType dtype = DType::F32);

  // For a run whose stages keep their masters on disk, loaded a stage at a
  // time (Note [Stage states on disk], "the start"): as random() and
  // uninitialized(), but the stages flagged in `without_memory` (per stage
  // of stages(); missing = false) hold parameters of their shapes and
  // dtypes without memory (a stage's memory is held only while it is
  // built). random() with flags draws from `gen` exactly what random()
  // draws, and `starts` receives, per flagged stage, the generator as it
  // was at that stage's start, for fill_random_stage().
  static CausalLM random(const ModelConfig& config, Generator& gen, DType dtype,
                         const std::vector<bool>& without_memory,
                         std::map<size_t, Generator>& starts);
  static CausalLM uninitialized(const ModelConfig& config, DType dtype,
                                const std::vector<bool>& without_memory);
  // Writes into stage `stage`'s parameters (which must have memory by now)
  // the values random() gives them, drawn from `start`: the generator as
  // it was at that stage's start. Holds one more copy of the stage while
  // it draws.
  void fill_random_stage(size_t stage, Generator start) const;

  const ModelConfig& config() const { return config_; }
  // Where the parameters live (the CPU unless moved by to()).
  Device device() const { return device_; }
  // Moves every parameter to `device` as `dtype`, in place: the modules'
  // handles (and a tied lm_head) follow, since they share the tensors.
  // keep_values = false allocates without copying (values undefined), for a
  // model about to be overwritten. The rope tables follow on the next use.
  void to(Device device, DType dtype, bool keep_values = true);
  // For a model whose parameters its user places stage by stage (streamed
  // generation keeps blocks in host memory and points them at device copies
  // while they run, exec/streamed_weights.h): the device it computes on,
  // where inputs, rope tables and caches go. Moves nothing.
  void set_compute_device(Device device);
  const StageChain& stages() const { return stages_; }
  nn::NamedParameters parameters() const;  // internal names, stage order

  // The context for a forward over sequences of `seq_len` tokens; the rope
  // table grows on demand (not thread-safe).
  StageContext context(int64_t seq_len, Tensor targets = Tensor(),
                       double loss_denominator = 1.0) const;
  // ids [B, T] -> loss over `targets` [B, T] (-100 = ignored), divided by
  // loss_denominator (pass the number of counted targets for the mean).
  Tensor loss(const Tensor& ids, const Tensor& targets, double loss_denominator) const;
  // ids [B, T] -> logits [B, T, V].
  Tensor logits(const Tensor& ids) const;

  // train.compile: loss() and logits() run the block stages through
  // `compiled` (models/compiled_blocks.h); null: as they are.
  void use_compiled_blocks(std::shared_ptr<CompiledBlocks> compiled) {
    compiled_ = std::move(compiled);
  }
  const std::shared_ptr<CompiledBlocks>& compiled_blocks() const { return compiled_; }
  // One stage's forward as loss() runs it: through the compiled blocks when
  // the model has them. For executors that run the stages themselves (the
  // streaming executor).
  Tensor run_stage(const Stage& stage, const Tensor& x, const StageContext& ctx) const;

 private:
  CausalLM(const ModelConfig& config, Generator* gen, DType dtype,
           const std::vector<bool>& without_memory = {},
           std::map<size_t, Generator>* starts = nullptr);
  ModelConfig config_;
  StageChain stages_;
  mutable RopeTable rope_;
  Device device_ = Device::cpu();
  std::shared_ptr<CompiledBlocks> compiled_;
};

// Counts targets that are not -100.
int64_t count_targets(const Tensor& targets);
// Next-token targets for ids [B, T]: targets[b, t] = ids[b, t + 1], and -100
// for the last position.
Tensor shift_targets(const Tensor& ids);

// Positions the rope table CausalLM::context keeps for sequences of
// `seq_len` tokens: 256, or the power of two that holds them.
int64_t rope_table_positions(int64_t seq_len);

}  // namespace lt::models
