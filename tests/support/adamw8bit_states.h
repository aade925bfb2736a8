#pragma once
// 8-bit AdamW states for the compiled update's tests
// (tests/compile/compiled_adamw8bit_test.cpp on the CPU,
// tests/gpu/compiled_adamw8bit_gpu_test.cpp on CUDA): random parameters,
// gradients and moments quantized by optim's own quantize_block, and
// optim's own block update of them (adamw8bit_update_block, the scalar path
// that AdamW8bit's SIMD and CUDA paths equal bit for bit).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "optim/adamw8bit_kernel.h"

namespace lt::optim::testing {

struct States8bit {
  std::vector<float> p, g, m_scales, v_scales;
  std::vector<uint8_t> m_codes, v_codes;
  std::vector<uint16_t> bf16_copy;  // written by the update
};

// Moments whose magnitudes span several decades within a block (as Adam's
// do), in blocks of `block` elements (the last one shorter when n is not a
// multiple).
inline States8bit random_states_8bit(int64_t n, int64_t block, uint64_t seed) {
  Generator gen(seed);
  States8bit s;
  std::vector<float> m, sqrt_v;
  for (int64_t i = 0; i < n; ++i) {
    s.p.push_back(static_cast<float>(gen.normal()));
    s.g.push_back(static_cast<float>(gen.normal() * std::pow(10.0, -3.0 * gen.uniform())));
    m.push_back(static_cast<float>(gen.normal() * std::pow(10.0, -2.0 - 3.0 * gen.uniform())));
    sqrt_v.push_back(static_cast<float>(std::pow(10.0, -2.0 - 3.0 * gen.uniform())));
  }
  s.m_codes.resize(static_cast<size_t>(n));
  s.v_codes.resize(static_cast<size_t>(n));
  s.bf16_copy.resize(static_cast<size_t>(n));
  for (int64_t at = 0; at < n; at += block) {
    const int64_t len = std::min(block, n - at);
    s.m_scales.push_back(quantize_block(signed_code(), m.data() + at, s.m_codes.data() + at, len));
    s.v_scales.push_back(
        quantize_block(unsigned_code(), sqrt_v.data() + at, s.v_codes.data() + at, len));
  }
  return s;
}

// optim's update of every block of `s`, in place; the gradient read as
// `grad_dtype` (bf16: its values rounded).
inline void optim_update_8bit(const AdamWScalars& sc, int64_t block, DType grad_dtype,
                              States8bit& s) {
  const int64_t n = static_cast<int64_t>(s.p.size());
  std::vector<float> m_scratch(static_cast<size_t>(block)), v_scratch(static_cast<size_t>(block));
  std::vector<BFloat16> g16(static_cast<size_t>(n));
  for (size_t i = 0; i < g16.size(); ++i) g16[i].bits = f32_to_bf16(s.g[i]);
  for (int64_t at = 0, b = 0; at < n; at += block, ++b) {
    const int64_t len = std::min(block, n - at);
    const size_t i = static_cast<size_t>(at), bi = static_cast<size_t>(b);
    auto update = [&](const auto* grad) {
      adamw8bit_update_block(sc, s.p.data() + i, grad + i, s.m_codes.data() + i, s.m_scales[bi],
                             s.v_codes.data() + i, s.v_scales[bi], m_scratch.data(),
                             v_scratch.data(), s.bf16_copy.data() + i, len);
    };
    if (grad_dtype == DType::BF16) {
      update(g16.data());
    } else {
      update(s.g.data());
    }
  }
}

// The states as tensors on `device` (the gradient as `grad_dtype`), updated
// by `update(p, grad, m_codes, m_scales, v_codes, v_scales, bf16_copy)`
// and read back.
template <typename Update>
States8bit updated_8bit(const States8bit& s, DType grad_dtype, Device device, Update update) {
  const int64_t n = static_cast<int64_t>(s.p.size());
  const int64_t blocks = static_cast<int64_t>(s.m_scales.size());
  const Tensor p = Tensor::from_vector(s.p, {n}).to(device);
  const Tensor m_codes = Tensor::from_vector(s.m_codes, {n}).to(device);
  const Tensor v_codes = Tensor::from_vector(s.v_codes, {n}).to(device);
  const Tensor m_scales = Tensor::from_vector(s.m_scales, {blocks}).to(device);
  const Tensor v_scales = Tensor::from_vector(s.v_scales, {blocks}).to(device);
  const Tensor copy = Tensor::zeros({n}, DType::BF16).to(device);
  update(p, Tensor::from_vector(s.g, {n}).to(device, grad_dtype), m_codes, m_scales, v_codes,
         v_scales, copy);
  States8bit out = s;
  out.p = p.to(Device::cpu()).to_vector<float>();
  out.m_codes = m_codes.to(Device::cpu()).to_vector<uint8_t>();
  out.v_codes = v_codes.to(Device::cpu()).to_vector<uint8_t>();
  out.m_scales = m_scales.to(Device::cpu()).to_vector<float>();
  out.v_scales = v_scales.to(Device::cpu()).to_vector<float>();
  const std::vector<BFloat16> bf16 = copy.to(Device::cpu()).to_vector<BFloat16>();
  for (size_t i = 0; i < bf16.size(); ++i) out.bf16_copy[i] = bf16[i].bits;
  return out;
}

}  // namespace lt::optim::testing
