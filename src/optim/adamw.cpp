#include "optim/adamw.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "compile/gpu_kernel.h"
#include "core/thread_pool.h"
#include "optim/adamw_kernel.h"
#include "optim/compiled_adamw.h"
#include "optim/cuda/adamw.h"
#include "optim/kernels_simd.h"
#include "optim/shadow.h"
#include "optim/state_values.h"

namespace lt::optim {

namespace {

// Elements per unit of parallel work. Big enough that the per-chunk
// overhead (one std::function call, a mutex in the pool) is noise next to
// ~64K element updates (~1.8 MB of memory traffic); small enough that a
// model's largest tensors split across every thread.
constexpr int64_t kChunkElements = int64_t{1} << 16;
// Chunks start at multiples of this many elements: whole vectors of every
// ISA's kernel, so each element takes the same path (vector or a
// parameter's last partial vector) whatever the chunking, and the values
// do not depend on it.
constexpr int64_t kChunkAlign = 1024;

// The chunk for an update of `total` elements on the CPU: kChunkElements,
// or less when that would leave threads without work. The streaming
// executor updates one parameter at a time (Note [Updates in pieces]): a
// 3B block's k_proj (0.5 M elements) made 8 chunks for 16 threads and ran
// at half the rate of the block's MLP weights (H200 machine traces).
int64_t cpu_chunk_elements(int64_t total) {
  const int64_t wanted = 4 * static_cast<int64_t>(thread_pool().num_threads());
  const int64_t per = (total + wanted - 1) / wanted;
  const int64_t aligned = (per + kChunkAlign - 1) / kChunkAlign * kChunkAlign;
  return std::clamp(aligned, kChunkAlign, kChunkElements);
}

std::string state_name(const std::string& param, const char* field) {
  return param + "." + field;
}

void check_param(const std::string& name, const Tensor& p) {
  LT_CHECK(!name.empty(), "AdamW: a parameter has an empty name (state names are built from it)");
  LT_CHECK(p.defined(), "AdamW: parameter '", name, "' is an undefined tensor");
  // A master without memory yet (its stage starts on disk): a host tensor
  // once it has it.
  if (!p.storage()) {
    LT_CHECK(p.dtype() == DType::F32 && p.is_contiguous(), "AdamW: parameter '", name,
             "' must be a contiguous f32 tensor, got ", dtype_name(p.dtype()));
    return;
  }
#ifdef LT_WITH_CUDA
  LT_CHECK(p.device().is_cpu() || p.device().is_cuda(), "AdamW: parameter '", name,
           "' must live on the CPU or a CUDA device, got ", p.str());
#else
  LT_CHECK(p.device().is_cpu(), "AdamW: parameter '", name,
           "' must live on the CPU (the fp32 master), got ", p.str());
#endif
  LT_CHECK(p.dtype() == DType::F32, "AdamW: parameter '", name, "' must be f32 (the master), got ",
           p.str());
  LT_CHECK(p.is_contiguous(), "AdamW: parameter '", name, "' must be contiguous, got ", p.str());
}

// Two parameters that share bytes would be updated twice per step.
void check_no_overlap(const nn::NamedParameters& params) {
  struct Range {
    const Storage* storage;
    int64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i].second;
    if (!p.storage()) continue;  // no memory, none shared
    ranges.push_back({p.storage().get(), p.offset(), p.offset() + p.numel(), i});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.storage != b.storage ? std::less<const Storage*>()(a.storage, b.storage)
                                  : a.begin < b.begin;
  });
  for (size_t k = 1; k < ranges.size(); ++k) {
    const Range& a = ranges[k - 1];
    const Range& b = ranges[k];
    LT_CHECK(a.storage != b.storage || a.end <= b.begin || a.begin == a.end || b.begin == b.end,
             "AdamW: parameters '", params[a.index].first, "' and '", params[b.index].first,
             "' share memory; list each parameter once");
  }
}

Tensor step_scalar(int64_t value) {
  Tensor t = Tensor::empty({}, DType::I64);
  *t.data<int64_t>() = value;
  return t;
}

