// AdamW against a float64 transcription of torch.optim.AdamW's algorithm
// (written here from the PyTorch documentation, independent of the kernel),
// and the optimizer's checkpoint state.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "nn/module.h"
#include "optim/adamw.h"
#include "optim/adamw_kernel.h"
#include "support/gradcheck.h"

namespace lt::optim {
namespace {

using testing::all_close;

// torch.optim.AdamW for one parameter, in float64:
//   p <- p - lr*wd*p
//   m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;  t <- t+1
//   p <- p - lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
struct ReferenceParam {
  std::vector<double> p, m, v;
  int64_t t = 0;

  explicit ReferenceParam(const Tensor& init)
      : p(init.to_doubles()), m(p.size(), 0.0), v(p.size(), 0.0) {}

  void step(const std::vector<double>& g, double lr, double wd, const AdamWOptions& o) {
    ++t;
    const double bc1 = 1 - std::pow(o.beta1, static_cast<double>(t));
    const double bc2 = 1 - std::pow(o.beta2, static_cast<double>(t));
    for (size_t i = 0; i < p.size(); ++i) {
      p[i] -= lr * wd * p[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      p[i] -= lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + o.eps);
    }
  }
};

std::vector<double> scaled(std::vector<double> g, double s) {
  for (double& x : g) x *= s;
  return g;
}

// f32 against float64 after a few steps: the update is ~lr per step, each
// f32 operation rounds at ~6e-8 relative, and m/sqrt(v) amplifies nothing
// (|m_hat/sqrt(v_hat)| <= ~1).
constexpr double kParamAtol = 1e-6;
constexpr double kParamRtol = 1e-5;
constexpr double kMomentRtol = 1e-5;

struct Fixture {
  nn::NamedParameters params;
  std::vector<ReferenceParam> reference;
};

Fixture make_params(const std::vector<std::pair<std::string, Shape>>& specs, uint64_t seed) {
  Generator gen(seed);
  Fixture f;
  for (const auto& [name, shape] : specs) {
    Tensor p = nn::make_parameter(Tensor::randn(shape, gen), name);
    f.params.emplace_back(name, p);
    f.reference.emplace_back(p);
  }
  return f;
}

void expect_matches_reference(const AdamW& opt, const Fixture& f, const std::string& when) {
  NamedTensors state = opt.state();
  for (size_t i = 0; i < f.params.size(); ++i) {
    const std::string& name = f.params[i].first;
    EXPECT_TRUE(
        all_close(f.params[i].second.to_doubles(), f.reference[i].p, kParamAtol, kParamRtol))
        << name << " " << when;
    EXPECT_TRUE(all_close(state[3 * i].second.to_doubles(), f.reference[i].m, 1e-7, kMomentRtol))
        << name << ".exp_avg " << when;
    EXPECT_TRUE(
        all_close(state[3 * i + 1].second.to_doubles(), f.reference[i].v, 1e-10, kMomentRtol))
        << name << ".exp_avg_sq " << when;
    EXPECT_EQ(state[3 * i + 2].second.item(), static_cast<double>(f.reference[i].t))
        << name << ".step " << when;
  }
}

// Runs five steps with a changing lr and fresh gradients (of `grad_dtype`),
// stepping optimizer and reference side by side.
void run_five_steps(Fixture& f, AdamW& opt, DType grad_dtype, double grad_scale) {
  Generator gen(99);
  const double lrs[] = {1e-2, 3e-2, 2e-2, 5e-3, 1e-3};
  for (int s = 0; s < 5; ++s) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      Tensor p = f.params[i].second;
      Tensor g = Tensor::randn(p.shape(), gen, grad_dtype, 0.5);
      p.set_grad(g);
      f.reference[i].step(scaled(g.to_doubles(), grad_scale), lrs[s], opt.weight_decay_of(i),
                          opt.options());
    }
    opt.step(lrs[s], grad_scale);
    expect_matches_reference(opt, f, "after step " + std::to_string(s + 1));
  }
  EXPECT_EQ(opt.step_count(), 5);
}

// Shapes cover a scalar-only tail (7), whole vector blocks plus a tail
// (4 x 33), and several parallel chunks of 2^16 elements plus a tail.
const std::vector<std::pair<std::string, Shape>> kShapes = {
    {"a.weight", {7}}, {"b.weight", {3, 5}}, {"c.weight", {4, 33}}, {"d.weight", {3, 50001}}};

