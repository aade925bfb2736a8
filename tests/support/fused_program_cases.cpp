#include "support/fused_program_cases.h"

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/fused_program.h"
#include "autograd/trace.h"
#include "core/random.h"

namespace lt::autograd::testing {

std::vector<FusedProgramCase> fused_program_cases() {
  std::vector<FusedProgramCase> cases;
  const int64_t tokens = 2 * 64, width = 256;
  cases.push_back({"pre-norm block",
                   [](const std::vector<Tensor>& in) {
                     const Tensor& x = in[0];
                     const Tensor h = add(x, matmul(rms_norm(x, in[1], 1e-6), in[2]));
                     return add(h, matmul(silu(rms_norm(h, in[3], 1e-6)), in[4]));
                   },
                   {{2, tokens / 2, width}, {width}, {width, width}, {width}, {width, width}},
                   {1.0, 0.5, 0.06, 0.5, 0.06},
                   {}});
  const RopeTable table = make_rope_table(64, 128, 10000.0);
  cases.push_back({"rope then scale",
                   [](const std::vector<Tensor>& in) {
                     const RopeTable t{in[1], in[2], 64};
                     return scale(rotary_embedding(in[0], t), 2.0);
                   },
                   {{2, 100, 4, 64}},
                   {1.0},
                   {table.cos, table.sin}});
  return cases;
}

std::vector<Tensor> leaves(const std::vector<Tensor>& values) {
  std::vector<Tensor> out;
  for (const Tensor& v : values) {
    Tensor t = v.clone();
    t.set_requires_grad(true);
    out.push_back(t);
  }
  return out;
}

std::vector<Tensor> output_and_grads(const Tensor& out, const std::vector<Tensor>& inputs,
                                     const Tensor& probe) {
  lt::backward(sum(mul(out, probe)));
  std::vector<Tensor> r{out.detach()};
  for (const Tensor& in : inputs) r.push_back(in.grad());
  return r;
}

std::vector<compile::KernelGraph> fused_program_kernel_graphs(DType dtype) {
  std::vector<compile::KernelGraph> graphs;
  Generator gen(1);
  for (const FusedProgramCase& c : fused_program_cases()) {
    std::vector<Tensor> external;
    for (const Shape& shape : c.input_shapes) {
      Tensor t = Tensor::randn(shape, gen, DType::F32).to(dtype);
      t.set_requires_grad(true);
      external.push_back(t);
    }
    external.insert(external.end(), c.constants.begin(), c.constants.end());
    CallTrace trace;
    Tensor out;
    {
      TraceScope scope(trace);
      out = c.f(external);
    }
    for (compile::KernelGraph& g : program_kernel_graphs(trace, external, out)) {
      graphs.push_back(std::move(g));
    }
  }
  return graphs;
}

}  // namespace lt::autograd::testing
