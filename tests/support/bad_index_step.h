#pragma once
// A resident training step given a token id or a target outside the
// vocabulary must stop with an error naming the value, where it is and the
// vocabulary, before any update (the masters unchanged); the next good step
// then runs. On the CPU the op checks before it runs; on a GPU the kernels
// record the bad index on the device and the step throws it after its one
// wait for the device (exec/forward_backward.cpp). Shared by
// tests/exec/resident_bad_index_test.cpp and tests/gpu/resident_bad_index_gpu_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "exec/resident.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "support/random_batch.h"

namespace lt::testing {

// Every parameter's values on the host.
inline std::vector<std::vector<double>> parameter_values(const models::CausalLM& model) {
  std::vector<std::vector<double>> out;
  for (const auto& [name, p] : model.parameters()) out.push_back(p.to(Device::cpu()).to_doubles());
  return out;
}

// Trains the gpt2 fixture (vocabulary 97) on `device` in `compute`: a step
// of two micro-batches, the second changed by `spoil`, must throw an error
// containing every one of `expected`; the masters must be unchanged; a good
// step after it must update them.
inline void expect_bad_index_stops_the_step(Device device, DType compute,
                                            const std::function<void(data::Batch&)>& spoil,
                                            const std::vector<std::string>& expected) {
  models::CausalLM model = io::load_hf_model(std::filesystem::path(LT_SOURCE_DIR) /
                                             "tests/models/fixtures/families/gpt2");
  if (device.is_cuda()) model.to(device, DType::F32);
  optim::AdamW adam(model.parameters(), optim::AdamWOptions{}, {"norm"});
  exec::ResidentExecutor executor(model, adam, compute);
  Generator gen(7);
  std::vector<data::Batch> good, bad;
  for (int m = 0; m < 2; ++m) good.push_back(random_token_batch(gen, 2, 12, 97));
  for (int m = 0; m < 2; ++m) bad.push_back(random_token_batch(gen, 2, 12, 97));
  bad[1].ids = bad[1].ids.clone();
  bad[1].targets = bad[1].targets.clone();
  spoil(bad[1]);
  const auto initial = parameter_values(model);
  exec::StepOptions so;
  so.lr = 1e-2;
  so.max_grad_norm = 1.0;
  std::string message;
  try {
    executor.step(bad, so);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_FALSE(message.empty()) << "a step with a bad index ran to its end";
  for (const std::string& part : expected) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
  EXPECT_EQ(parameter_values(model), initial) << "the failed step updated the masters";
  const exec::StepStats ok = executor.step(good, so);
  EXPECT_FALSE(ok.skipped);
  EXPECT_TRUE(std::isfinite(ok.loss));
  EXPECT_NE(parameter_values(model), initial);
}

// Id 97 at flat position 5 of the ids (row 0, column 5).
inline void spoil_id(data::Batch& b) {
  b.ids.data<int64_t>()[5] = 97;
}

// Target 97 at row 1, column 2 (flat position 14 of [2, 12]).
inline void spoil_target(data::Batch& b) {
  b.targets.data<int64_t>()[14] = 97;
}

}  // namespace lt::testing
