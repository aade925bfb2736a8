#pragma once
// Recording a stage's differentiable calls, for the fusion pass
// (autograd/fused_program.h): while a CallTrace is active on this thread,
// each function of autograd/functions.h that is called from outside
// another one appends what it was called with, what it returned, and how
// to call it again on other inputs. Nested calls (mean calls sum and
// scale) are part of the outer call. When no trace is active the cost is
// one thread-local read per call.
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace lt::autograd {

using CallAgain = std::function<Tensor(const std::vector<Tensor>& inputs)>;

struct TracedCall {
  std::string fn;               // "add", "rms_norm", "linear", ...
  std::vector<Tensor> inputs;   // as passed (undefined: an optional input left out)
  Tensor output;                //
  std::vector<double> numbers;  // eps, a scale: what the pass needs to know besides tensors
  CallAgain again;              // the same function with the same arguments but the tensors
};

struct CallTrace {
  std::vector<TracedCall> calls;
};

namespace detail {
extern thread_local CallTrace* active_trace;
extern thread_local int traced_depth;
}  // namespace detail

// True when a trace is active and this is not a nested call.
inline bool tracing() {
  return detail::active_trace != nullptr && detail::traced_depth == 0;
}

// Runs `again(inputs)` as a nested call and records it. Call only when
// tracing() (the functions do: `if (tracing()) return traced(...)`).
Tensor traced(const char* fn, std::vector<Tensor> inputs, std::vector<double> numbers,
              CallAgain again);

// Makes `trace` the active one on this thread for the scope's life.
class TraceScope {
 public:
  explicit TraceScope(CallTrace& trace);
  ~TraceScope();
  TraceScope(const TraceScope&) = delete;
  TraceScope& operator=(const TraceScope&) = delete;

 private:
  CallTrace* previous_;
};

}  // namespace lt::autograd
