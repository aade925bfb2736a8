// The CUDA AdamW update and gradient squared-sum against the CPU ones: the
// same parameters and gradients (the GPU copies are made from the CPU
// tensors, so bf16 gradients are the same bits) go through both, and the
// GPU parameters, moments and norm must agree within 1e-6 relative (the
// CPU AdamW is itself tested against float64 in tests/optim). The kernel
// performs the CPU's f32 operations in the CPU's order without FMA, so the
// mismatch count is reported too: it is expected to be 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cuda/device_info.h"
#include "core/random.h"
#include "core/tensor.h"
#include "gpu_test_support.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/cuda/adamw.h"
#include "optim/cuda/grad_norm.h"

namespace lt {
namespace {

const Device kGpu = Device::cuda(0);

std::vector<double> host_doubles(const Tensor& t) {
  Tensor h = t.to(Device::cpu(), DType::F64).contiguous();
  const double* d = h.data<double>();
  return std::vector<double>(d, d + h.numel());
}

struct Diff {
  double rel_norm = 0;  // ||a - b|| / ||b||
  int64_t mismatches = 0;
};

Diff diff(const Tensor& actual, const Tensor& expected) {
  const auto a = host_doubles(actual);
  const auto b = host_doubles(expected);
  EXPECT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  Diff d;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
    d.mismatches += a[i] != b[i];
  }
  d.rel_norm = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

struct Spec {
  std::string name;
  Shape shape;
  DType grad_dtype;
};

// Sizes cover the 16-byte path with a scalar tail (4099 = 8 * 512 + 3),
// pure scalar sizes (7, 1), and a view at an odd offset (unaligned).
const std::vector<Spec> kSpecs = {
    {"layers.0.attn.weight", {64, 129}, DType::F32},
    {"layers.0.mlp.weight", {4099}, DType::BF16},
    {"layers.0.attn.bias", {7}, DType::F32},
    {"layers.0.norm.weight", {1000}, DType::BF16},
    {"lm_head.weight", {1}, DType::F32},
    {"skipped.weight", {33}, DType::F32},  // has no gradient in steps 2 and 4
    {"frozen.weight", {12}, DType::F32},   // never has a gradient
};

TEST(AdamWGpuTest, MatchesCpuOverFiveSteps) {
  LT_REQUIRE_GPU();
  Generator gen(1234);
  nn::NamedParameters cpu, gpu;
  // One parameter starts one element into its storage, so its pointer is
  // not 16-byte aligned on either device and the kernel takes the scalar
  // path for it.
  Tensor backing = Tensor::randn({101}, gen, DType::F32);
  for (const Spec& s : kSpecs) {
    Tensor p = Tensor::randn(s.shape, gen, DType::F32);
    cpu.emplace_back(s.name, p);
    gpu.emplace_back(s.name, p.to(kGpu));
  }
  Tensor backing_gpu = backing.to(kGpu);
  cpu.emplace_back("offset.weight", backing.slice(0, 1, 101));
  gpu.emplace_back("offset.weight", backing_gpu.slice(0, 1, 101));

  optim::AdamWOptions options;
  options.lr = 3e-3;
  options.weight_decay = 0.1;
  optim::AdamW cpu_opt(cpu, options, {"bias", "norm"});
  optim::AdamW gpu_opt(gpu, options, {"bias", "norm"});

  for (int step = 1; step <= 5; ++step) {
    for (size_t i = 0; i < cpu.size(); ++i) {
      const std::string& name = cpu[i].first;
      const bool skip =
          name == "frozen.weight" || (name == "skipped.weight" && (step == 2 || step == 4));
      if (skip) {
        cpu[i].second.set_grad(Tensor());
        gpu[i].second.set_grad(Tensor());
        continue;
      }
      const DType dtype = i < kSpecs.size() ? kSpecs[i].grad_dtype : DType::F32;
      Tensor g = Tensor::randn(cpu[i].second.shape(), gen, dtype, 0.5);
      cpu[i].second.set_grad(g);
      gpu[i].second.set_grad(g.to(kGpu));
    }
    const double cpu_sq = optim::grad_squared_sum(cpu);
    const double gpu_sq = optim::grad_squared_sum(gpu);
    EXPECT_NEAR(gpu_sq, cpu_sq, 1e-6 * cpu_sq) << "step " << step;
    const double scale = optim::clip_scale(std::sqrt(cpu_sq), 1.0);
    const double lr = options.lr * (1.0 - 0.1 * step);  // a schedule: lr varies
    cpu_opt.step(lr, scale);
    gpu_opt.step(lr, scale);
  }

  const optim::NamedTensors cpu_state = cpu_opt.state();
  const optim::NamedTensors gpu_state = gpu_opt.state();
  ASSERT_EQ(cpu_state.size(), gpu_state.size());
  int64_t total_mismatches = 0;
  double worst = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const Diff d = diff(gpu[i].second, cpu[i].second);
    EXPECT_LE(d.rel_norm, 1e-6) << cpu[i].first;
    total_mismatches += d.mismatches;
    worst = std::max(worst, d.rel_norm);
  }
  for (size_t k = 0; k < cpu_state.size(); ++k) {
    ASSERT_EQ(gpu_state[k].first, cpu_state[k].first);
    const Diff d = diff(gpu_state[k].second, cpu_state[k].second);
    EXPECT_LE(d.rel_norm, 1e-6) << cpu_state[k].first;
    total_mismatches += d.mismatches;
    worst = std::max(worst, d.rel_norm);
  }
  // The skipped parameter's own step count is behind; the frozen one's is 0.
  for (const auto& [name, t] : gpu_state) {
    if (name == "skipped.weight.step") {
      EXPECT_EQ(t.data<int64_t>()[0], 3);
    }
    if (name == "frozen.weight.step") {
      EXPECT_EQ(t.data<int64_t>()[0], 0);
    }
  }
  std::printf(
      "AdamW GPU vs CPU after 5 steps: worst relative error norm %.3g, %lld elements "
      "differ in any bit\n",
      worst, static_cast<long long>(total_mismatches));
}

// state() hands out device moments; a checkpoint writes them through the
// host and load_state copies CPU tensors back onto the device.
TEST(AdamWGpuTest, StateRoundTripsThroughTheHost) {
  LT_REQUIRE_GPU();
  Generator gen(7);
  nn::NamedParameters gpu = {{"w", Tensor::randn({300}, gen).to(kGpu)}};
  optim::AdamW opt(gpu, {});
  gpu[0].second.set_grad(Tensor::randn({300}, gen, DType::BF16).to(kGpu));
  opt.step(1e-3);
  optim::NamedTensors saved;
  for (const auto& [name, t] : opt.state()) saved.emplace_back(name, t.to(Device::cpu()));

  nn::NamedParameters other = {{"w", gpu[0].second.to(Device::cpu()).to(kGpu)}};
  optim::AdamW restored(other, {});
  restored.load_state(saved);
  const auto a = opt.state();
  const auto b = restored.state();
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(b[k].second.device(), a[k].second.device()) << a[k].first;
    EXPECT_EQ(diff(b[k].second, a[k].second).mismatches, 0) << a[k].first;
  }
  EXPECT_EQ(restored.step_count(), 1);
}

