// The CUDA 8-bit AdamW update (optim/cuda/adamw8bit.cu) against the CPU one:
// the same parameters, gradients and 8-bit states go through AdamW8bit on
// the CPU and on the GPU for a few steps. The kernel performs the CPU's f32
// operations in the CPU's order without FMA and picks the nearest code by
// the same rule, so parameters, codes and scales must be equal bit for
// bit; the CPU kernel is itself tested against float64 and brute-force
// nearest-code search in tests/optim. The mismatch counts are printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/cuda/device_info.h"
#include "core/random.h"
#include "core/tensor.h"
#include "gpu_test_support.h"
#include "nn/module.h"
#include "optim/adamw8bit.h"
#include "optim/cuda/adamw8bit.h"

namespace lt {
namespace {

const Device kGpu = Device::cuda(0);

// Elements whose bytes differ between a (any device) and b (CPU).
int64_t mismatches(const Tensor& a, const Tensor& b) {
  const Tensor ha = a.to(Device::cpu()).contiguous();
  const Tensor hb = b.to(Device::cpu()).contiguous();
  EXPECT_EQ(ha.numel(), hb.numel());
  EXPECT_EQ(ha.dtype(), hb.dtype());
  const size_t width = dtype_size(ha.dtype());
  const auto* pa = static_cast<const unsigned char*>(ha.data_ptr());
  const auto* pb = static_cast<const unsigned char*>(hb.data_ptr());
  int64_t n = 0;
  for (int64_t i = 0; i < ha.numel() && i < hb.numel(); ++i)
    n += std::memcmp(pa + i * width, pb + i * width, width) != 0;
  return n;
}

// Elements of the bf16 `shadow` that are not bf16(master[i]) (round to
// nearest even, computed here on the host from the master's f32 values).
int64_t shadow_mismatches(const Tensor& shadow, const Tensor& master) {
  const Tensor hs = shadow.to(Device::cpu()).contiguous();
  const Tensor hm = master.to(Device::cpu()).contiguous();
  EXPECT_EQ(hs.dtype(), DType::BF16);
  const auto* bits = static_cast<const uint16_t*>(hs.data_ptr());
  const float* values = hm.data<float>();
  int64_t n = 0;
  for (int64_t i = 0; i < hm.numel(); ++i) n += bits[i] != f32_to_bf16(values[i]);
  return n;
}

struct Spec {
  std::string name;
  Shape shape;
  DType grad_dtype;
};

// 8-bit: a partial last block (4099 = 2 * 2048 + 3; 4102 ends in 6, one
// whole group of four and two), several full blocks, bf16 gradients; f32
// path: the small ones (under min_8bit_numel = 4096).
const std::vector<Spec> kSpecs = {
    {"layers.0.mlp.weight", {4099}, DType::BF16},
    {"layers.0.attn.weight", {64, 160}, DType::F32},
    {"embed.weight", {97, 211}, DType::F32},
    {"layers.0.norm.weight", {1000}, DType::BF16},
    {"lm_head.bias", {7}, DType::F32},
    {"layers.1.mlp.weight", {2, 2051}, DType::BF16},
};

void run(int64_t block_size) {
  Generator gen(4321);
  nn::NamedParameters cpu, gpu;
  for (const Spec& s : kSpecs) {
    Tensor p = Tensor::randn(s.shape, gen, DType::F32);
    cpu.emplace_back(s.name, nn::make_parameter(p.clone(), s.name));
    gpu.emplace_back(s.name, nn::make_parameter(p.to(kGpu), s.name));
  }
  const optim::AdamWOptions o{.lr = 1e-3, .weight_decay = 0.1};
  optim::AdamW8bit on_cpu(cpu, o, {"norm", "bias"}, {block_size, 4096});
  optim::AdamW8bit on_gpu(gpu, o, {"norm", "bias"}, {block_size, 4096});
  ASSERT_TRUE(on_gpu.is_quantized(0));
  ASSERT_FALSE(on_gpu.is_quantized(3));
  // bf16 shadows on the GPU for every parameter (8-bit and f32 paths): the
  // update kernels write them; checked against the masters at the end.
  std::vector<Tensor> shadows;
  for (size_t i = 0; i < gpu.size(); ++i) {
    shadows.push_back(Tensor::zeros(gpu[i].second.shape(), DType::BF16, kGpu));
    on_gpu.set_bf16_shadow(i, shadows.back());
  }
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < kSpecs.size(); ++i) {
      // Gradients spanning decades, so blocks use many tiers of the code.
      Tensor g = Tensor::randn(kSpecs[i].shape, gen, DType::F32);
      float* gv = g.data<float>();
      for (int64_t e = 0; e < g.numel(); ++e) gv[e] *= (e % 5 == 0) ? 1e-4f : 1e-2f;
      g = g.to(kSpecs[i].grad_dtype);
      cpu[i].second.set_grad(g);
      gpu[i].second.set_grad(g.to(kGpu));
    }
    const double grad_scale = step == 2 ? 0.5 : 1.0;
    on_cpu.step(1e-3 * (step + 1), grad_scale);
    on_gpu.step(1e-3 * (step + 1), grad_scale);
  }
  for (size_t i = 0; i < kSpecs.size(); ++i) {
    const int64_t bad = mismatches(gpu[i].second, cpu[i].second);
    std::printf("block %lld %s: %lld of %lld parameter elements differ\n",
                static_cast<long long>(block_size), kSpecs[i].name.c_str(),
                static_cast<long long>(bad), static_cast<long long>(cpu[i].second.numel()));
    EXPECT_EQ(bad, 0) << kSpecs[i].name;
  }
  for (size_t i = 0; i < kSpecs.size(); ++i) {
    EXPECT_EQ(shadow_mismatches(shadows[i], gpu[i].second), 0) << "shadow of " << kSpecs[i].name;
  }
  const optim::NamedTensors sc = on_cpu.state(), sg = on_gpu.state();
  ASSERT_EQ(sc.size(), sg.size());
  for (size_t k = 0; k < sc.size(); ++k) {
    ASSERT_EQ(sc[k].first, sg[k].first);
    EXPECT_EQ(mismatches(sg[k].second, sc[k].second), 0) << sc[k].first;
  }
}

