// The fusion compiler's GPU kernels against the hand-written ops:: kernels
// and against the unfused op sequence they replace (issue 24's
// performance table). A benchmark: set LT_BENCH=1 (bench/compile_chains.sh
// does); it prints one line per chain and asserts nothing about speed.
//
// Each time is the mean of 20 launches after 3 warm-ups, measured with
// CUDA events on the current stream. "GB" is what the chain must move at
// least (its graph's inputs and outputs once each), the same figure for
// all three columns, so each column's TB/s is that figure over its time
// and "%" is that rate as a share of the H200's 4.3 TB/s copy rate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "autograd/fused_rope.h"
#include "compile/chains.h"
#include "compile/col_sum_cases.h"
#include "compile/gpu_kernel.h"
#include "compile/gpu_kernel_cache.h"
#include "compile/interpret.h"
#include "core/random.h"
#include "core/stream.h"
#include "gpu_test_support.h"
#include "ops/activations.h"
#include "ops/elementwise.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "optim/adamw_kernel.h"
#include "optim/compiled_adamw.h"
#include "optim/cuda/adamw.h"
#include "support/gpu_kernel_cases.h"
#include "support/unfused_graphs.h"

namespace lt::compile {
namespace {

constexpr double kCopyBytesPerSecond = 4.3e12;

using lt::testing::milliseconds_per_call;

double graph_bytes(const KernelGraph& graph, int64_t rows, int64_t cols) {
  double bytes = 0;
  for (const InputSpec& in : graph.inputs()) {
    bytes += static_cast<double>(element_count(in.shape, rows, cols) * dtype_size(in.dtype));
  }
  for (const OutputSpec& out : graph.outputs()) {
    bytes += static_cast<double>(element_count(graph.node(out.node).shape, rows, cols) *
                                 dtype_size(out.dtype));
  }
  return bytes;
}

struct Chain {
  const char* name;
  KernelGraph graph;
  int64_t rows, cols;
  std::vector<Tensor> inputs;     // the graph's, on the GPU
  std::function<void()> hand;     // the hand-written kernel(s), or empty
  std::function<void()> unfused;  // the op sequence the chain replaces, or empty
};

Tensor on_gpu(const Shape& shape, DType dtype, Generator& gen, double lo = -1, double hi = 1) {
  return Tensor::uniform(shape, gen, lo, hi, dtype).to(Device::cuda(0));
}

std::vector<Chain> chains() {
  Generator gen(1);
  const DType bf16 = DType::BF16;
  const int64_t tokens = 16384, hidden = 4096, ffn = 8192;
  std::vector<Chain> out;
  {
    Tensor gate = on_gpu({tokens, ffn}, bf16, gen), up = on_gpu({tokens, ffn}, bf16, gen);
    out.push_back({"swiglu",
                   swiglu_forward(bf16),
                   tokens,
                   ffn,
                   {gate, up},
                   [=] { ops::swiglu(gate, up); },
                   [=] { ops::mul(ops::silu(gate), up); }});
  }
  {
    Tensor x = on_gpu({tokens, ffn}, bf16, gen);
    out.push_back(
        {"gelu_tanh", gelu_tanh_forward(bf16), tokens, ffn, {x}, [=] { ops::gelu_tanh(x); }, {}});
  }
  {
    Tensor x = on_gpu({tokens, hidden}, bf16, gen);
    out.push_back(
        {"softmax", softmax_forward(bf16), tokens, hidden, {x}, [=] { ops::softmax(x); }, {}});
  }
  {
    Tensor x = on_gpu({tokens, hidden}, bf16, gen), r = on_gpu({tokens, hidden}, bf16, gen);
    Tensor w = on_gpu({hidden}, bf16, gen);
    out.push_back({"residual+rms_norm",
                   residual_rms_norm_forward(bf16, 1e-5),
                   tokens,
                   hidden,
                   {x, r, w},
                   {},
                   [=] { ops::rms_norm(ops::add(x, r), w, 1e-5); }});
  }
  {
    Tensor x = on_gpu({tokens, hidden}, bf16, gen);
    Tensor w = on_gpu({hidden}, bf16, gen), b = on_gpu({hidden}, bf16, gen);
    out.push_back({"layer_norm",
                   layer_norm_forward(bf16, 1e-5),
                   tokens,
                   hidden,
                   {x, w, b},
                   [=] { ops::layer_norm(x, w, b, 1e-5); },
                   {}});
  }
  {
    // [B=8, T=2048, H=32, D=128]: the kernel reads x's halves in place and
    // the f32 tables once per position of each sequence (autograd/fused_rope.h);
    // the GB column counts the tables at x's size, as before.
    const int64_t batch = 8, seq = 2048, heads = 32, dim = 128;
    const int64_t rows = batch * seq * heads, half = dim / 2;
    Tensor x = on_gpu({batch, seq, heads, dim}, bf16, gen);
    const ops::RopeCosSin tables = ops::rope_cos_sin(ops::rope_inv_freq(dim, 10000.0), seq);
    Tensor cos = tables.cos.to(Device::cuda(0)), sin = tables.sin.to(Device::cuda(0));
    out.push_back(
        {"rope",
         autograd::rope_kernel_graph(bf16, heads),
         rows,
         half,
         {x.slice(3, 0, half), x.slice(3, half, dim), on_gpu({batch * seq, half}, DType::F32, gen),
          on_gpu({batch * seq, half}, DType::F32, gen)},
         [=] { ops::rotary(x, cos, sin); },
         {}});
  }
  {
    // 64 M parameters; the scalars are one-element row values.
    const int64_t n = 64 << 20;
    Tensor p = on_gpu({1, n}, DType::F32, gen), g = on_gpu({1, n}, bf16, gen);
    Tensor m = on_gpu({1, n}, DType::F32, gen), v = on_gpu({1, n}, DType::F32, gen, 0.01, 1);
    Tensor copy = Tensor::empty({1, n}, bf16, Device::cuda(0));
    std::vector<Tensor> inputs = {p, g, m, v};
    for (int i = 0; i < 9; ++i) inputs.push_back(on_gpu({1}, DType::F32, gen, 0.01, 1));
    optim::cuda::AdamWCudaJob job;
    job.s = optim::adamw_scalars(1e-4, 0.9, 0.999, 1e-8, 0.01, 1.0, 10);
    job.param = p.data<float>();
    job.grad = g.data_ptr();
    job.grad_is_bf16 = true;
    job.exp_avg = m.data<float>();
    job.exp_avg_sq = v.data<float>();
    job.shadow = static_cast<uint16_t*>(copy.data_ptr());
    job.numel = n;
    out.push_back({"adamw (bf16 grads, bf16 copy)",
                   optim::adamw_kernel_graph(bf16, true),
                   1,
                   n,
                   inputs,
                   [=] { optim::cuda::adamw_update_multi(Device::cuda(0), {job}); },
                   {}});
  }
  return out;
}

// The chain as one kernel per op (tests/support/unfused_graphs.h), each in
// the packed form; empty for a chain with row-mapped inputs (RoPE).
std::function<void()> per_op_sequence(GpuKernelCache& cache, const Chain& c) {
  for (const InputSpec& in : c.graph.inputs()) {
    if (!in.map.identity()) return {};
  }
  auto kernels = std::make_shared<std::vector<testing::UnfusedKernel>>(
      testing::one_kernel_per_op(c.graph).kernels);
  std::map<int32_t, Tensor> inputs;
  for (int32_t id = 0; id < static_cast<int32_t>(c.graph.nodes().size()); ++id) {
    const Node& n = c.graph.node(id);
    if (n.op == OpKind::Input) inputs[id] = c.inputs.at(static_cast<size_t>(n.input_index));
  }
  const Device device = c.inputs.front().device();
  auto loaded = std::make_shared<std::vector<DeviceKernel>>();
  for (const testing::UnfusedKernel& k : *kernels) {
    loaded->push_back({device, nullptr, cache.get(k.graph, device.index)});
  }
  return [kernels, loaded, inputs, rows = c.rows, cols = c.cols] {
    std::map<int32_t, Tensor> values = inputs;
    for (size_t i = 0; i < kernels->size(); ++i) {
      const testing::UnfusedKernel& k = (*kernels)[i];
      std::vector<Tensor> args;
      for (int32_t source : k.sources) args.push_back(values.at(source));
      values[k.node] = testing::run_unfused_kernel((*loaded)[i], k, args, rows, cols);
    }
  };
}

TEST(CompiledKernelsGpuBench, ChainsAgainstHandWrittenAndUnfused) {
  LT_REQUIRE_GPU();
  if (std::getenv("LT_BENCH") == nullptr) GTEST_SKIP() << "a benchmark: set LT_BENCH=1";
  GpuKernelCache cache(testing::gpu_test_kernel_folder());
  GpuKernelCache by_four(testing::gpu_test_kernel_folder(), testing::four_elements_target());
  GpuKernelCache packed(testing::gpu_test_kernel_folder(), testing::packed_eight_target());
  std::printf("%-30s %10s %8s | %18s | %18s | %18s | %18s | %18s | %18s | %9s %10s %10s\n", "chain",
              "shape", "GB", "compiled ms (TB/s %)", "x4/thread ms", "packed 8 ms",
              "hand ms (TB/s %)", "unfused ms (TB/s %)", "per-op ms (kernels)", "comp/hand",
              "unf/comp", "perop/comp");
  // LT_BENCH_CHAIN: that chain alone (for a profiler's run).
  const char* only = std::getenv("LT_BENCH_CHAIN");
  for (const Chain& c : chains()) {
    if (only != nullptr && c.name != std::string(only)) continue;
    const double bytes = graph_bytes(c.graph, c.rows, c.cols);
    const auto cell = [&](double ms) {
      char buf[40];
      if (ms <= 0) return std::string("-");
      const double rate = bytes / (ms * 1e-3);
      std::snprintf(buf, sizeof buf, "%.3f (%.2f %3.0f%%)", ms, rate / 1e12,
                    100 * rate / kCopyBytesPerSecond);
      return std::string(buf);
    };
    const double compiled = milliseconds_per_call([&] { call_gpu(cache, c.graph, c.inputs); });
    const double compiled_by_four =
        milliseconds_per_call([&] { call_gpu(by_four, c.graph, c.inputs); });
    const double compiled_packed =
        milliseconds_per_call([&] { call_gpu(packed, c.graph, c.inputs); });
    const double hand = c.hand ? milliseconds_per_call(c.hand) : 0;
    const double unfused = c.unfused ? milliseconds_per_call(c.unfused) : 0;
    const std::function<void()> per_op = per_op_sequence(packed, c);
    const double per_op_ms = per_op ? milliseconds_per_call(per_op) : 0;
    char per_op_cell[40] = "-";
    if (per_op) {
      std::snprintf(per_op_cell, sizeof per_op_cell, "%.3f (%zu)", per_op_ms,
                    testing::one_kernel_per_op(c.graph).kernels.size());
    }
    char shape[32];
    std::snprintf(shape, sizeof shape, "%lldx%lld", static_cast<long long>(c.rows),
                  static_cast<long long>(c.cols));
    // The ratios take the fastest of the compiled forms.
    const double best = std::min({compiled, compiled_by_four, compiled_packed});
    std::printf(
        "%-30s %10s %8.3f | %18s | %18s | %18s | %18s | %18s | %18s | %9.2f %10.2f %10.2f\n",
        c.name, shape, bytes / 1e9, cell(compiled).c_str(), cell(compiled_by_four).c_str(),
        cell(compiled_packed).c_str(), cell(hand).c_str(), cell(unfused).c_str(), per_op_cell,
        hand > 0 ? best / hand : 0.0, unfused > 0 ? unfused / best : 0.0,
        per_op ? per_op_ms / best : 0.0);
  }
}

// One chain at a training shape under several targets: a line of times
// (ms, and the graph's bytes over the time as a share of the copy rate).
struct ShapeCase {
  const char* name;
  KernelGraph graph;
  int64_t rows, cols;
};

void print_targets(const char* what,
                   const std::vector<std::pair<const char*, GpuKernelCache*>>& targets,
                   const std::vector<ShapeCase>& cases) {
  std::printf("%-36s %12s %8s", what, "shape", "GB");
  for (const auto& [label, cache] : targets) std::printf(" | %18s", label);
  std::printf("\n");
  Generator gen(2);
  for (const ShapeCase& c : cases) {
    std::vector<Tensor> in;
    for (const InputSpec& spec : c.graph.inputs()) {
      in.push_back(on_gpu(testing::class_shape(spec.shape, c.rows, c.cols), spec.dtype, gen));
    }
    const double bytes = graph_bytes(c.graph, c.rows, c.cols);
    std::printf("%-36s %6lldx%-5lld %8.3f", c.name, static_cast<long long>(c.rows),
                static_cast<long long>(c.cols), bytes / 1e9);
    for (const auto& [label, cache] : targets) {
      const double ms = milliseconds_per_call([&] { call_gpu(*cache, c.graph, in); });
      std::printf(" | %8.3f (%3.0f%%)    ", ms, 100 * bytes / (ms * 1e-3) / kCopyBytesPerSecond);
    }
    std::printf("\n");
  }
}

// The ColSums form (gradients of [cols] inputs summed in the kernel) at
// training shapes, one row an iteration against two and four
// (GpuForms::col_sum_rows; graphs with row reductions keep one): GPT-2's
// bias + GELU and LayerNorm backward at 64 x 1024 tokens, and the 3B's
// residual + RMSNorm backward at 8 x 1024.
TEST(CompiledKernelsGpuBench, ColSumsOneTwoAndFourRowsAnIteration) {
  LT_REQUIRE_GPU();
  if (std::getenv("LT_BENCH") == nullptr) GTEST_SKIP() << "a benchmark: set LT_BENCH=1";
  GpuKernelCache one(testing::gpu_test_kernel_folder(), testing::packed_eight_target());
  GpuKernelCache two(testing::gpu_test_kernel_folder(), testing::col_sum_rows_target(2));
  GpuKernelCache four(testing::gpu_test_kernel_folder(), testing::col_sum_rows_target(4));
  const DType bf16 = DType::BF16;
  print_targets(
      "col sums", {{"one row", &one}, {"two rows", &two}, {"four rows", &four}},
      {{"GPT-2 bias + gelu backward", testing::bias_gelu_backward(bf16), 65536, 3072},
       {"GPT-2 layer_norm backward",
        gradient_graph(layer_norm_forward(bf16, 1e-5), {true, true, true}), 65536, 768},
       {"3B residual_rms_norm backward",
        gradient_graph(residual_rms_norm_forward(bf16, 1e-5), {true, true, true}), 8192, 2048}});
}

}  // namespace
}  // namespace lt::compile