TEST(GradNormGpuTest, MatchesCpuOnLargeGradients) {
  LT_REQUIRE_GPU();
  Generator gen(99);
  nn::NamedParameters cpu, gpu;
  // Large enough for the full block count, plus odd sizes and an unaligned view.
  const std::vector<std::pair<Shape, DType>> specs = {
      {{3000, 1031}, DType::BF16}, {{1 << 20}, DType::F32}, {{5}, DType::F32}, {{17}, DType::BF16}};
  for (size_t i = 0; i < specs.size(); ++i) {
    Tensor p = Tensor::zeros(specs[i].first);
    Tensor q = Tensor::zeros(specs[i].first, DType::F32, kGpu);
    Tensor g = Tensor::randn(specs[i].first, gen, specs[i].second, 2.0);
    p.set_grad(g);
    q.set_grad(g.to(kGpu));
    cpu.emplace_back("p" + std::to_string(i), p);
    gpu.emplace_back("p" + std::to_string(i), q);
  }
  Tensor g = Tensor::randn({1001}, gen, DType::F32);
  Tensor p = Tensor::zeros({1000});
  Tensor q = Tensor::zeros({1000}, DType::F32, kGpu);
  p.set_grad(g.slice(0, 1, 1001));
  q.set_grad(g.to(kGpu).slice(0, 1, 1001));
  cpu.emplace_back("offset", p);
  gpu.emplace_back("offset", q);

  const double expected = optim::grad_squared_sum(cpu);
  const double actual = optim::grad_squared_sum(gpu);
  EXPECT_NEAR(actual, expected, 1e-6 * expected);
  EXPECT_EQ(optim::grad_squared_sum(gpu), actual) << "not deterministic";
  std::printf("grad squared-sum GPU %.17g CPU %.17g relative difference %.3g\n", actual, expected,
              std::abs(actual - expected) / expected);
}