// One parameter's update: its scalars and the memory it reads and writes,
// all on `device`.
struct ParamJob {
  AdamWScalars s;
  Device device;
  float* param;
  const void* grad;
  bool grad_is_bf16;
  float* exp_avg;
  float* exp_avg_sq;
  uint16_t* shadow;  // or null
  int64_t numel;
  size_t index;  // the parameter's position in the optimizer's list
};

// The CPU backend: the jobs cut into chunks (cpu_chunk_elements), which the
// thread pool updates in parallel (a chunk by one thread alone, so the
// result does not depend on the number of threads).
void update_on_cpu(Isa isa, const std::vector<ParamJob>& jobs) {
  struct Chunk {
    size_t job;
    int64_t begin, end;
  };
  int64_t total = 0;
  for (const ParamJob& job : jobs) total += job.numel;
  const int64_t size = cpu_chunk_elements(total);
  std::vector<Chunk> chunks;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (int64_t b = 0; b < jobs[j].numel; b += size)
      chunks.push_back({j, b, std::min(jobs[j].numel, b + size)});
  }
  parallel_for(0, static_cast<int64_t>(chunks.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const Chunk& chunk = chunks[static_cast<size_t>(c)];
      const ParamJob& job = jobs[chunk.job];
      const int64_t b = chunk.begin;
      const int64_t n = chunk.end - chunk.begin;
      uint16_t* shadow = job.shadow != nullptr ? job.shadow + b : nullptr;
      if (job.grad_is_bf16) {
        adamw_update(isa, job.s, job.param + b, static_cast<const BFloat16*>(job.grad) + b,
                     job.exp_avg + b, job.exp_avg_sq + b, shadow, n);
      } else {
        adamw_update(isa, job.s, job.param + b, static_cast<const float*>(job.grad) + b,
                     job.exp_avg + b, job.exp_avg_sq + b, shadow, n);
      }
    }
  });
}

// The CUDA backend: one multi-tensor launch per device (shadows are
// written in the same kernel) on that device's current stream. The
// caller's contiguous gradient copies are stream-ordered allocations, so
// freeing them after the launch is safe. A build without CUDA has no CUDA
// parameters (the constructor refuses them).
void update_on_cuda(const std::vector<ParamJob>& jobs) {
  if (jobs.empty()) return;
#ifdef LT_WITH_CUDA
  std::vector<std::pair<Device, std::vector<cuda::AdamWCudaJob>>> by_device;
  for (const ParamJob& job : jobs) {
    auto group = std::find_if(by_device.begin(), by_device.end(),
                              [&](const auto& entry) { return entry.first == job.device; });
    if (group == by_device.end()) {
      by_device.emplace_back(job.device, std::vector<cuda::AdamWCudaJob>{});
      group = std::prev(by_device.end());
    }
    group->second.push_back({job.s, job.param, job.grad, job.grad_is_bf16, job.exp_avg,
                             job.exp_avg_sq, job.shadow, job.numel});
  }
  for (const auto& [device, device_jobs] : by_device) cuda::adamw_update_multi(device, device_jobs);
#else
  fail("AdamW: parameter ", jobs.front().index, " is on ", jobs.front().device.str(),
       ", but this build has no CUDA backend");
#endif
}

// train.compile's backend: compiled_adamw_run (the same operations in
// the same order as the kernels above) over pieces of each parameter. On
// the CPU the pieces are update_on_cpu's chunks, in parallel (a chunk by
// one thread alone); on CUDA 16 M elements, one after another. Each job's
// kernel is resolved once per optimizer (CompiledUpdateKernels) and the
// step's scalars moved to each device in one copy, so a piece's call is
// its arguments and the kernel's run or launch.
struct CompiledJob {
  const ParamJob* job;
  const CompiledUpdateKernel* kernel = nullptr;  // compiled_kernels_ready's
};

// Whether the kernels `jobs` need can be had (compiled, or loaded from the
// cache folder), before any parameter changes; if so each job has its
// kernel, if not `why` says why.
bool compiled_kernels_ready(CompiledUpdateKernels& kernels, std::vector<CompiledJob>& jobs,
                            std::string& why) {
  try {
    for (CompiledJob& c : jobs) {
      c.kernel = &kernels.get(c.job->grad_is_bf16 ? DType::BF16 : DType::F32,
                              c.job->shadow != nullptr, c.job->device);
    }
    return true;
  } catch (const std::exception& e) {
    why = std::string("AdamW's compiled update: ") + e.what();
    return false;
  }
}

