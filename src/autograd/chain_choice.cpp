#include "autograd/chain_choice.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "autograd/engine.h"
#include "autograd/functions.h"
#include "autograd/fused_chain.h"
#include "autograd/fused_rope.h"
#include "autograd/grad_mode.h"
#include "compile/cache_entry.h"
#include "compile/gpu_kernel_cache.h"
#include "core/error.h"
#include "core/random.h"
#include "core/stream.h"

namespace lt::autograd {
namespace {

constexpr int kTimedRuns = 5;

bool is_rope_chain(const CallGraph& graph, const FusionPlan& plan, int32_t chain) {
  const FusedChain& c = plan.chains.at(static_cast<size_t>(chain));
  return graph.nodes[static_cast<size_t>(c.nodes.front())].fn == "rotary_embedding";
}

// What the two times depend on: the chain's calls (two chains of one
// kernel graph, add and bias_add, swiglu and silu * mul, differ as calls),
// its kernel graph, its inputs' shapes and dtypes, the machine, and the
// kernels' version and forms (the training target's).
std::string entry_key(const CallGraph& graph, const FusionPlan& plan, int32_t chain,
                      const std::string& machine) {
  const FusedChain& c = plan.chains.at(static_cast<size_t>(chain));
  std::string key = "chain choice 2 |";
  for (int32_t m : c.nodes) key += " " + graph.nodes[static_cast<size_t>(m)].fn;
  key += " | " + chain_kernel_graph(graph, plan, chain).key() + " |";
  for (int32_t v : chain_inputs(graph, c)) {
    key += " " + shape_str(graph.shapes[static_cast<size_t>(v)]) +
           dtype_name(graph.dtypes[static_cast<size_t>(v)]);
  }
  const compile::GpuForms forms = compile::training_gpu_target().forms;
  return key + " | " + machine + " | " + compile::kGpuAbi + " x" +
         std::to_string(forms.elements_per_thread) + (forms.packed ? "p" : "") + " r" +
         std::to_string(forms.col_sum_rows);
}

// Uniform values in [-1, 1) on `device`: kRandomRows rows drawn on the
// host, then copied over the rest, doubling (drawing GPT-2's 65536 x 768
// on the host took seconds a tensor; the kernels' times do not depend on
// which rows repeat).
constexpr int64_t kRandomRows = 64;

Tensor random_on(const Shape& shape, DType dtype, Device device, Generator& gen) {
  const int64_t cols = shape.empty() ? 1 : shape.back();
  const int64_t rows = cols == 0 ? 0 : numel(shape) / cols;
  if (rows <= kRandomRows) return Tensor::uniform(shape, gen, -1, 1, dtype).to(device);
  Tensor whole = Tensor::empty({rows, cols}, dtype, device);
  whole.slice(0, 0, kRandomRows)
      .copy_(Tensor::uniform({kRandomRows, cols}, gen, -1, 1, dtype).to(device));
  for (int64_t filled = kRandomRows; filled < rows; filled *= 2) {
    const int64_t more = std::min(filled, rows - filled);
    whole.slice(0, filled, filled + more).copy_(whole.slice(0, 0, more));
  }
  return whole.reshape(shape);
}

// `run` once to warm up (kernels compiled and loaded, memory cached), then
// the median over kTimedRuns trials of kRunsATrial runs back to back, per
// run: on CUDA the device's time between two events, with the host
// enqueueing ahead of the device after the first run as in training (a
// single run would count the host's launches while the device waits); on
// the CPU the wall time.
constexpr int kRunsATrial = 4;

double median_ms(const std::function<void()>& run, Device device) {
  run();
  const Stream stream = current_stream(device);
  std::vector<double> ms;
  for (int i = 0; i < kTimedRuns; ++i) {
    if (device.is_cuda()) {
      Event start(true), end(true);
      start.record(stream);
      for (int r = 0; r < kRunsATrial; ++r) run();
      end.record(stream);
      end.synchronize();
      ms.push_back(static_cast<double>(start.elapsed_ms(end)) / kRunsATrial);
    } else {
      const auto begin = std::chrono::steady_clock::now();
      for (int r = 0; r < kRunsATrial; ++r) run();
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
              .count() /
          kRunsATrial);
    }
  }
  std::sort(ms.begin(), ms.end());
  return ms[kTimedRuns / 2];
}

// The backward of sum_k sum(outputs[k] * weights[k]): each output's
// gradient is its weight, as a later call's would be.
void backward_from(const std::vector<Tensor>& outputs, const std::vector<Tensor>& weights) {
  Tensor root;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Tensor term = sum(mul(outputs[k], weights[k]));
    root = root.defined() ? add(root, term) : term;
  }
  backward(root);
}