// Elements of the bf16 `shadow` that are not bf16(master[i]) (round to
// nearest even, computed here on the host from the master's f32 values).
int64_t shadow_mismatches(const Tensor& shadow, const Tensor& master) {
  const Tensor hs = shadow.to(Device::cpu()).contiguous();
  const Tensor hm = master.to(Device::cpu()).contiguous();
  EXPECT_EQ(hs.dtype(), DType::BF16);
  EXPECT_EQ(hs.numel(), hm.numel());
  const auto* bits = static_cast<const uint16_t*>(hs.data_ptr());
  const float* values = hm.data<float>();
  int64_t n = 0;
  for (int64_t i = 0; i < hm.numel() && i < hs.numel(); ++i) {
    n += bits[i] != f32_to_bf16(values[i]);
  }
  return n;
}

// Odd sizes around the multi-tensor kernel's 64K-element chunks: single
// elements, a scalar-only tensor, one element past a chunk (65537), and a
// tensor spanning several chunks with a packed body and a scalar tail.
const std::vector<Spec> kMultiSpecs = {
    {"a.weight", {1}, DType::F32},          {"b.weight", {3}, DType::BF16},
    {"c.weight", {65537}, DType::F32},      {"d.weight", {65537}, DType::BF16},
    {"e.weight", {130, 1031}, DType::BF16}, {"f.norm", {4099}, DType::F32},
    {"g.weight", {1}, DType::BF16},
};