TEST(AdamW, FiveStepsMatchFloat64ReferenceWithWeightDecay) {
  Fixture f = make_params(kShapes, 1);
  AdamW opt(f.params, {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1});
  for (size_t i = 0; i < f.params.size(); ++i) EXPECT_EQ(opt.weight_decay_of(i), 0.1);
  run_five_steps(f, opt, DType::F32, 1.0);
}

TEST(AdamW, NoDecaySubstringsExcludeMatchingNames) {
  Fixture f = make_params({{"layers.0.attn.q.weight", {5, 9}},
                           {"layers.0.attn.q.bias", {9}},
                           {"layers.0.input_layernorm.weight", {9}},
                           {"lm_head.weight", {40, 3}}},
                          2);
  AdamW opt(f.params, {.lr = 1e-2, .beta1 = 0.8, .beta2 = 0.99, .eps = 0.05, .weight_decay = 0.3},
            {"bias", "norm"});
  EXPECT_EQ(opt.weight_decay_of(0), 0.3);
  EXPECT_EQ(opt.weight_decay_of(1), 0.0);
  EXPECT_EQ(opt.weight_decay_of(2), 0.0);
  EXPECT_EQ(opt.weight_decay_of(3), 0.3);
  run_five_steps(f, opt, DType::F32, 1.0);
}

TEST(AdamW, EmptyNoDecayListDecaysEverything) {
  Fixture f = make_params({{"x.bias", {3}}, {"y.norm.weight", {3}}}, 3);
  AdamW opt(f.params, {.weight_decay = 0.2}, {});
  EXPECT_EQ(opt.weight_decay_of(0), 0.2);
  EXPECT_EQ(opt.weight_decay_of(1), 0.2);
}

TEST(AdamW, Bf16GradientsAreWidenedExactly) {
  Fixture f = make_params(kShapes, 4);
  AdamW opt(f.params, {.lr = 1e-2, .weight_decay = 0.05}, {"c."});
  run_five_steps(f, opt, DType::BF16, 1.0);
}

TEST(AdamW, GradScaleMatchesReferenceWithScaledGradients) {
  Fixture f = make_params(kShapes, 5);
  AdamW opt(f.params, {.lr = 1e-2, .weight_decay = 0.1});
  run_five_steps(f, opt, DType::F32, 0.37);
}

// clip_grad_norm_ then step() multiplies the gradients in f32 first; folding
// the scale into step() must give the same bits.
TEST(AdamW, GradScaleIsBitwiseEqualToPrescaledGradients) {
  for (DType grad_dtype : {DType::F32, DType::BF16}) {
    Fixture folded = make_params(kShapes, 6);
    Fixture prescaled = make_params(kShapes, 6);
    AdamW a(folded.params, {.lr = 1e-2, .weight_decay = 0.1});
    AdamW b(prescaled.params, {.lr = 1e-2, .weight_decay = 0.1});
    Generator gen(7);
    const float scale = 0.4375f;
    for (int s = 0; s < 3; ++s) {
      for (size_t i = 0; i < kShapes.size(); ++i) {
        Tensor g = Tensor::randn(kShapes[i].second, gen, grad_dtype);
        folded.params[i].second.set_grad(g);
        std::vector<float> pre = g.to(DType::F32).to_vector<float>();
        for (float& x : pre) x *= scale;
        prescaled.params[i].second.set_grad(Tensor::from_vector(pre, kShapes[i].second));
      }
      a.step(1e-2, scale);
      b.step(1e-2, 1.0);
    }
    for (size_t i = 0; i < kShapes.size(); ++i) {
      EXPECT_EQ(folded.params[i].second.to_vector<float>(),
                prescaled.params[i].second.to_vector<float>())
          << kShapes[i].first << " with " << dtype_name(grad_dtype) << " gradients";
    }
  }
}

