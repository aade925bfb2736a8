// The gradient norm taken from grad-ready hooks on a CUDA device
// (optim/grad_norm_partials.h: per-gradient launches on a side stream, one
// final sum and read-back) against float64 sums of the same gradients
// copied to the host:
//  - GradNormPartials directly, f32 and bf16 gradients (one over several
//    2^16 chunks), a parameter without a gradient, a tied use, gradients
//    accumulated over two backwards (armed for the last), and gradients no
//    hook delivered (taken by finish());
//  - the resident executor on the GPU, f32 and bf16 compute, tied and
//    untied, one and several micro-batches, two references per step:
//    (1) the float64 sum of the very gradients the step made, copied to the
//    host by a hook of this test (each parameter's last one: its final
//    gradient), to 1e-12; (2) the plain engine's gradients of the
//    executor's compute model for the same micro-batches, computed just
//    before the step: a second backward, whose kernels may add in another
//    order (atomics in attention), so 1e-6 (f32) and 1e-4 (bf16, one ulp
//    is 4e-3 of a value) relative.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "exec/resident.h"
#include "gpu_test_support.h"
#include "io/hf_model.h"
#include "nn/module.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/grad_norm_partials.h"
#include "support/grad_squares.h"
#include "support/random_batch.h"

namespace lt {
namespace {

using lt::testing::grad_squares_f64;
using lt::testing::squares_f64;

TEST(GradNormPartialsGpu, MatchesFloat64Reference) {
  LT_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  Generator gen(7);
  auto param = [&](const Shape& shape, DType dtype, const std::string& name) {
    return nn::make_parameter(Tensor::randn(shape, gen, dtype).to(gpu), name);
  };
  Tensor a = param({3, 70001}, DType::F32, "a");
  Tensor b = param({13, 17}, DType::BF16, "b");
  Tensor c = param({5}, DType::F32, "c");  // no gradient
  Tensor d = param({9}, DType::F32, "d");  // used twice
  Tensor e = param({4, 6}, DType::F32, "e");
  nn::NamedParameters params = {{"a", a}, {"b", b}, {"c", c}, {"d", d}, {"e", e}};
  auto weighted = [&](const Tensor& p) {
    const Tensor k = Tensor::randn(p.shape(), gen, DType::F32, 0.5).to(gpu);
    return sum(mul(p.dtype() == DType::F32 ? p : cast(p, DType::F32), k));
  };
  auto loss = [&](bool with_e) {
    Tensor l = add(add(weighted(a), weighted(b)), add(weighted(d), weighted(d)));
    return with_e ? add(l, weighted(e)) : l;
  };
  optim::GradNormPartials partials(params);
  for (int step = 0; step < 3; ++step) {
    for (auto& [name, p] : params) p.set_grad(Tensor());
    partials.begin();
    if (step == 0) {
      partials.arm();
      backward(loss(true));
    } else {
      // Accumulated over two backwards, armed for the last; e's gradient
      // (step 1) comes from the first only, and step 2 arms nothing.
      backward(loss(true));
      if (step == 1) partials.arm();
      backward(loss(false));
    }
    partials.finish();
    const double got = partials.squared_sum();
    const double want = grad_squares_f64(params);
    ASSERT_FALSE(c.grad().defined());
    EXPECT_NEAR(got, want, 1e-12 * want) << "step " << step;
    // The same first pass as the one-launch reduction.
    const double one_pass = optim::grad_squared_sum(params);
    EXPECT_NEAR(got, one_pass, 1e-13 * one_pass) << "step " << step;
  }
}

double reference_squared_sum(const models::CausalLM& model,
                             const std::vector<data::Batch>& micro_batches) {
  int64_t targets = 0;
  for (const auto& mb : micro_batches) targets += mb.target_count;
  const auto params = model.parameters();
  for (const auto& [name, p] : params) p.set_grad(Tensor());
  for (const auto& mb : micro_batches) {
    if (mb.target_count == 0) continue;
    backward(model.loss(mb.ids.to(model.device()), mb.targets.to(model.device()),
                        static_cast<double>(targets)));
  }
  const double s = grad_squares_f64(params);
  for (const auto& [name, p] : params) p.set_grad(Tensor());
  return s;
}

struct Case {
  std::string family;
  DType compute;
  int micro;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.family << " " << dtype_name(c.compute) << " x" << c.micro;
}

class ResidentGradNormGpu : public ::testing::TestWithParam<Case> {};

TEST_P(ResidentGradNormGpu, StepNormMatchesFloat64Reference) {
  LT_REQUIRE_GPU();
  const Case& c = GetParam();
  models::CausalLM model =
      io::load_hf_model(std::string(LT_SOURCE_DIR) + "/tests/models/fixtures/families/" + c.family);
  model.to(Device::cuda(0), DType::F32);
  optim::AdamWOptions o;
  o.lr = 2e-3;
  optim::AdamW adam(model.parameters(), o, {"norm"});
  exec::ResidentExecutor executor(model, adam, c.compute);
  // Reference (1): each parameter's latest gradient, squared and summed in
  // float64 on the host as the hook fires.
  const auto compute_params = executor.compute_model().parameters();
  std::vector<double> last_squares(compute_params.size(), 0.0);
  for (size_t i = 0; i < compute_params.size(); ++i) {
    compute_params[i].second.register_grad_ready_hook(
        [&last_squares, i](const Tensor& p) { last_squares[i] = squares_f64(p.grad()); });
  }
  Generator gen(5);
  for (int step = 0; step < 3; ++step) {
    std::vector<data::Batch> batches;
    for (int m = 0; m < c.micro; ++m) {
      batches.push_back(lt::testing::random_token_batch(gen, 2, 13 - 3 * (m % 2),
                                                        model.config().vocab_size, {0, 1}));
    }
    const double second_backward =
        std::sqrt(reference_squared_sum(executor.compute_model(), batches));
    std::fill(last_squares.begin(), last_squares.end(), 0.0);
    exec::StepOptions so;
    so.lr = 2e-3;
    so.max_grad_norm = 1.0;
    const exec::StepStats stats = executor.step(batches, so);
    EXPECT_FALSE(stats.skipped);
    double same_gradients = 0;
    for (double v : last_squares) same_gradients += v;
    same_gradients = std::sqrt(same_gradients);
    EXPECT_NEAR(stats.grad_norm, same_gradients, 1e-12 * same_gradients)
        << c.family << " step " << step;
    const double tol = c.compute == DType::F32 ? 1e-6 : 1e-4;
    EXPECT_NEAR(stats.grad_norm, second_backward, tol * second_backward)
        << c.family << " step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ResidentGradNormGpu,
                         ::testing::Values(Case{"llama", DType::F32, 1},
                                           Case{"llama", DType::BF16, 3},
                                           Case{"qwen2", DType::F32, 3},
                                           Case{"qwen2", DType::BF16, 1},
                                           Case{"gpt2", DType::BF16, 2}),
                         [](const auto& info) {
                           return info.param.family + "_" + dtype_name(info.param.compute) + "_" +
                                  std::to_string(info.param.micro);
                         });

}  // namespace
}  // namespace lt