// The step the multi-tensor launch takes (AdamW on CUDA parameters with
// bf16 shadows), against the CPU AdamW on the same values, three steps.
TEST(AdamWGpuTest, MultiTensorWithShadowsMatchesCpuOverThreeSteps) {
  LT_REQUIRE_GPU();
  Generator gen(2024);
  nn::NamedParameters cpu, gpu;
  for (const Spec& s : kMultiSpecs) {
    Tensor p = Tensor::randn(s.shape, gen, DType::F32);
    cpu.emplace_back(s.name, p);
    gpu.emplace_back(s.name, p.to(kGpu));
  }
  optim::AdamWOptions options;
  options.lr = 1e-2;
  options.weight_decay = 0.1;
  optim::AdamW cpu_opt(cpu, options, {"norm"});
  optim::AdamW gpu_opt(gpu, options, {"norm"});
  std::vector<Tensor> shadows;
  for (size_t i = 0; i < gpu.size(); ++i) {
    shadows.push_back(Tensor::zeros(gpu[i].second.shape(), DType::BF16, kGpu));
    gpu_opt.set_bf16_shadow(i, shadows.back());
    EXPECT_EQ(shadow_mismatches(shadows[i], gpu[i].second), 0) << "initial " << gpu[i].first;
  }
  for (int step = 1; step <= 3; ++step) {
    for (size_t i = 0; i < cpu.size(); ++i) {
      Tensor g = Tensor::randn(cpu[i].second.shape(), gen, kMultiSpecs[i].grad_dtype, 0.5);
      cpu[i].second.set_grad(g);
      gpu[i].second.set_grad(g.to(kGpu));
    }
    const double lr = options.lr * (1.0 - 0.2 * step);
    cpu_opt.step(lr, step == 2 ? 0.5 : 1.0);
    gpu_opt.step(lr, step == 2 ? 0.5 : 1.0);
    for (size_t i = 0; i < gpu.size(); ++i) {
      EXPECT_EQ(shadow_mismatches(shadows[i], gpu[i].second), 0)
          << "step " << step << " " << gpu[i].first;
    }
  }
  const optim::NamedTensors cpu_state = cpu_opt.state();
  const optim::NamedTensors gpu_state = gpu_opt.state();
  ASSERT_EQ(cpu_state.size(), gpu_state.size());
  int64_t total_mismatches = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const Diff d = diff(gpu[i].second, cpu[i].second);
    EXPECT_LE(d.rel_norm, 1e-6) << cpu[i].first;
    total_mismatches += d.mismatches;
  }
  for (size_t k = 0; k < cpu_state.size(); ++k) {
    const Diff d = diff(gpu_state[k].second, cpu_state[k].second);
    EXPECT_LE(d.rel_norm, 1e-6) << cpu_state[k].first;
    total_mismatches += d.mismatches;
  }
  std::printf("multi-tensor AdamW GPU vs CPU after 3 steps: %lld elements differ in any bit\n",
              static_cast<long long>(total_mismatches));
}

