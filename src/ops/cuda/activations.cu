// Pointwise activations and their backward passes on the GPU, as maps over
// dense tensors (ops/cuda/elementwise_map.cuh). The formulas are those of
// ops/activations.cpp, evaluated in f32.
#include "ops/cuda/activations.h"
#include "ops/cuda/elementwise_map.cuh"

namespace lt::ops::cuda {

namespace {

// sqrt(2 / pi) and the cubic coefficient of GPT-2's tanh approximation.
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluCubic = 0.044715f;

// exp(-x) overflows to inf for very negative x, giving 1 / inf = 0: the
// right limit, so no branch is needed.
__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + __expf(-x));
}

struct SiluFn {
  __device__ float operator()(float x) const { return x * sigmoid(x); }
};
struct SiluBackwardFn {
  // silu'(x) = s (1 + x (1 - s)) with s = sigmoid(x).
  __device__ float operator()(float x, float g) const {
    const float s = sigmoid(x);
    return g * s * (1.0f + x * (1.0f - s));
  }
};
struct GeluFn {
  __device__ float operator()(float x) const {
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    return 0.5f * x * (1.0f + tanhf(u));
  }
};
struct GeluBackwardFn {
  // 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx, t = tanh(u), du/dx = sqrt(2/pi) (1 + 3 c x^2).
  __device__ float operator()(float x, float g) const {
    const float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    const float t = tanhf(u);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    return g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
  }
};
struct SwigluFn {
  __device__ float operator()(float gate, float up) const { return gate * sigmoid(gate) * up; }
};
struct SwigluGateFn {
  __device__ float operator()(float gate, float up, float g) const {
    const float s = sigmoid(gate);
    return g * up * s * (1.0f + gate * (1.0f - s));
  }
};
struct SwigluUpFn {
  __device__ float operator()(float gate, float g) const { return g * gate * sigmoid(gate); }
};

// out = f(first, rest...) in first's dtype; the others are brought to it.
template <int K, typename F>
Tensor map(const char* op, const F& f, const std::array<Tensor, K>& inputs) {
  const Tensor& first = inputs[0];
  check_kernel_dtype(first, op);
  std::array<Tensor, K> dense_inputs;
  for (int k = 0; k < K; ++k) {
    const Tensor& t = inputs[k];
    dense_inputs[k] = dense(t.dtype() == first.dtype() ? t : t.to(first.dtype()));
  }
  Tensor out = Tensor::empty(first.shape(), first.dtype(), first.device());
  dispatch_kernel_dtype(first.dtype(),
                        [&](auto tag) { launch_map<decltype(tag), K>(f, dense_inputs, out); });
  return out;
}

}  // namespace

Tensor silu(const Tensor& x) {
  return map<1>("silu", SiluFn{}, {x});
}
Tensor silu_backward(const Tensor& grad_out, const Tensor& x) {
  return map<2>("silu_backward", SiluBackwardFn{}, {x, grad_out});
}
Tensor gelu_tanh(const Tensor& x) {
  return map<1>("gelu_tanh", GeluFn{}, {x});
}
Tensor gelu_tanh_backward(const Tensor& grad_out, const Tensor& x) {
  return map<2>("gelu_tanh_backward", GeluBackwardFn{}, {x, grad_out});
}
Tensor swiglu(const Tensor& gate, const Tensor& up) {
  return map<2>("swiglu", SwigluFn{}, {gate, up});
}
Tensor swiglu_backward_gate(const Tensor& grad_out, const Tensor& gate, const Tensor& up) {
  return map<3>("swiglu_backward", SwigluGateFn{}, {gate, up, grad_out});
}
Tensor swiglu_backward_up(const Tensor& grad_out, const Tensor& gate) {
  return map<2>("swiglu_backward", SwigluUpFn{}, {gate, grad_out});
}

}  // namespace lt::ops::cuda