// As torch: a parameter without a gradient keeps its value, its moments and
// its own step count; when it gets a gradient again its bias correction
// uses its own t, not the optimizer's.
TEST(AdamW, ParametersWithoutGradientAreSkipped) {
  Fixture f = make_params({{"always", {20}}, {"sometimes", {20}}}, 8);
  AdamWOptions o{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
  AdamW opt(f.params, o);
  Generator gen(9);
  const bool has_grad[5] = {true, false, false, true, true};
  for (int s = 0; s < 5; ++s) {
    for (size_t i = 0; i < 2; ++i) {
      Tensor p = f.params[i].second;
      if (i == 1 && !has_grad[s]) {
        p.set_grad(Tensor());
        continue;
      }
      Tensor g = Tensor::randn(p.shape(), gen);
      p.set_grad(g);
      f.reference[i].step(g.to_doubles(), 1e-2, 0.1, o);
    }
    const std::vector<double> before = f.params[1].second.to_doubles();
    opt.step(1e-2);
    if (!has_grad[s]) {
      EXPECT_EQ(f.params[1].second.to_doubles(), before) << "step " << s;
    }
    expect_matches_reference(opt, f, "after step " + std::to_string(s + 1));
  }
  EXPECT_EQ(f.reference[1].t, 3);
  EXPECT_EQ(opt.step_count(), 5);
}

// The vector blocks and the scalar tail perform the same IEEE operations,
// so chunking (and therefore the thread count) cannot change a bit.
TEST(AdamW, KernelResultDoesNotDependOnChunking) {
  Generator gen(10);
  const int64_t n = 1000;
  Tensor p = Tensor::randn({n}, gen), g = Tensor::randn({n}, gen);
  Tensor m = Tensor::randn({n}, gen, DType::F32, 0.1);
  Tensor v = Tensor::uniform({n}, gen, 0.0, 0.1);
  const AdamWScalars s = adamw_scalars(1e-2, 0.9, 0.999, 1e-8, 0.1, 0.5, 3);
  Tensor p1 = p.clone(), m1 = m.clone(), v1 = v.clone();
  adamw_update(s, p1.data<float>(), g.data<float>(), m1.data<float>(), v1.data<float>(), n);
  Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone();
  for (int64_t b = 0; b < n; b += 37) {
    const int64_t len = std::min<int64_t>(37, n - b);
    adamw_update(s, p2.data<float>() + b, g.data<float>() + b, m2.data<float>() + b,
                 v2.data<float>() + b, len);
  }
  EXPECT_EQ(p1.to_vector<float>(), p2.to_vector<float>());
  EXPECT_EQ(m1.to_vector<float>(), m2.to_vector<float>());
  EXPECT_EQ(v1.to_vector<float>(), v2.to_vector<float>());
}

NamedTensors deep_copy(const NamedTensors& state) {
  NamedTensors out;
  for (const auto& [name, t] : state) out.emplace_back(name, t.clone());
  return out;
}

void set_grads(const nn::NamedParameters& params, uint64_t seed) {
  Generator gen(seed);
  for (const auto& [name, p] : params) p.set_grad(Tensor::randn(p.shape(), gen));
}

// A restored optimizer continues bit for bit like one that never stopped.
TEST(AdamWState, SaveAndRestoreContinuesBitwise) {
  Fixture f = make_params(kShapes, 11);
  AdamW original(f.params, {.lr = 1e-2, .weight_decay = 0.1}, {"b."});
  for (int s = 0; s < 3; ++s) {
    set_grads(f.params, 100 + s);
    if (s == 1) f.params[0].second.set_grad(Tensor());  // a per-parameter step differs
    original.step(1e-2 * (s + 1), 0.9);
  }
  const NamedTensors saved = deep_copy(original.state());
  nn::NamedParameters copies;
  for (const auto& [name, p] : f.params) copies.emplace_back(name, p.clone());

  AdamW restored(copies, {.lr = 1e-2, .weight_decay = 0.1}, {"b."});
  restored.load_state(saved);
  EXPECT_EQ(restored.step_count(), 3);
  EXPECT_EQ(restored.state()[2].second.item(), 2.0);  // a.weight.step: skipped once
  for (int s = 3; s < 5; ++s) {
    set_grads(f.params, 100 + s);
    set_grads(copies, 100 + s);
    original.step(1e-3, 1.0);
    restored.step(1e-3, 1.0);
  }
  const NamedTensors a = original.state(), b = restored.state();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_doubles(), b[i].second.to_doubles()) << a[i].first;
  }
  for (size_t i = 0; i < copies.size(); ++i) {
    EXPECT_EQ(f.params[i].second.to_vector<float>(), copies[i].second.to_vector<float>())
        << copies[i].first;
  }
}

