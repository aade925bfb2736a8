#pragma once
// An executor runs one optimizer step: forward and backward over the
// global batch (as micro-batches), the global gradient norm, clipping and
// the update. docs/design.md, "Executors".
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/batching.h"
#include "exec/step_stats.h"
#include "models/causal_lm.h"
#include "optim/clip.h"
#include "optim/optimizer.h"

namespace lt::exec {

// What starts the names of Executor::checkpoint_state()'s tensors, which
// the optimizer's own load leaves out.
inline constexpr std::string_view kExecutorStatePrefix = "executor.";

class StagedStates;

// The executors a run may use. Names are the YAML's and the schedule JSON's
// ("resident", "streaming", "offload", "zenflow"); inside the program it is
// this enum.
enum class ExecutorKind { Resident, Streaming, Offload, ZenFlow };
const char* executor_name(ExecutorKind kind);
// Throws lt::Error naming `where` and the names allowed.
ExecutorKind parse_executor(const std::string& name, const std::string& where);

struct StepOptions {
  double lr = 0;             // learning rate for this step
  double max_grad_norm = 0;  // 0 = no clipping
  // train.clip_with_previous_norm: the update uses the clip factor of
  // `previous_grad_norm` (the step before's global norm) instead of this
  // step's, which lets the streaming executor update each stage during the
  // backward. A non-finite previous norm (the first step, or one after a
  // skipped step) means none: this step clips with its own norm.
  bool clip_with_previous_norm = false;
  double previous_grad_norm = std::numeric_limits<double>::quiet_NaN();
};

// The clip factor a step's update uses if it is known before the step's
// own gradient norm: with clip_with_previous_norm, that of the previous
// norm (or 1 with clipping off); else none (exact clipping waits for the
// norm).
inline std::optional<double> clip_scale_before_backward(const StepOptions& options) {
  if (!options.clip_with_previous_norm) return std::nullopt;
  if (options.max_grad_norm <= 0) return 1.0;
  if (!std::isfinite(options.previous_grad_norm)) return std::nullopt;
  return optim::clip_scale(options.previous_grad_norm, options.max_grad_norm);
}

class Executor {
 public:
  virtual ~Executor() = default;
  // `micro_batches` together form the global batch; the loss is the mean
  // over all their counted targets (not the mean of per-batch means).
  virtual StepStats step(const std::vector<data::Batch>& micro_batches,
                         const StepOptions& options) = 0;
  virtual const char* name() const = 0;
  // Waits for work a step left running (the streaming executor's pipelined
  // optimizer updates). Call it before reading parameters or optimizer
  // state: checkpoints, evaluation, the end of a run.
  virtual void sync() {}
  // Brings the f32 masters and the optimizer state up to date with all
  // training so far, for a checkpoint (ZenFlow keeps part of both on the
  // device and an open window of gradients; see exec/offload.h). Includes
  // sync().
  virtual void sync_masters() { sync(); }
  // Waits as sync_masters() does, but leaves the stages that
  // exec.state_placement put on disk there, and returns how to read and
  // write them a stage at a time (exec/staged_states.h); null for an
  // executor that keeps every master and state in host memory (call
  // sync_masters() then).
  virtual StagedStates* sync_staged() { return nullptr; }
  // A resumed run continues at optimizer step `step` (before its first
  // step()): for executors whose policy counts steps (ZenFlow's warm-up
  // and reselection).
  virtual void resume_at(int64_t /*step*/) {}
  // State the executor keeps beyond the optimizer's, saved in the
  // checkpoint's optimizer file beside it, each name starting with
  // kExecutorStatePrefix (ZenFlow: the device's columns and their moments,
  // Note [ZenFlow's saves]); call after sync_masters() or sync_staged().
  virtual optim::NamedTensors checkpoint_state() const { return {}; }
  // Takes back checkpoint_state()'s part of a checkpoint's optimizer file
  // `saved` (before the first step()). "" when taken, or when the
  // checkpoint holds none to take; else why it is not (a note).
  virtual std::string restore_checkpoint_state(const optim::NamedTensors& /*saved*/) { return ""; }
  // The model evaluation reads, as this executor trains it (the resident
  // executor's bf16 compute copy on a GPU; else the f32 masters). Call
  // sync() first.
  virtual const models::CausalLM& eval_model() const = 0;
};

}  // namespace lt::exec
