#pragma once
// The GPT-2 goldens in llm.c's manner (tools/reference/make_gpt2_golden.py,
// transformers' GPT2LMHeadModel in float64): a 2-layer GPT-2 (n_embd 128,
// head_dim 64, vocabulary 313) with its logits, loss and every gradient on
// one fixed batch, and the losses and gradient norms of 10 AdamW steps with
// clipping 1.0 on that batch. Shared by tests/exec/gpt2_golden_test.cpp
// (CPU, f32) and tests/gpu/gpt2_golden_gpu_test.cpp (bf16).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "data/batching.h"
#include "exec/resident.h"
#include "io/hf_model.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"
#include "models/hf_mapping.h"
#include "optim/adamw.h"
#include "support/gradcheck.h"

namespace lt::testing::gpt2_golden {

inline std::filesystem::path folder() {
  return std::filesystem::path(LT_SOURCE_DIR) / "tests/models/fixtures/gpt2_golden";
}

inline std::map<std::string, Tensor> reference() {
  return io::read_safetensors(folder() / "reference.safetensors");
}

// training.json's run in `precision` ("f64" or "f32"): "loss", "grad_norm".
inline std::vector<double> training(const std::string& precision, const std::string& field) {
  std::ifstream in(folder() / "training.json");
  EXPECT_TRUE(in.good()) << folder() / "training.json";
  return nlohmann::json::parse(in).at(precision).at(field).get<std::vector<double>>();
}

// The reference batch as the executor takes it (labels shifted as
// transformers shifts them: every position but each row's last).
inline data::Batch batch(const std::map<std::string, Tensor>& ref) {
  data::Batch b;
  b.ids = ref.at("input_ids").to(DType::I64);
  b.targets = models::shift_targets(ref.at("labels"));
  b.tokens = b.ids.numel();
  b.target_count = models::count_targets(b.targets);
  return b;
}

// What one forward and backward of `model` (on any device, any dtype) gives
// on the reference batch, on the host in f64: logits flattened, the loss,
// and every gradient under its Hugging Face name and layout.
struct Step0 {
  std::vector<double> logits;
  double loss = 0;
  std::map<std::string, std::vector<double>> grads;
};

inline Step0 step0(const models::CausalLM& model, const std::map<std::string, Tensor>& ref) {
  const data::Batch b = batch(ref);
  const Device device = model.device();
  Step0 out;
  {
    NoGradGuard no_grad;
    out.logits = model.logits(b.ids.to(device)).to(Device::cpu()).to_doubles();
  }
  Tensor loss =
      model.loss(b.ids.to(device), b.targets.to(device), static_cast<double>(b.target_count));
  out.loss = loss.to(Device::cpu()).item();
  backward(loss);
  std::map<std::string, Tensor> grads;
  for (auto& [name, p] : model.parameters()) {
    EXPECT_TRUE(p.grad().defined()) << name << " got no gradient";
    if (p.grad().defined()) grads[name] = p.grad().to(Device::cpu());
  }
  for (auto& [hf_name, grad] : models::to_hf_layout(model.config(), grads, DType::F64)) {
    out.grads[hf_name] = grad.to_doubles();
  }
  return out;
}

// The worst relative error norm over the gradients, each against its
// reference; fails the test for a gradient missing on either side.
inline double worst_gradient_error(const Step0& got, const std::map<std::string, Tensor>& ref,
                                   std::string* worst_name = nullptr) {
  double worst = 0;
  int references = 0;
  for (const auto& [name, expected] : ref) {
    if (name.rfind("grad.", 0) != 0) continue;
    ++references;
    auto it = got.grads.find(name.substr(5));
    EXPECT_NE(it, got.grads.end()) << "no gradient for " << name;
    if (it == got.grads.end()) continue;
    const double err = relative_error_norm(it->second, expected.to_doubles());
    if (err >= worst) {
      worst = err;
      if (worst_name) *worst_name = it->first;
    }
  }
  EXPECT_EQ(static_cast<size_t>(references), got.grads.size());
  return worst;
}

// The golden's 10 steps through the resident executor: AdamW lr 1e-3,
// betas (0.9, 0.95), eps 1e-8, weight decay 0.1 except on norms and biases
// (the 1-D parameters, as torch's run groups them), clipping at 1.0, the
// same batch every step. `model` holds f32 masters on its device; `compute`
// is the executor's compute dtype.
inline std::vector<exec::StepStats> train(const models::CausalLM& model, DType compute,
                                          const std::map<std::string, Tensor>& ref,
                                          int steps = 10) {
  optim::AdamWOptions o;
  o.lr = 1e-3;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-8;
  o.weight_decay = 0.1;
  optim::AdamW adam(model.parameters(), o, {"norm", "bias"});
  exec::ResidentExecutor executor(model, adam, compute);
  const std::vector<data::Batch> micro_batches = {batch(ref)};
  exec::StepOptions so;
  so.lr = 1e-3;
  so.max_grad_norm = 1.0;
  std::vector<exec::StepStats> stats;
  for (int s = 0; s < steps; ++s) stats.push_back(executor.step(micro_batches, so));
  return stats;
}

}  // namespace lt::testing::gpt2_golden
