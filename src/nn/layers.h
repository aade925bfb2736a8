#pragma once
// The leaf modules: Linear, Embedding, RMSNorm, LayerNorm.
#include "autograd/functions.h"
#include "nn/module.h"
#include "ops/op_profile.h"

namespace lt::nn {

struct Linear {
  Tensor weight;  // [out, in]
  Tensor bias;    // [out] or undefined

  Linear() = default;
  Linear(int64_t in, int64_t out, bool with_bias, Generator* gen, DType dtype,
         const std::string& name, double init_std = 0.02);
  Tensor forward(const Tensor& x) const {
    ops::OpProfileScope profile("forward gemm", x.device());
    return linear(x, weight, bias);
  }
  void collect(const std::string& prefix, NamedParameters& out) const;
};

struct Embedding {
  Tensor weight;  // [vocab, dim]

  Embedding() = default;
  Embedding(int64_t vocab, int64_t dim, Generator* gen, DType dtype, const std::string& name,
            double init_std = 0.02);
  Tensor forward(const Tensor& ids) const {
    ops::OpProfileScope profile("forward embedding", ids.device());
    return embedding(weight, ids);
  }
  void collect(const std::string& prefix, NamedParameters& out) const;
};

// RMSNorm or LayerNorm, chosen per model family.
enum class NormKind { RMS, Layer };

struct Norm {
  NormKind kind = NormKind::RMS;
  Tensor weight;  // [dim], ones at init
  Tensor bias;    // [dim] for LayerNorm, zeros at init
  double eps = 1e-6;

  Norm() = default;
  Norm(NormKind kind, int64_t dim, double eps, DType dtype, const std::string& name);
  Tensor forward(const Tensor& x) const {
    ops::OpProfileScope profile("forward norm", x.device());
    return kind == NormKind::RMS ? rms_norm(x, weight, eps) : layer_norm(x, weight, bias, eps);
  }
  void collect(const std::string& prefix, NamedParameters& out) const;
};

}  // namespace lt::nn