void update_compiled(const std::vector<CompiledJob>& jobs) {
  struct Piece {
    size_t job;
    int64_t begin, end;
  };
  // The step's scalars, copied once to each device that has jobs (not nine
  // tensors per piece: on CUDA each was a copy from the host that waited
  // for the GPU); job j's nine at scalars[j], one float apart.
  std::vector<AdamWScalars> values;
  std::vector<Device> devices;
  for (const CompiledJob& c : jobs) {
    values.push_back(c.job->s);
    devices.push_back(c.job->device);
  }
  const std::vector<Tensor> scalars =
      adamw_scalar_tables(values, std::vector<int64_t>(jobs.size(), 1), devices);
  int64_t cpu_total = 0;
  for (const CompiledJob& c : jobs) cpu_total += c.job->device.is_cuda() ? 0 : c.job->numel;
  const int64_t cpu_size = cpu_chunk_elements(cpu_total);
  std::vector<Piece> cpu_pieces, cuda_pieces;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const bool cuda = jobs[j].job->device.is_cuda();
    const int64_t size = cuda ? int64_t{1} << 24 : cpu_size;
    const int64_t n = jobs[j].job->numel;
    for (int64_t b = 0; b < n; b += size)
      (cuda ? cuda_pieces : cpu_pieces).push_back({j, b, std::min(n, b + size)});
  }
  auto run = [&](const Piece& piece) {
    const ParamJob& job = *jobs[piece.job].job;
    const int64_t at = piece.begin;
    const auto* grad = static_cast<const char*>(job.grad) + at * (job.grad_is_bf16 ? 2 : 4);
    compiled_adamw_run(
        *jobs[piece.job].kernel, static_cast<const float*>(scalars[piece.job].data_ptr()), 1,
        piece.end - at, job.param + at, grad, job.grad_is_bf16 ? DType::BF16 : DType::F32,
        job.exp_avg + at, job.exp_avg_sq + at, job.shadow != nullptr ? job.shadow + at : nullptr);
  };
  parallel_for(0, static_cast<int64_t>(cpu_pieces.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) run(cpu_pieces[static_cast<size_t>(c)]);
  });
  for (const Piece& piece : cuda_pieces) run(piece);
}

}  // namespace

void validate(const AdamWOptions& o) {
  LT_CHECK(std::isfinite(o.lr) && o.lr >= 0, "optim.lr must be a finite number >= 0, got ", o.lr);
  LT_CHECK(o.beta1 >= 0 && o.beta1 < 1, "optim.betas[0] must be in [0, 1), got ", o.beta1);
  LT_CHECK(o.beta2 >= 0 && o.beta2 < 1, "optim.betas[1] must be in [0, 1), got ", o.beta2);
  LT_CHECK(std::isfinite(o.eps) && o.eps >= 0, "optim.eps must be a finite number >= 0, got ",
           o.eps);
  LT_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
           "optim.weight_decay must be a finite number >= 0, got ", o.weight_decay);
}

Tensor tensor_without_memory(const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty({0}, dtype);
  TensorImpl& impl = *t.impl();
  impl.storage = nullptr;
  impl.shape = shape;
  impl.strides = contiguous_strides(shape);
  return t;
}

AdamW::AdamW(const nn::NamedParameters& params, AdamWOptions options,
             std::vector<std::string> no_decay_substrings,
             const std::vector<bool>& states_without_memory)
    : params_(params), options_(options), no_decay_substrings_(std::move(no_decay_substrings)) {
  validate(options_);
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    check_param(name, p);
    auto [it, inserted] = seen.emplace(name, i);
    LT_CHECK(inserted, "AdamW: parameter name '", name, "' appears twice (positions ", it->second,
             " and ", i, ")");
  }
  check_no_overlap(params_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    const bool excluded =
        std::any_of(no_decay_substrings_.begin(), no_decay_substrings_.end(),
                    [&](const std::string& s) { return name.find(s) != std::string::npos; });
    decay_.push_back(excluded ? 0.0 : options_.weight_decay);
    // The moments live with their parameter: the update reads all three in
    // one pass on that device.
    const bool without_memory = i < states_without_memory.size() && states_without_memory[i];
    LT_CHECK(without_memory || p.storage(), "AdamW: parameter '", name,
             "' has no memory, so its states must be made without memory too");
    if (without_memory) {
      exp_avg_.push_back(tensor_without_memory(p.shape(), DType::F32));
      exp_avg_sq_.push_back(tensor_without_memory(p.shape(), DType::F32));
      continue;
    }
    exp_avg_.push_back(Tensor::zeros(p.shape(), DType::F32, p.device()));
    exp_avg_sq_.push_back(Tensor::zeros(p.shape(), DType::F32, p.device()));
  }
  param_steps_.assign(params_.size(), 0);
  shadows_.resize(params_.size());
}

