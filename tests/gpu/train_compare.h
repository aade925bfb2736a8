#pragma once
// What the GPU training tests (resident_gpu_test, streaming_gpu_test)
// share: fixture paths, synthetic batches, and comparing two training runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/cuda/device_info.h"
#include "core/random.h"
#include "data/batching.h"
#include "exec/step_stats.h"
#include "gpu_test_support.h"
#include "models/causal_lm.h"
#include "support/random_batch.h"

namespace lt::exec::gpu_test {

inline std::filesystem::path fixture(const std::string& family) {
  return std::filesystem::path(LT_SOURCE_DIR) / "tests/models/fixtures/families" / family;
}

// `steps` global batches of two micro-batches of 2 rows; lengths differ
// between micro-batches, and targets 0 and `second_masked` are masked.
inline std::vector<std::vector<data::Batch>> make_batches(int steps, int64_t seq, int64_t vocab,
                                                          uint64_t seed, int64_t second_masked) {
  Generator gen(seed);
  std::vector<std::vector<data::Batch>> out(static_cast<size_t>(steps));
  for (auto& step : out) {
    for (int m = 0; m < 2; ++m) {
      step.push_back(
          lt::testing::random_token_batch(gen, 2, seq - 3 * m, vocab, {0, second_masked}));
    }
  }
  return out;
}

struct TrainRun {
  std::vector<StepStats> stats;
  std::vector<std::vector<double>> initial;  // masters before training, host
  std::vector<std::vector<double>> params;   // final masters, host
};

// Every parameter's values, copied to the host.
inline std::vector<std::vector<double>> host_values(const models::CausalLM& model) {
  std::vector<std::vector<double>> out;
  for (const auto& [name, p] : model.parameters()) out.push_back(p.to(Device::cpu()).to_doubles());
  return out;
}

inline double rel(double a, double b) {
  return std::abs(a - b) / std::max(std::abs(b), 1e-12);
}

// ||a - b|| / ||b - initial|| over all parameters: the error relative to
// how far training moved them (weights that barely move would make a
// plain relative error meaningless).
inline double update_rel_error(const TrainRun& a, const TrainRun& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.params.size(); ++i) {
    for (size_t j = 0; j < b.params[i].size(); ++j) {
      const double d = a.params[i][j] - b.params[i][j];
      const double moved = b.params[i][j] - b.initial[i][j];
      num += d * d;
      den += moved * moved;
    }
  }
  return std::sqrt(num / den);
}

// Each step's loss and gradient norm within `loss_tol` and `norm_tol`
// relative, and the final masters within `param_tol` (update_rel_error).
inline void compare_runs(const TrainRun& gpu, const TrainRun& cpu, double loss_tol, double norm_tol,
                         double param_tol, const std::string& label) {
  ASSERT_EQ(gpu.stats.size(), cpu.stats.size());
  for (size_t s = 0; s < cpu.stats.size(); ++s) {
    EXPECT_FALSE(gpu.stats[s].skipped) << label << " step " << s;
    EXPECT_LT(rel(gpu.stats[s].loss, cpu.stats[s].loss), loss_tol)
        << label << " step " << s << ": gpu loss " << gpu.stats[s].loss << ", cpu "
        << cpu.stats[s].loss;
    EXPECT_LT(rel(gpu.stats[s].grad_norm, cpu.stats[s].grad_norm), norm_tol)
        << label << " step " << s << ": gpu grad norm " << gpu.stats[s].grad_norm << ", cpu "
        << cpu.stats[s].grad_norm;
    EXPECT_GT(gpu.stats[s].peak_bytes.at("gpu"), 0) << label;
  }
  // The GPU's masters made the CPU's updates.
  EXPECT_LT(update_rel_error(gpu, cpu), param_tol) << label;
}

// ---- for the benchmarks (LT_BENCH=1) ----

// An integer setting from the environment, or `fallback` when unset.
inline int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

// Hugging Face-like random weights, fast: linear and embedding weights
// from a 16 M-value N(0, 0.02) table (made on the model's device, offset
// per tensor), norm weights 1, biases 0. Speed does not depend on the
// values, only on them being finite.
inline void fill_bench_weights(const models::CausalLM& model) {
  NoGradGuard no_grad;
  const int64_t table_size = int64_t{1} << 24;
  Generator gen(0);
  Tensor table = Tensor::randn({table_size}, gen, DType::F32, 0.02).to(model.device());
  int64_t shift = 0;
  for (const auto& [name, p] : model.parameters()) {
    Tensor flat = p.detach().view({-1});
    if (p.dim() < 2) {
      flat.copy_(Tensor::scalar(name.find("norm") != std::string::npos ? 1.0 : 0.0));
      continue;
    }
    for (int64_t at = 0; at < flat.numel(); at += table_size) {
      const int64_t n = std::min(table_size, flat.numel() - at);
      const int64_t from = (shift + at) % (table_size - n + 1);
      flat.slice(0, at, at + n).copy_(table.slice(0, from, from + n));
    }
    shift += 7919;
  }
}

}  // namespace lt::exec::gpu_test
