#include "autograd/trace.h"

namespace lt::autograd {

namespace detail {
thread_local CallTrace* active_trace = nullptr;
thread_local int traced_depth = 0;
}  // namespace detail

Tensor traced(const char* fn, std::vector<Tensor> inputs, std::vector<double> numbers,
              CallAgain again) {
  ++detail::traced_depth;
  Tensor out;
  try {
    out = again(inputs);
  } catch (...) {
    --detail::traced_depth;
    throw;
  }
  --detail::traced_depth;
  if (detail::active_trace != nullptr) {
    detail::active_trace->calls.push_back(
        {fn, std::move(inputs), out, std::move(numbers), std::move(again)});
  }
  return out;
}

TraceScope::TraceScope(CallTrace& trace) : previous_(detail::active_trace) {
  detail::active_trace = &trace;
}

TraceScope::~TraceScope() {
  detail::active_trace = previous_;
}

}  // namespace lt::autograd