// adamw_update_multi called directly, on views one element into their
// storage (so the kernel takes its unaligned, element-by-element path for
// them) and on aligned tensors (its 16-byte path), with bf16 shadows and
// different scalars per tensor, against the CPU's scalar AdamW kernel
// (optim/adamw_kernel.h) on host copies of the same state: equal bit for
// bit, shadows included, over three steps.
TEST(AdamWGpuTest, MultiTensorOnViewsMatchesCpuKernelBitwise) {
  LT_REQUIRE_GPU();
  Generator gen(77);
  struct State {
    Tensor p, m, v, shadow;
  };
  std::vector<State> on_gpu, on_cpu;
  std::vector<Tensor> grads, initial;
  auto odd_view = [](const Tensor& t) { return t.slice(0, 1, t.numel()); };
  for (size_t i = 0; i < kMultiSpecs.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : kMultiSpecs[i].shape) n *= d;
    const bool unaligned = i == 2 || i == 4;  // 65537 f32 and the multi-chunk one
    State a;
    State c;
    for (Tensor* t : {&a.p, &a.m, &a.v}) {
      Tensor backing = Tensor::randn({n + 1}, gen, DType::F32);
      if (t == &a.v) {  // a second moment is >= 0
        float* d = backing.data<float>();
        for (int64_t k = 0; k < backing.numel(); ++k) d[k] = std::abs(d[k]);
      }
      *t = unaligned ? odd_view(backing.to(kGpu)) : backing.slice(0, 0, n).to(kGpu);
    }
    Tensor shadow_backing = Tensor::zeros({n + 1}, DType::BF16, kGpu);
    a.shadow = unaligned ? odd_view(shadow_backing) : shadow_backing.slice(0, 0, n);
    c.p = a.p.to(Device::cpu()).contiguous();
    c.m = a.m.to(Device::cpu()).contiguous();
    c.v = a.v.to(Device::cpu()).contiguous();
    c.shadow = Tensor::zeros({n}, DType::BF16);
    initial.push_back(c.p.clone());
    on_gpu.push_back(a);
    on_cpu.push_back(c);
    grads.push_back(Tensor::randn({n}, gen, kMultiSpecs[i].grad_dtype));
  }
  std::vector<Tensor> gpu_grads;
  for (const Tensor& g : grads) gpu_grads.push_back(g.to(kGpu));
  for (int t = 1; t <= 3; ++t) {
    std::vector<optim::cuda::AdamWCudaJob> jobs;
    for (size_t i = 0; i < on_gpu.size(); ++i) {
      const optim::AdamWScalars s =
          optim::adamw_scalars(1e-2 * t, 0.9, 0.999, 1e-8, i % 2 == 0 ? 0.1 : 0.0, 0.7, t);
      State& a = on_gpu[i];
      jobs.push_back({s, static_cast<float*>(a.p.data_ptr()), gpu_grads[i].data_ptr(),
                      grads[i].dtype() == DType::BF16, static_cast<float*>(a.m.data_ptr()),
                      static_cast<float*>(a.v.data_ptr()),
                      static_cast<uint16_t*>(a.shadow.data_ptr()), a.p.numel()});
      State& c = on_cpu[i];
      auto* shadow = static_cast<uint16_t*>(c.shadow.data_ptr());
      if (grads[i].dtype() == DType::BF16) {
        optim::adamw_update(s, c.p.data<float>(), grads[i].data<BFloat16>(), c.m.data<float>(),
                            c.v.data<float>(), shadow, c.p.numel());
      } else {
        optim::adamw_update(s, c.p.data<float>(), grads[i].data<float>(), c.m.data<float>(),
                            c.v.data<float>(), shadow, c.p.numel());
      }
    }
    optim::cuda::adamw_update_multi(kGpu, jobs);
  }
  for (size_t i = 0; i < on_gpu.size(); ++i) {
    const std::string& name = kMultiSpecs[i].name;
    EXPECT_EQ(diff(on_gpu[i].p, on_cpu[i].p).mismatches, 0) << name;
    EXPECT_EQ(diff(on_gpu[i].m, on_cpu[i].m).mismatches, 0) << name;
    EXPECT_EQ(diff(on_gpu[i].v, on_cpu[i].v).mismatches, 0) << name;
    EXPECT_EQ(diff(on_gpu[i].shadow, on_cpu[i].shadow).mismatches, 0) << name;
    EXPECT_EQ(shadow_mismatches(on_gpu[i].shadow, on_gpu[i].p), 0) << name;
    // Every element moved: neither side can pass by doing nothing.
    EXPECT_EQ(diff(on_gpu[i].p, initial[i]).mismatches, on_gpu[i].p.numel()) << name;
  }
}

// The multi-tensor squared sum against a float64 sum of squares on the
// host, over odd sizes, both dtypes and an unaligned view; and the same
// value on a second call (fixed reduction order).
TEST(GradNormGpuTest, MultiTensorMatchesFloat64Reference) {
  LT_REQUIRE_GPU();
  Generator gen(5);
  const std::vector<std::pair<int64_t, DType>> specs = {
      {1, DType::F32},      {3, DType::BF16},      {65537, DType::F32},
      {65537, DType::BF16}, {200003, DType::BF16}, {131072, DType::F32}};
  std::vector<Tensor> grads;
  double expected = 0;
  auto add_reference = [&](const Tensor& g) {
    for (double x : host_doubles(g)) expected += x * x;
  };
  for (const auto& [n, dtype] : specs) {
    Tensor g = Tensor::randn({n}, gen, dtype, 3.0);
    add_reference(g);
    grads.push_back(g.to(kGpu));
  }
  Tensor backing = Tensor::randn({1001}, gen, DType::BF16).to(kGpu);
  grads.push_back(backing.slice(0, 1, 1001));
  add_reference(grads.back());
  const double actual = optim::cuda::squared_sum(grads);
  EXPECT_NEAR(actual, expected, 1e-10 * expected);  // f32 accumulation would be ~1e-7 off
  EXPECT_EQ(optim::cuda::squared_sum(grads), actual) << "not deterministic";
  std::printf("multi-tensor grad squared-sum GPU %.17g float64 host %.17g\n", actual, expected);
}

}  // namespace
}  // namespace lt