void AdamW::reset_state(size_t index) {
  LT_CHECK(index < params_.size(), "AdamW::reset_state: index ", index, " is outside the ",
           params_.size(), " parameters");
  exp_avg_[index].zero_();
  exp_avg_sq_[index].zero_();
}

void AdamW::set_bf16_shadow(size_t index, Tensor shadow) {
  LT_CHECK(index < params_.size(), "AdamW::set_bf16_shadow: index ", index, " is outside the ",
           params_.size(), " parameters");
  const auto& [name, p] = params_[index];
  if (shadow.defined()) {
    check_bf16_shadow("AdamW", name, p, shadow);
    // A master without memory has no values yet: whoever gives it some
    // fills the shadow (Note [Stage states on disk], "the start").
    if (p.storage()) fill_bf16_shadow(p, shadow);
  }
  shadows_[index] = std::move(shadow);
}

void AdamW::set_isa(Isa isa) {
  LT_CHECK(isa_supported(isa), "AdamW::set_isa: this CPU does not support ", isa_name(isa));
  isa_ = isa;
}

void AdamW::update(double lr, double grad_scale, size_t first, size_t last) {
  LT_CHECK(std::isfinite(lr) && lr >= 0, "AdamW::update: lr must be a finite number >= 0, got ",
           lr);
  LT_CHECK(std::isfinite(grad_scale), "AdamW::update: grad_scale must be finite, got ", grad_scale,
           " (skip the update when the gradient norm is not finite)");
  LT_CHECK(first <= last && last <= params_.size(), "AdamW::update: range [", first, ", ", last,
           ") is outside the ", params_.size(), " parameters");

  // One job per parameter with a gradient; all checks happen before any
  // parameter changes, so a bad gradient leaves the optimizer untouched.
  std::vector<ParamJob> cpu_jobs, cuda_jobs;
  std::vector<Tensor> grads;  // keeps contiguous copies alive until the update is queued
  for (size_t i = first; i < last; ++i) {
    const auto& [name, p] = params_[i];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    LT_CHECK(g.device() == p.device(), "AdamW::update: gradient of '", name, "' must be on ",
             p.device().str(), " with its parameter, got ", g.str());
    LT_CHECK(g.dtype() == DType::F32 || g.dtype() == DType::BF16, "AdamW::update: gradient of '",
             name, "' must be f32 or bf16, got ", g.str());
    LT_CHECK(g.shape() == p.shape(), "AdamW::update: gradient of '", name, "' has shape ",
             shape_str(g.shape()), ", the parameter ", shape_str(p.shape()));
    grads.push_back(g.contiguous());
    (p.device().is_cuda() ? cuda_jobs : cpu_jobs)
        .push_back(
            {{},
             p.device(),
             static_cast<float*>(p.data_ptr()),
             grads.back().data_ptr(),
             grads.back().dtype() == DType::BF16,
             static_cast<float*>(exp_avg_[i].data_ptr()),
             static_cast<float*>(exp_avg_sq_[i].data_ptr()),
             shadows_[i].defined() ? static_cast<uint16_t*>(shadows_[i].data_ptr()) : nullptr,
             p.numel(),
             i});
  }
  // Every check has passed: count the update and fix its scalars.
  for (auto* jobs : {&cpu_jobs, &cuda_jobs}) {
    for (ParamJob& job : *jobs) {
      job.s = adamw_scalars(lr, options_.beta1, options_.beta2, options_.eps, decay_[job.index],
                            grad_scale, ++param_steps_[job.index]);
    }
  }
  if (compiled_) {
    std::vector<CompiledJob> jobs;
    for (const auto* list : {&cpu_jobs, &cuda_jobs})
      for (const ParamJob& job : *list) jobs.push_back({&job});
    if (compiled_kernels_ready(*compiled_, jobs, compiled_fallback_)) {
      update_compiled(jobs);
      compiled_updates_ += static_cast<int64_t>(jobs.size());
      return;
    }
    compiled_.reset();
  }
  // The one dispatch point: each backend updates the parameters on its device.
  update_on_cpu(isa_, cpu_jobs);
  update_on_cuda(cuda_jobs);
}

