#pragma once
// An optimizer whose update fails on purpose, for the executors' tests of
// a failed update (tests/exec/streaming_update_error_test.cpp,
// offload_states_test.cpp).
#include <chrono>
#include <stdexcept>
#include <thread>

#include "optim/adamw.h"
#include "optim/optimizer.h"

namespace lt::exec {

// AdamW, except that the update of the parameter range starting at
// `fail_first` throws in optimizer step `fail_step` (0-based); updates of
// later ranges can be made slow, so that they are still queued when the
// test moves on.
class FailingOptimizer final : public optim::Optimizer {
 public:
  FailingOptimizer(const nn::NamedParameters& params, int fail_step, size_t fail_first)
      : inner_(params, optim::AdamWOptions{}), fail_step_(fail_step), fail_first_(fail_first) {}

  void slow_down_updates_after_the_failure(std::chrono::milliseconds delay) { delay_ = delay; }
  // Parameters updated, over every call (a call updates [first, last)).
  int parameters_updated() const { return parameters_updated_; }

  size_t size() const override { return inner_.size(); }
  void update(double lr, double grad_scale, size_t first, size_t last) override {
    if (steps_ == fail_step_ && first == fail_first_) {
      failed_ = true;
      throw std::runtime_error("injected failure");
    }
    if (failed_) std::this_thread::sleep_for(delay_);
    inner_.update(lr, grad_scale, first, last);
    parameters_updated_ += static_cast<int>(last - first);
  }
  void finish_step() override {
    ++steps_;
    inner_.finish_step();
  }
  void set_bf16_shadow(size_t index, Tensor shadow) override {
    inner_.set_bf16_shadow(index, std::move(shadow));
  }
  optim::NamedTensors state() const override { return inner_.state(); }
  void load_state(const optim::NamedTensors& state) override { inner_.load_state(state); }

 private:
  optim::AdamW inner_;
  int fail_step_;
  size_t fail_first_;
  int steps_ = 0;  // the optimizer thread's alone
  bool failed_ = false;
  int parameters_updated_ = 0;
  std::chrono::milliseconds delay_{0};
};

}  // namespace lt::exec