// The chain's calls one by one, as a program runs calls outside chains;
// a bias_add stands for the bias its linear's GEMM adds (free).
std::vector<Tensor> run_calls(const CallGraph& graph, const FusedChain& chain,
                              const std::vector<int32_t>& input_values,
                              const std::vector<int32_t>& output_values,
                              const std::vector<Tensor>& inputs,
                              const std::vector<CallAgain>& again) {
  std::map<int32_t, Tensor> slot;
  for (size_t i = 0; i < input_values.size(); ++i) slot[input_values[i]] = inputs[i];
  for (int32_t m : chain.nodes) {
    const CallNode& n = graph.nodes[static_cast<size_t>(m)];
    if (n.fn == "bias_add") {
      slot[n.output] = slot.at(n.inputs[0]);
      continue;
    }
    LT_CHECK(static_cast<size_t>(m) < again.size() && again[static_cast<size_t>(m)],
             "fusion: no way to run call ", m, " (", n.fn, ") again");
    std::vector<Tensor> in;
    for (int32_t v : n.inputs) in.push_back(v < 0 ? Tensor() : slot.at(v));
    slot[n.output] = again[static_cast<size_t>(m)](in);
  }
  std::vector<Tensor> out;
  for (int32_t v : output_values) out.push_back(slot.at(v));
  return out;
}

}  // namespace

ChainChooser::ChainChooser(compile::KernelCache& cache, std::string machine)
    : cache_(cache), machine_(std::move(machine)) {}

ChainTimes ChainChooser::measure(const CallGraph& graph, const FusionPlan& plan, int32_t chain,
                                 const std::vector<CallAgain>& again, Device device) {
  EnableGradGuard grad;
  const FusedChain& c = plan.chains.at(static_cast<size_t>(chain));
  const std::vector<int32_t> input_values = chain_inputs(graph, c);
  const std::vector<int32_t> output_values = chain_outputs(graph, plan, chain);
  Generator gen(0xc4a1);
  std::vector<Tensor> inputs, weights;
  for (int32_t v : input_values) {
    Tensor t = random_on(graph.shapes[static_cast<size_t>(v)], graph.dtypes[static_cast<size_t>(v)],
                         device, gen);
    t.set_requires_grad(true);
    inputs.push_back(std::move(t));
  }
  for (int32_t v : output_values) {
    weights.push_back(random_on(graph.shapes[static_cast<size_t>(v)],
                                graph.dtypes[static_cast<size_t>(v)], device, gen));
  }
  // Held by a shared_ptr, as a program holds it: its runs' tape nodes keep it.
  const auto compiled = std::make_shared<FusedChainKernel>(graph, plan, chain, cache_, device);
  ChainTimes times;
  // Each run from no gradient, so that none adds to an earlier one.
  const auto fresh = [&] {
    for (const Tensor& t : inputs) t.set_grad(Tensor());
  };
  times.compiled_ms = median_ms(
      [&] {
        fresh();
        backward_from(compiled->run(inputs), weights);
      },
      device);
  times.calls_ms = median_ms(
      [&] {
        fresh();
        backward_from(run_calls(graph, c, input_values, output_values, inputs, again), weights);
      },
      device);
  return times;
}

bool ChainChooser::runs_compiled(const CallGraph& graph, const FusionPlan& plan, int32_t chain,
                                 const std::vector<CallAgain>& again, Device device) {
  if (is_rope_chain(graph, plan, chain)) {
    // Untimed (its kernel graph is not chain_kernel_graph's: the tables are
    // f64 constants it reads as f32): compiled when its kernels can be had.
    try {
      FusedRopeKernel(graph, plan, chain, cache_, device);
      return true;
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stats_.first_failure.empty()) stats_.first_failure = e.what();
      return false;
    }
  }
  const std::string key = entry_key(graph, plan, chain, machine_);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = choices_.find(key); it != choices_.end()) return it->second;
  const auto decided = [&](bool compiled) {
    choices_[key] = compiled;
    ++(compiled ? stats_.compiled : stats_.as_calls);
    return compiled;
  };
  // No kernel here (no MLIR and none in the folder), or no memory for the
  // trial: the calls run, which need neither. Not kept: the next run tries
  // again.
  const auto failed = [&](const std::exception& e) {
    if (stats_.first_failure.empty()) stats_.first_failure = e.what();
    return decided(false);
  };
  std::filesystem::path path;
  if (!cache_.folder().empty()) {
    path = compile::cache_entry_path(cache_.folder(), key, ".choice");
    bool damaged = false;
    if (std::optional<std::string> kept = compile::read_cache_entry(path, key, damaged)) {
      const bool compiled = kept->rfind("compiled ", 0) == 0;
      if (compiled || kept->rfind("calls ", 0) == 0) {
        ++stats_.from_disk;
        return decided(compiled);
      }
    }
  }
  ChainTimes times;
  try {
    times = measure(graph, plan, chain, again, device);
  } catch (const std::exception& e) {
    return failed(e);
  }
  ++stats_.measured;
  const bool compiled = times.compiled_ms <= times.calls_ms;
  if (!path.empty()) {
    char text[96];
    std::snprintf(text, sizeof text, "%s %.6f ms compiled, %.6f ms as calls\n",
                  compiled ? "compiled" : "calls", times.compiled_ms, times.calls_ms);
    compile::write_cache_entry(path, key, text);
  }
  return decided(compiled);
}

ChainChoiceStats ChainChooser::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace lt::autograd
