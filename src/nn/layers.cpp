#include "nn/layers.h"

namespace lt::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, Generator* gen, DType dtype,
               const std::string& name, double init_std)
    : weight(normal_parameter({out, in}, init_std, gen, dtype, join(name, "weight"))) {
  if (with_bias) bias = constant_parameter({out}, 0.0, dtype, join(name, "bias"), gen != nullptr);
}

void Linear::collect(const std::string& prefix, NamedParameters& out) const {
  out.emplace_back(join(prefix, "weight"), weight);
  if (bias.defined()) out.emplace_back(join(prefix, "bias"), bias);
}

Embedding::Embedding(int64_t vocab, int64_t dim, Generator* gen, DType dtype,
                     const std::string& name, double init_std)
    : weight(normal_parameter({vocab, dim}, init_std, gen, dtype, join(name, "weight"))) {}

void Embedding::collect(const std::string& prefix, NamedParameters& out) const {
  out.emplace_back(join(prefix, "weight"), weight);
}

Norm::Norm(NormKind kind, int64_t dim, double eps, DType dtype, const std::string& name)
    : kind(kind), weight(constant_parameter({dim}, 1.0, dtype, join(name, "weight"))), eps(eps) {
  if (kind == NormKind::Layer) bias = constant_parameter({dim}, 0.0, dtype, join(name, "bias"));
}

void Norm::collect(const std::string& prefix, NamedParameters& out) const {
  out.emplace_back(join(prefix, "weight"), weight);
  if (bias.defined()) out.emplace_back(join(prefix, "bias"), bias);
}

}  // namespace lt::nn