TEST(AdamWState, NamesOrderAndLayout) {
  Fixture f = make_params({{"w", {2, 3}}, {"b", {3}}}, 12);
  AdamW opt(f.params, {});
  const NamedTensors s = opt.state();
  std::vector<std::string> names;
  for (const auto& [name, t] : s) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"w.exp_avg", "w.exp_avg_sq", "w.step", "b.exp_avg",
                                             "b.exp_avg_sq", "b.step", "step"}));
  EXPECT_EQ(s[0].second.shape(), (Shape{2, 3}));
  EXPECT_EQ(s[0].second.dtype(), DType::F32);
  EXPECT_EQ(s[2].second.dtype(), DType::I64);
  EXPECT_EQ(s[2].second.dim(), 0);
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(AdamWState, RefusesMismatchedStateAndChangesNothing) {
  Fixture f = make_params({{"w", {2, 3}}, {"b", {3}}}, 13);
  AdamW opt(f.params, {});
  set_grads(f.params, 14);
  opt.step(1e-3);
  const NamedTensors good = deep_copy(opt.state());

  NamedTensors missing(good.begin(), good.end() - 1);
  expect_error([&] { opt.load_state(missing); }, "'step' is missing");

  NamedTensors wrong_shape = good;
  wrong_shape[3].second = Tensor::zeros({4});
  expect_error([&] { opt.load_state(wrong_shape); }, "'b.exp_avg' must be f32 of shape [3]");

  NamedTensors wrong_dtype = good;
  wrong_dtype[0].second = Tensor::zeros({2, 3}, DType::BF16);
  expect_error([&] { opt.load_state(wrong_dtype); }, "'w.exp_avg' must be f32");

  NamedTensors extra = good;
  extra.emplace_back("c.exp_avg", Tensor::zeros({1}));
  expect_error([&] { opt.load_state(extra); }, "'c.exp_avg' belongs to no parameter");

  NamedTensors future = good;
  future[2].second = Tensor::from_vector<int64_t>({7}, {});
  expect_error([&] { opt.load_state(future); }, "'w.step' = 7 exceeds");

  // A NaN or inf moment, or a negative second moment, is damage: taken, it
  // went into the first update and from there into every weight.
  NamedTensors nan_moment = good;
  nan_moment[0].second = Tensor::from_vector<float>({0, 0, NAN, 0, 0, 0}, {2, 3});
  expect_error([&] { opt.load_state(nan_moment); },
               "'w.exp_avg' holds nan at element 2: an optimizer state must be finite");
  NamedTensors negative = good;
  negative[1].second = Tensor::from_vector<float>({0, 0, 0, 0, -1, 0}, {2, 3});
  expect_error([&] { opt.load_state(negative); },
               "'w.exp_avg_sq' holds -1 at element 4: a second moment is never negative");

  EXPECT_EQ(opt.step_count(), 1);
  EXPECT_EQ(opt.state()[0].second.to_doubles(), good[0].second.to_doubles());
}

TEST(AdamWErrors, OptionsNameTheConfigKey) {
  Fixture f = make_params({{"w", {2}}}, 15);
  expect_error([&] { AdamW(f.params, {.beta1 = 1.0}); }, "optim.betas[0] must be in [0, 1)");
  expect_error([&] { AdamW(f.params, {.beta2 = -0.1}); }, "optim.betas[1]");
  expect_error([&] { AdamW(f.params, {.lr = -1}); }, "optim.lr");
  expect_error([&] { AdamW(f.params, {.eps = NAN}); }, "optim.eps");
  expect_error([&] { AdamW(f.params, {.weight_decay = -0.1}); }, "optim.weight_decay");
}

TEST(AdamWErrors, BadParametersAndGradients) {
  Generator gen(16);
  Tensor w = nn::make_parameter(Tensor::randn({4, 4}, gen), "w");
  expect_error([&] { AdamW({{"w", w}, {"w", w.clone()}}, {}); }, "'w' appears twice");
  expect_error([&] { AdamW({{"w", w}, {"alias", w}}, {}); }, "share memory");
  expect_error([&] { AdamW({{"h", Tensor::zeros({2}, DType::BF16)}}, {}); }, "must be f32");
  expect_error([&] { AdamW({{"t", w.detach().transpose(0, 1)}}, {}); }, "must be contiguous");
  expect_error([&] { AdamW({{"", w}}, {}); }, "empty name");

  AdamW opt({{"w", w}}, {});
  w.set_grad(Tensor::zeros({16}));
  expect_error([&] { opt.step(1e-3); }, "gradient of 'w' has shape [16]");
  w.set_grad(Tensor::zeros({4, 4}, DType::F64));
  expect_error([&] { opt.step(1e-3); }, "must be f32 or bf16");
  w.set_grad(Tensor::zeros({4, 4}));
  expect_error([&] { opt.step(1e-3, INFINITY); }, "grad_scale must be finite");
  expect_error([&] { opt.step(NAN); }, "lr must be");
  EXPECT_EQ(opt.step_count(), 0);
}

}  // namespace
}  // namespace lt::optim
