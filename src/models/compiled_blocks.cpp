#include "models/compiled_blocks.h"

#include <chrono>
#include <sstream>

#include "autograd/cross_entropy_kernels.h"
#include "compile/cross_entropy_chain.h"
#include "core/error.h"
#include "core/grad_mode.h"
#include "core/random.h"
#include "models/causal_lm.h"

namespace lt::models {

namespace {

// What a block's trace may read: its input, its parameters, the rope tables.
std::vector<Tensor> external_tensors(const Stage& stage, const Tensor& x, const StageContext& ctx) {
  nn::NamedParameters params;
  stage.collect(params);
  std::vector<Tensor> external{x};
  for (const auto& p : params) external.push_back(p.second);
  if (ctx.rope != nullptr) {  // read by the rotary_embedding calls
    external.push_back(ctx.rope->cos);
    external.push_back(ctx.rope->sin);
  }
  return external;
}

}  // namespace

CompiledBlocks::CompiledBlocks(std::shared_ptr<compile::KernelCache> cache,
                               std::shared_ptr<autograd::ChainChooser> chooser)
    : cache_(std::move(cache)), chooser_(std::move(chooser)) {}

Tensor CompiledBlocks::forward(const Stage& stage, const Tensor& x, const StageContext& ctx) {
  if (stage.kind() == StageKind::Head && !chooser_) {
    // Its loss's softmax cross-entropy through this cache's kernels. Not
    // with a chooser: on GPT-2 (H200) they took the hand-written kernels'
    // time (0.425 against 0.432 GPU-ms per 1k tokens), and these need no
    // kernel that a machine without MLIR may lack.
    autograd::CrossEntropyKernelsScope kernels(cache_);
    return stage.forward(x, ctx);
  }
  if (stage.kind() != StageKind::Block) return stage.forward(x, ctx);
  const void* rope = ctx.rope != nullptr ? ctx.rope->cos.impl_ptr().get() : nullptr;
  Key key{&stage, x.shape(), x.dtype(), x.device().str(), GradMode::enabled(), rope};
  const std::vector<Tensor> external = external_tensors(stage, x, ctx);

  std::shared_ptr<const autograd::FusedProgram> program;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = programs_.find(key);
    if (it != programs_.end()) {
      if (!it->second) return stage.forward(x, ctx);
      program = it->second;
    }
  }
  if (program) return program->run(external);

  autograd::CallTrace trace;
  Tensor out;
  {
    autograd::TraceScope scope(trace);
    out = stage.forward(x, ctx);
  }
  const auto start = std::chrono::steady_clock::now();
  std::string failure;
  try {
    program =
        std::make_shared<autograd::FusedProgram>(trace, external, out, *cache_, chooser_.get());
  } catch (const std::exception& e) {
    failure = stage.name() + ": " + e.what();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mutex_);
  programs_[key] = program;
  stats_.build_seconds += seconds;
  stats_.calls += static_cast<int64_t>(trace.calls.size());
  if (program) {
    ++stats_.programs;
    stats_.chains += static_cast<int64_t>(program->plan().chains.size());
    stats_.fused_calls += program->fused_calls();
    stats_.chains_as_calls += program->chains_run_as_calls();
  } else {
    if (stats_.fallbacks++ == 0) stats_.first_fallback = failure;
  }
  return out;
}

CompiledBlockStats CompiledBlocks::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::string compile_summary(const CompiledBlockStats& s, const compile::KernelCacheStats& c,
                            const autograd::ChainChooser* chooser) {
  std::ostringstream out;
  out.precision(3);
  out << "compile: " << s.programs << " block programs, " << s.chains << " chains fused ("
      << s.fused_calls << " of " << s.calls << " traced calls), kernels " << c.compiled
      << " compiled / " << c.loaded_from_disk << " from disk / " << c.memory_hits << " reused, "
      << c.compile_seconds << " s compiling (" << s.build_seconds << " s building programs)";
  if (chooser != nullptr) {
    const autograd::ChainChoiceStats choice = chooser->stats();
    out << "; " << s.chains_as_calls << " chains run as calls, faster so on this GPU (of "
        << choice.compiled + choice.as_calls << " kinds of chain, " << choice.as_calls
        << " as calls; " << choice.measured << " timed now, " << choice.from_disk
        << " as timed before)";
    if (!choice.first_failure.empty()) {
      out << "; a chain could not be timed, so it runs as calls: " << choice.first_failure;
    }
  }
  if (s.fallbacks > 0) {
    out << "; " << s.fallbacks << " block traces run unfused, the first because "
        << s.first_fallback;
  }
  return out.str();
}

std::vector<compile::KernelGraph> block_kernel_graphs(const ModelConfig& config, DType dtype) {
  // One block is enough; a small vocabulary keeps the embedding and head
  // (which are not compiled) from costing memory.
  ModelConfig one = config;
  one.num_hidden_layers = 1;
  one.vocab_size = 64;
  Generator gen(1);
  const CausalLM model = CausalLM::random(one, gen, dtype);
  const Stage& block = *model.stages().at(1);
  LT_CHECK(block.kind() == StageKind::Block, "compile: stage 1 of a ", config.model_type(),
           " is not a decoder block");
  const int64_t seq = 8;
  Tensor x = Tensor::randn({1, seq, one.hidden_size}, gen, DType::F32).to(dtype);
  x.set_requires_grad(true);  // as a block's input is in training
  const StageContext ctx = model.context(seq);
  const std::vector<Tensor> external = external_tensors(block, x, ctx);
  autograd::CallTrace trace;
  Tensor out;
  {
    autograd::TraceScope scope(trace);
    out = block.forward(x, ctx);
  }
  std::vector<compile::KernelGraph> graphs = autograd::program_kernel_graphs(trace, external, out);
  // The head's cross-entropy in `dtype` (on the CPU only, so far: a GPU
  // machine prebuilds two kernels it does not run).
  graphs.push_back(compile::cross_entropy_forward_graph(dtype));
  graphs.push_back(compile::cross_entropy_backward_graph(dtype));
  return graphs;
}

}  // namespace lt::models
