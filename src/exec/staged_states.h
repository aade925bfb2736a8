#pragma once
// StagedStates: the f32 masters and optimizer states of an executor that
// keeps some stages of them on disk between steps (exec.state_placement;
// Note [Stage states on disk], exec/streaming_states.cpp), read and written
// one stage at a time. A checkpoint, an evaluation and a resume go through
// it instead of reading every stage back (sync()), so that host memory
// holds one stage beyond what a step holds, whatever the model's size.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "optim/optimizer.h"

namespace lt::models {
class CausalLM;
}

namespace lt::exec {

// Per parameter of model.parameters(), in order: the flag of the stage
// that owns it (per stage of model.stages(); missing = false), e.g. which
// parameters' optimizer states to make without memory for the stages
// StreamingOptions::states_on_disk puts on disk.
std::vector<bool> flags_per_parameter(const models::CausalLM& model,
                                      const std::vector<bool>& per_stage);

class StagedStates {
 public:
  virtual ~StagedStates() = default;
  // Per stage of model.stages(): whether its masters and optimizer states
  // are on disk now. Their tensors (the model's parameters, the tensors of
  // optimizer.state()) then have shapes and dtypes but no memory.
  virtual std::vector<bool> on_disk() const = 0;
  // The names of a disk stage's tensors: its parameters' (as
  // model.parameters() names them) and its optimizer states' (as
  // optimizer.state() does).
  virtual std::vector<std::string> names(size_t stage) const = 0;
  // A disk stage's tensors by those names, read into fresh host memory
  // that only the result holds (dropping it frees it).
  virtual std::map<std::string, Tensor> read(size_t stage) = 0;
  // For the returned object's life, the model's parameters that stage
  // `stage` reads (its own, and a tied weight of another stage) and that
  // are on disk point at host memory read for it: an evaluation that walks
  // the stages in order.
  virtual std::shared_ptr<void> bring_in_weights(size_t stage) = 0;
  // optimizer.load_state(state), each disk stage's part written into its
  // place on disk one stage at a time.
  virtual void load_optimizer_state(const optim::NamedTensors& state) = 0;
};

}  // namespace lt::exec
