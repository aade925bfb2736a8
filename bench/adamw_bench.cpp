// AdamW::step throughput in parameters per second (the figure issue 7
// compares with PyTorch's CPU AdamW: 1.04 G params/s on the H200 host's 16
// cores with foreach). The model: 64M f32 parameters as 8 tensors of 8M,
// so every step streams ~1.8 GB (f32 gradients) and no cache helps.
// Threads: LT_NUM_THREADS, else all hardware threads.
//
//   build/adamw_bench --benchmark_min_time=2
//
// Measured 2026-11-29 on the H200 machine's host (16-core Xeon, 1 NUMA
// node), same 64M f32 parameters and f32 gradients, best of 10 steps, by a
// timing loop equivalent to BM_AdamWStep (Google Benchmark is not installed
// there), -O2 SSE build:
//   lazytrain AdamW::step: 0.69 (1 thread), 2.26 (4), 3.34 (8), 4.56 (16)
//   G params/s (16 threads: ~128 GB/s of traffic); global_grad_norm 15.2 G/s.
//   torch 2.11 CPU AdamW, 16 threads: foreach 0.93, fused 4.03,
//   single-tensor 0.73 G params/s.
#include <benchmark/benchmark.h>

#include "core/thread_pool.h"
#include "nn/module.h"
#include "optim/adamw.h"
#include "optim/clip.h"

namespace {

constexpr int64_t kTensors = 8;
constexpr int64_t kElementsPerTensor = int64_t{8} << 20;  // 8M: 64M parameters in all

lt::nn::NamedParameters make_model(lt::DType grad_dtype) {
  lt::nn::NamedParameters params;
  for (int64_t i = 0; i < kTensors; ++i) {
    const std::string name = "layer" + std::to_string(i) + ".weight";
    lt::Tensor p = lt::nn::make_parameter(lt::Tensor::full({kElementsPerTensor}, 0.5), name);
    p.set_grad(lt::Tensor::full({kElementsPerTensor}, 1e-3, grad_dtype));
    params.emplace_back(name, p);
  }
  return params;
}

void set_counters(benchmark::State& state, double bytes_per_param) {
  const double params = static_cast<double>(kTensors * kElementsPerTensor);
  state.counters["params/s"] = benchmark::Counter(params * static_cast<double>(state.iterations()),
                                                  benchmark::Counter::kIsRate);
  state.counters["GB/s"] =
      benchmark::Counter(params * bytes_per_param * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
  state.counters["threads"] = lt::thread_pool().num_threads();
}

// Reads p, g, m, v and writes p, m, v: 28 bytes per parameter with f32
// gradients, 22 with bf16.
void BM_AdamWStep(benchmark::State& state) {
  const lt::DType grad_dtype = state.range(0) == 0 ? lt::DType::F32 : lt::DType::BF16;
  lt::nn::NamedParameters params = make_model(grad_dtype);
  lt::optim::AdamW opt(params, {.lr = 1e-4, .weight_decay = 0.1});
  opt.step(1e-4, 1.0);  // first touch of the state pages, outside the timing
  for (auto _ : state) opt.step(1e-4, 0.5);
  state.SetLabel(grad_dtype == lt::DType::F32 ? "f32 grads" : "bf16 grads");
  set_counters(state, grad_dtype == lt::DType::F32 ? 28.0 : 22.0);
}
BENCHMARK(BM_AdamWStep)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The separate gradient pass that clipping costs today (4 bytes/param read).
void BM_GlobalGradNorm(benchmark::State& state) {
  lt::nn::NamedParameters params = make_model(lt::DType::F32);
  for (auto _ : state) benchmark::DoNotOptimize(lt::optim::global_grad_norm(params));
  set_counters(state, 4.0);
}
BENCHMARK(BM_GlobalGradNorm)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
