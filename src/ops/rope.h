#pragma once
// Rotary position embedding (RoPE), Hugging Face's convention: for a head
// vector of D elements, element j and element j + D/2 (j < D/2) form a
// pair that is rotated by the angle position * inv_freq[j] ("rotate_half").
// Raw kernels: no autograd (see autograd/functions.h for that).
#include <vector>

#include "core/tensor.h"

namespace lt::ops {

// inv_freq[i] = theta^(-2i/D) for i < D/2, in float64. D must be even.
std::vector<double> rope_inv_freq(int64_t head_dim, double theta);

// Llama 3.x's "llama3" rope_scaling, as transformers'
// _compute_llama3_parameters: frequencies whose wavelength 2 pi / f is
// below original_max / high_freq_factor are kept, those above
// original_max / low_freq_factor are divided by `factor`, and those between
// are interpolated smoothly.
std::vector<double> rope_llama3_scaling(std::vector<double> inv_freq, double factor,
                                        double low_freq_factor, double high_freq_factor,
                                        int64_t original_max_positions);

struct RopeCosSin {
  Tensor cos;  // [max_positions, inv_freq.size()], f64
  Tensor sin;
};
// cos and sin of p * inv_freq[i] for positions p < max_positions, in f64.
RopeCosSin rope_cos_sin(const std::vector<double>& inv_freq, int64_t max_positions);

// x: [B, T, H, D]; cos and sin: [P, D/2] (any floating dtype, usually the
// f64 tables above). positions: undefined (token t sits at position t), or
// integer (i32/i64) [T] shared by the batch, or [B, T] (packed sequences);
// each must lie in [0, P). Result: x's shape and dtype, computed in f32
// (f64 for f64).
Tensor rotary(const Tensor& x, const Tensor& cos, const Tensor& sin,
              const Tensor& positions = Tensor());
// The rotation is orthogonal, so its backward is the rotation by the
// negative angle applied to the output gradient.
Tensor rotary_backward(const Tensor& grad_y, const Tensor& cos, const Tensor& sin,
                       const Tensor& positions = Tensor());

}  // namespace lt::ops