TEST(AdamW8bitGpuTest, MatchesCpuBitwiseOverFourSteps) {
  LT_REQUIRE_GPU();
  run(2048);
}

TEST(AdamW8bitGpuTest, MatchesCpuWithOddBlockSize) {
  LT_REQUIRE_GPU();
  run(333);  // blocks not a multiple of four, of the 512 threads, nor of a warp
}

TEST(AdamW8bitGpuTest, MatchesCpuWithTheLargestBlocks) {
  LT_REQUIRE_GPU();
  run(4096);  // eight elements a thread, four at a time
  run(4095);  // eight elements a thread, one at a time
}

TEST(AdamW8bitGpuTest, MatchesCpuWithMoreBlocksThanTheGridHolds) {
  LT_REQUIRE_GPU();
  run(16);  // 1,280 blocks in the embedding: each thread block takes several
}

// Small blocks share a thread block (kThreads / lanes at a time): 256
// threads a block of 1024 and 64 a block of 256, their warps reduced
// through shared memory; 8 a block of 32, reduced within a warp (lanes
// read at run time); 1 a block of 1 (the element in a thread's first
// group, its other three past it); 32 a block of 100, 25 of them with
// elements. The last pass over a parameter has groups past its last block.
TEST(AdamW8bitGpuTest, MatchesCpuWithSmallBlocksSharingAThreadBlock) {
  LT_REQUIRE_GPU();
  for (const int64_t block : {1024, 256, 32, 1, 100}) run(block);
}

TEST(AdamW8bitGpuTest, RefusesBlocksLargerThanTheKernelHolds) {
  LT_REQUIRE_GPU();
  nn::NamedParameters gpu = {
      {"w", nn::make_parameter(Tensor::zeros({10000}, DType::F32, kGpu), "w")}};
  try {
    optim::AdamW8bit opt(gpu, {}, {}, {optim::kMaxCudaBlockSize + 1, 4096});
    FAIL() << "accepted block_size above kMaxCudaBlockSize";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optim.block_size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lt