bool AdamW::use_compiled_updates(std::shared_ptr<compile::KernelCache> cache) {
  compiled_ = std::make_shared<CompiledUpdateKernels>(std::move(cache), adamw_kernel_graph);
  return true;
}

NamedTensors AdamW::state() const {
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    out.emplace_back(state_name(name, "exp_avg"), exp_avg_[i]);
    out.emplace_back(state_name(name, "exp_avg_sq"), exp_avg_sq_[i]);
    out.emplace_back(state_name(name, "step"), step_scalar(param_steps_[i]));
  }
  out.emplace_back("step", step_scalar(step_count_));
  return out;
}

void AdamW::load_state(const NamedTensors& state) {
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : state) {
    LT_CHECK(by_name.emplace(name, &t).second, "'", name, "' appears twice");
  }
  auto find = [&](const std::string& name) -> const Tensor& {
    auto it = by_name.find(name);
    LT_CHECK(it != by_name.end(), "'", name,
             "' is missing (a checkpoint of another model or optimizer?)");
    LT_CHECK(it->second->defined(), "'", name, "' is an undefined tensor");
    return *it->second;
  };
  auto read_step = [&](const std::string& name) {
    const Tensor& t = find(name);
    LT_CHECK(t.dtype() == DType::I64 && t.numel() == 1, "'", name, "' must be one i64 value, got ",
             t.str());
    // A step count saved from device state may itself sit on a device.
    const int64_t value = t.to(Device::cpu()).contiguous().data<int64_t>()[0];
    LT_CHECK(value >= 0, "'", name, "' = ", value, " is negative");
    return value;
  };

  // Validate everything first, then copy: a refused state changes nothing.
  const int64_t step_count = read_step("step");
  std::vector<int64_t> param_steps;
  std::vector<std::pair<const Tensor*, const Tensor*>> moments;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    const Tensor* m = &find(state_name(name, "exp_avg"));
    const Tensor* v = &find(state_name(name, "exp_avg_sq"));
    for (const auto& [field, t] : {std::pair{"exp_avg", m}, std::pair{"exp_avg_sq", v}}) {
      LT_CHECK(t->dtype() == DType::F32 && t->shape() == params_[i].second.shape(), "'",
               state_name(name, field), "' must be f32 of shape ",
               shape_str(params_[i].second.shape()), ", got ", t->str());
      check_state_values(*t, state_name(name, field), /*non_negative=*/t == v);
    }
    const int64_t t = read_step(state_name(name, "step"));
    LT_CHECK(t <= step_count, "'", state_name(name, "step"), "' = ", t,
             " exceeds the optimizer's step = ", step_count);
    param_steps.push_back(t);
    moments.emplace_back(m, v);
  }
  // Every expected name was found and names are unique, so any surplus
  // entry is a stranger; name one.
  if (state.size() != 3 * params_.size() + 1) {
    std::unordered_set<std::string> expected = {"step"};
    for (const auto& [name, p] : params_) {
      (void)p;
      for (const char* field : {"exp_avg", "exp_avg_sq", "step"})
        expected.insert(state_name(name, field));
    }
    for (const auto& entry : state) {
      LT_CHECK(expected.count(entry.first) != 0, "'", entry.first,
               "' belongs to no parameter of this optimizer");
    }
  }

  for (size_t i = 0; i < params_.size(); ++i) {
    exp_avg_[i].copy_(*moments[i].first);
    exp_avg_sq_[i].copy_(*moments[i].second);
  }
  param_steps_ = std::move(param_steps);
  step_count_ = step_count;
}

}  // namespace lt::optim
