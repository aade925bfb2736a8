#include "optim/adamw8bit.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "compile/gpu_kernel.h"
#include "core/thread_pool.h"
#include "optim/adamw8bit_kernel.h"
#include "optim/compiled_adamw.h"
#include "optim/compiled_adamw8bit.h"
#include "optim/cuda/adamw8bit.h"
#include "optim/kernels_simd.h"
#include "optim/shadow.h"
#include "optim/state_values.h"

namespace lt::optim {

namespace {

std::string state_name(const std::string& param, const char* field) {
  return param + "." + field;
}

Tensor step_scalar(int64_t value) {
  Tensor t = Tensor::empty({}, DType::I64);
  *t.data<int64_t>() = value;
  return t;
}

int64_t blocks_of(int64_t numel, int64_t block) {
  return (numel + block - 1) / block;
}

}  // namespace

void validate(const AdamW8bitOptions& o) {
  LT_CHECK(o.block_size > 0 && o.block_size <= kMaxBlockSize,
           "config key 'optim.block_size': must be in [1, ", kMaxBlockSize, "], got ",
           o.block_size);
  LT_CHECK(o.min_8bit_numel >= 0, "config key 'optim.min_8bit_numel': must be >= 0, got ",
           o.min_8bit_numel);
}

AdamW8bit::AdamW8bit(const nn::NamedParameters& params, AdamWOptions options,
                     std::vector<std::string> no_decay_substrings, AdamW8bitOptions opts8,
                     const std::vector<bool>& states_without_memory)
    : params_(params), options_(options), opts8_(opts8) {
  validate(options_);
  validate(opts8_);
  std::unordered_set<std::string> seen;
  std::vector<bool> small_without_memory;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& [name, p] = params_[i];
    LT_CHECK(!name.empty(), "AdamW8bit: a parameter has an empty name");
    LT_CHECK(seen.insert(name).second, "AdamW8bit: parameter name '", name, "' appears twice");
    // A master without memory yet (its stage starts on disk) is a host
    // tensor once it has it.
#ifdef LT_WITH_CUDA
    const bool device_ok =
        p.defined() && (!p.storage() || p.device().is_cpu() || p.device().is_cuda());
#else
    const bool device_ok = p.defined() && (!p.storage() || p.device().is_cpu());
#endif
    LT_CHECK(device_ok && p.dtype() == DType::F32 && p.is_contiguous(), "AdamW8bit: parameter '",
             name, "' must be a contiguous f32 tensor on the CPU",
#ifdef LT_WITH_CUDA
             " or a CUDA device",
#endif
             ", got ",
             !p.defined()  ? std::string("undefined")
             : p.storage() ? p.str()
                           : "no memory");
    const bool excluded =
        std::any_of(no_decay_substrings.begin(), no_decay_substrings.end(),
                    [&](const std::string& s) { return name.find(s) != std::string::npos; });
    decay_.push_back(excluded ? 0.0 : options_.weight_decay);
    const bool without_memory = i < states_without_memory.size() && states_without_memory[i];
    LT_CHECK(without_memory || p.storage(), "AdamW8bit: parameter '", name,
             "' has no memory, so its states must be made without memory too");
    if (p.numel() < opts8_.min_8bit_numel || p.numel() == 0) {
      slot_.push_back(-1);
      small_.emplace_back(name, p);
      small_without_memory.push_back(without_memory);
      continue;
    }
    slot_.push_back(static_cast<int>(q_.size()));
    const int64_t nb = blocks_of(p.numel(), opts8_.block_size);
    // Zero moments: every code at the rank of 0, every scale 0.
    // The states live with their parameter: the update reads all of them in
    // one pass on that device.
    if (p.storage() && p.device().is_cuda()) {
      LT_CHECK(opts8_.block_size <= kMaxCudaBlockSize,
               "optim.block_size must be <= ", kMaxCudaBlockSize, " for parameters on CUDA ('",
               name, "'), got ", opts8_.block_size);
    }
    if (without_memory) {
      q_.push_back(Quantized{i,
                             tensor_without_memory({p.numel()}, DType::U8),
                             tensor_without_memory({p.numel()}, DType::U8),
                             tensor_without_memory({nb}, DType::F32),
                             tensor_without_memory({nb}, DType::F32),
                             0,
                             {}});
      continue;
    }
    Quantized q{
        i,
        Tensor::full({p.numel()}, quantize_nearest(signed_code(), 0.0f), DType::U8, p.device()),
        Tensor::full({p.numel()}, quantize_nearest(unsigned_code(), 0.0f), DType::U8, p.device()),
        Tensor::zeros({nb}, DType::F32, p.device()),
        Tensor::zeros({nb}, DType::F32, p.device()),
        0,
        {}};
    q_.push_back(std::move(q));
  }
  // The fp32 AdamW checks overlap/aliasing of the small ones; its own
  // decay list is the same, so each small parameter decays as here.
  fp32_ = std::make_unique<AdamW>(small_, options_, std::move(no_decay_substrings),
                                  small_without_memory);
}

void AdamW8bit::reset_state(size_t index) {
  LT_CHECK(index < params_.size(), "AdamW8bit::reset_state: index ", index, " is outside the ",
           params_.size(), " parameters");
  if (slot_[index] < 0) {
    const auto small_index = std::count(slot_.begin(), slot_.begin() + index, -1);
    fp32_->reset_state(static_cast<size_t>(small_index));
    return;
  }
  Quantized& q = q_[static_cast<size_t>(slot_[index])];
  q.m_codes.fill_(quantize_nearest(signed_code(), 0.0f));
  q.sqrt_v_codes.fill_(quantize_nearest(unsigned_code(), 0.0f));
  q.m_scales.zero_();
  q.sqrt_v_scales.zero_();
}

AdamW8bit::Split AdamW8bit::split() const {
  Split s;
  for (size_t i = 0; i < params_.size(); ++i)
    (slot_[i] >= 0 ? s.quantized : s.fp32) += params_[i].second.numel();
  return s;
}

void AdamW8bit::set_bf16_shadow(size_t index, Tensor shadow) {
  LT_CHECK(index < params_.size(), "AdamW8bit::set_bf16_shadow: index ", index, " is outside the ",
           params_.size(), " parameters");
  if (slot_[index] < 0) {
    // The fp32 path's list is the small parameters in constructor order.
    size_t small_index = 0;
    for (size_t i = 0; i < index; ++i) small_index += slot_[i] < 0 ? 1 : 0;
    fp32_->set_bf16_shadow(small_index, std::move(shadow));
    return;
  }
  const auto& [name, p] = params_[index];
  if (shadow.defined()) {
    check_bf16_shadow("AdamW8bit", name, p, shadow);
    if (p.storage()) fill_bf16_shadow(p, shadow);  // else filled with its values (AdamW's)
  }
  q_[static_cast<size_t>(slot_[index])].shadow = std::move(shadow);
}

void AdamW8bit::set_isa(Isa isa) {
  LT_CHECK(isa_supported(isa), "AdamW8bit::set_isa: this CPU does not support ", isa_name(isa));
  isa_ = isa;
  fp32_->set_isa(isa);
}

void AdamW8bit::finish_step() {
  fp32_->finish_step();
  ++step_count_;
}

// One 8-bit parameter's update: its state, its gradient (a contiguous
// copy, kept alive until the update is queued) and its scalars.
struct AdamW8bit::Job {
  Quantized* q;
  Tensor param, grad;
  AdamWScalars s;
  const CompiledUpdateKernel* kernel = nullptr;  // compiled_kernels_ready's
};

void AdamW8bit::update(double lr, double grad_scale, size_t first, size_t last) {
  LT_CHECK(std::isfinite(lr) && lr >= 0, "AdamW8bit::update: lr must be a finite number >= 0, got ",
           lr);
  LT_CHECK(std::isfinite(grad_scale), "AdamW8bit::update: grad_scale must be finite, got ",
           grad_scale);
  LT_CHECK(first <= last && last <= params_.size(), "AdamW8bit::update: range [", first, ", ", last,
           ") is outside the ", params_.size(), " parameters");
  std::vector<Job> cpu_jobs, cuda_jobs;
  // Check every gradient before anything changes.
  for (Quantized& q : q_) {
    if (q.param < first || q.param >= last) continue;
    const auto& [name, p] = params_[q.param];
    Tensor g = p.grad();
    if (!g.defined()) continue;
    LT_CHECK(g.device() == p.device() && (g.dtype() == DType::F32 || g.dtype() == DType::BF16) &&
                 g.shape() == p.shape(),
             "AdamW8bit::update: gradient of '", name, "' must be an f32 or bf16 tensor on ",
             p.device().str(), " of shape ", shape_str(p.shape()), ", got ", g.str());
    (p.device().is_cuda() ? cuda_jobs : cpu_jobs).push_back({&q, p, g.contiguous(), {}});
  }
  // The small parameters of [first, last) are a contiguous run of small_
  // (both keep the constructor's order).
  size_t small_first = 0, small_last = 0;
  for (size_t i = 0; i < last; ++i) {
    if (slot_[i] >= 0) continue;
    if (i < first) ++small_first;
    ++small_last;
  }
  for (size_t k = small_first; k < small_last; ++k) {
    const auto& [name, p] = small_[k];
    Tensor g = p.grad();
    LT_CHECK(!g.defined() || g.shape() == p.shape(), "AdamW8bit::update: gradient of '", name,
             "' has shape ", g.defined() ? shape_str(g.shape()) : "", ", the parameter ",
             shape_str(p.shape()));
  }
  fp32_->update(lr, grad_scale, small_first, small_last);

  for (auto* jobs : {&cpu_jobs, &cuda_jobs}) {
    for (Job& job : *jobs) {
      job.s = adamw_scalars(lr, options_.beta1, options_.beta2, options_.eps, decay_[job.q->param],
                            grad_scale, ++job.q->steps);
    }
  }
  if (compiled_ && compiled_kernels_ready({&cpu_jobs, &cuda_jobs})) {
    update_compiled(cpu_jobs, cuda_jobs);
    return;
  }
  // The one dispatch point: each backend updates the parameters on its device.
  update_on_cpu(cpu_jobs);
  update_on_cuda(cuda_jobs);
}

bool AdamW8bit::use_compiled_updates(std::shared_ptr<compile::KernelCache> cache) {
  fp32_->use_compiled_updates(cache);
  compiled_ = std::make_shared<CompiledUpdateKernels>(std::move(cache), adamw8bit_kernel_graph);
  return true;
}

int64_t AdamW8bit::compiled_updates() const {
  return compiled_updates_ + fp32_->compiled_updates();
}

std::string AdamW8bit::compiled_fallback() const {
  return !compiled_fallback_.empty() ? compiled_fallback_ : fp32_->compiled_fallback();
}

bool AdamW8bit::compiled_kernels_ready(const std::vector<std::vector<Job>*>& jobs) {
  try {
    for (auto* list : jobs) {
      for (Job& job : *list) {
        job.kernel = &compiled_->get(job.grad.dtype(), job.q->shadow.defined(), job.param.device());
      }
    }
    return true;
  } catch (const std::exception& e) {
    compiled_fallback_ = std::string("8-bit AdamW's compiled update: ") + e.what();
    compiled_.reset();
    return false;
  }
}

// train.compile: compiled_adamw8bit_update over pieces of whole blocks of
// each 8-bit parameter, so that the kernel's new output buffers (8 bytes
// an element, copied back) stay small whatever the parameter: on the CPU
// about 64K elements a piece, in parallel (a piece by one thread alone); on
// CUDA about 16 M, one after another. The same values as the backends
// below except a code on a near-tie (optim/compiled_adamw8bit.h). Each
// job's kernel is resolved once per optimizer (CompiledUpdateKernels) and
// its scalars, one row per block of its largest piece, made once, all
// jobs' moved to each device in one copy: a piece's call builds no graph
// and copies no scalars.
void AdamW8bit::update_compiled(const std::vector<Job>& cpu_jobs,
                                const std::vector<Job>& cuda_jobs) {
  struct Piece {
    const Job* job;
    size_t scalars;  // index into `scalars`
    int64_t first_block, last_block;
  };
  const int64_t bs = opts8_.block_size;
  std::vector<Piece> cpu_pieces, cuda_pieces;
  std::vector<AdamWScalars> job_scalars;
  std::vector<int64_t> table_rows;  // per job: the rows of its largest piece
  std::vector<Device> devices;
  for (const auto* jobs : {&cpu_jobs, &cuda_jobs}) {
    const bool cuda = jobs == &cuda_jobs;
    const int64_t per_piece =
        std::max<int64_t>(1, (cuda ? int64_t{1} << 24 : int64_t{1} << 16) / bs);
    for (const Job& job : *jobs) {
      const int64_t blocks = blocks_of(job.param.numel(), bs);
      job_scalars.push_back(job.s);
      table_rows.push_back(std::max<int64_t>(1, std::min(blocks, per_piece)));
      devices.push_back(job.param.device());
      for (int64_t b = 0; b < blocks; b += per_piece) {
        (cuda ? cuda_pieces : cpu_pieces)
            .push_back({&job, job_scalars.size() - 1, b, std::min(blocks, b + per_piece)});
      }
    }
  }
  // One copy per device (36 bytes a block of the largest pieces: at the
  // default 2048 elements a block, under 2% of the 8-bit states).
  const std::vector<Tensor> scalars = adamw_scalar_tables(job_scalars, table_rows, devices);
  auto run = [&](const Piece& piece) {
    const Job& job = *piece.job;
    const Quantized& q = *job.q;
    const int64_t n = job.param.numel();
    const int64_t begin = piece.first_block * bs, end = std::min(n, piece.last_block * bs);
    auto part = [&](const Tensor& t) {
      return t.defined() ? t.detach().reshape({n}).slice(0, begin, end) : Tensor();
    };
    auto scales = [&](const Tensor& t) { return t.slice(0, piece.first_block, piece.last_block); };
    compiled_adamw8bit_update(*job.kernel, scalars[piece.scalars], bs, part(job.param),
                              part(job.grad), part(q.m_codes), scales(q.m_scales),
                              part(q.sqrt_v_codes), scales(q.sqrt_v_scales), part(q.shadow));
  };
  parallel_for(0, static_cast<int64_t>(cpu_pieces.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) run(cpu_pieces[static_cast<size_t>(c)]);
  });
  for (const Piece& piece : cuda_pieces) run(piece);
  compiled_updates_ += static_cast<int64_t>(cpu_jobs.size() + cuda_jobs.size());
}

// The CPU backend: every block of every job in parallel, a block by one
// thread alone (results do not depend on the number of threads).
void AdamW8bit::update_on_cpu(const std::vector<Job>& jobs) const {
  struct Block {
    size_t job;
    int64_t index;
  };
  std::vector<Block> blocks;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (int64_t b = 0; b < blocks_of(jobs[j].param.numel(), opts8_.block_size); ++b)
      blocks.push_back({j, b});
  }
  const int64_t bs = opts8_.block_size;
  parallel_for(0, static_cast<int64_t>(blocks.size()), 1, [&](int64_t first, int64_t last) {
    // Per-thread scratch for the dequantized m and sqrt(v) of one block.
    std::vector<float> m(static_cast<size_t>(bs)), sqrt_v(static_cast<size_t>(bs));
    for (int64_t c = first; c < last; ++c) {
      const Job& job = jobs[blocks[static_cast<size_t>(c)].job];
      const Quantized& q = *job.q;
      const int64_t b = blocks[static_cast<size_t>(c)].index;
      const int64_t begin = b * bs;
      const int64_t n = std::min(bs, job.param.numel() - begin);
      float* param = static_cast<float*>(job.param.data_ptr()) + begin;
      uint8_t* mc = q.m_codes.data<uint8_t>() + begin;
      uint8_t* vc = q.sqrt_v_codes.data<uint8_t>() + begin;
      float& ms = q.m_scales.data<float>()[b];
      float& vs = q.sqrt_v_scales.data<float>()[b];
      uint16_t* shadow =
          q.shadow.defined() ? static_cast<uint16_t*>(q.shadow.data_ptr()) + begin : nullptr;
      if (job.grad.dtype() == DType::BF16) {
        adamw8bit_update_block(isa_, job.s, param, job.grad.data<BFloat16>() + begin, mc, ms, vc,
                               vs, m.data(), sqrt_v.data(), shadow, n);
      } else {
        adamw8bit_update_block(isa_, job.s, param, job.grad.data<float>() + begin, mc, ms, vc, vs,
                               m.data(), sqrt_v.data(), shadow, n);
      }
    }
  });
}

// The CUDA backend: one kernel per parameter on its device's current
// stream (the contiguous gradient copies are stream-ordered allocations). A
// build without CUDA has no CUDA parameters (the constructor refuses them).
void AdamW8bit::update_on_cuda(const std::vector<Job>& jobs) const {
  if (jobs.empty()) return;
#ifdef LT_WITH_CUDA
  for (const Job& job : jobs) {
    const Quantized& q = *job.q;
    cuda::adamw8bit_update(job.s, job.param, job.grad, q.m_codes, q.m_scales, q.sqrt_v_codes,
                           q.sqrt_v_scales, opts8_.block_size, q.shadow);
  }
#else
  fail("AdamW8bit: parameter '", params_[jobs.front().q->param].first, "' is on ",
       jobs.front().param.device().str(), ", but this build has no CUDA backend");
#endif
}

NamedTensors AdamW8bit::state() const {
  NamedTensors small = fp32_->state();
  std::unordered_map<std::string, Tensor> by_name(small.begin(), small.end());
  NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    if (slot_[i] < 0) {
      for (const char* f : {"exp_avg", "exp_avg_sq", "step"})
        out.emplace_back(state_name(name, f), by_name.at(state_name(name, f)));
      continue;
    }
    const Quantized& q = q_[static_cast<size_t>(slot_[i])];
    out.emplace_back(state_name(name, "exp_avg.codes"), q.m_codes);
    out.emplace_back(state_name(name, "exp_avg.scales"), q.m_scales);
    out.emplace_back(state_name(name, "sqrt_exp_avg_sq.codes"), q.sqrt_v_codes);
    out.emplace_back(state_name(name, "sqrt_exp_avg_sq.scales"), q.sqrt_v_scales);
    out.emplace_back(state_name(name, "step"), step_scalar(q.steps));
  }
  out.emplace_back("step", step_scalar(step_count_));
  return out;
}

void AdamW8bit::load_state(const NamedTensors& state) {
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : state) {
    LT_CHECK(by_name.emplace(name, &t).second, "'", name, "' appears twice");
  }
  std::unordered_set<std::string> used;
  auto find = [&](const std::string& name) -> const Tensor& {
    auto it = by_name.find(name);
    LT_CHECK(it != by_name.end() && it->second->defined(), "'", name,
             "' is missing (a checkpoint of another model or optimizer?)");
    used.insert(name);
    return *it->second;
  };
  auto expect = [&](const std::string& name, DType dtype, const Shape& shape) -> const Tensor& {
    const Tensor& t = find(name);
    LT_CHECK(t.dtype() == dtype && t.shape() == shape, "'", name, "' must be ", dtype_name(dtype),
             " of shape ", shape_str(shape), ", got ", t.str());
    return t;
  };
  auto read_step = [&](const std::string& name) {
    const Tensor& t = find(name);
    LT_CHECK(t.dtype() == DType::I64 && t.numel() == 1, "'", name, "' must be one i64 value, got ",
             t.str());
    const int64_t value = t.to(Device::cpu()).contiguous().data<int64_t>()[0];
    LT_CHECK(value >= 0, "'", name, "' = ", value, " is negative");
    return value;
  };

  // Validate everything first, then copy: a refused state changes nothing.
  // The layout before sqrt(v) (adamw8bit_kernel.h, "Note [the second moment
  // is stored as sqrt(v)]") kept v's codes under this name; its bytes mean
  // something else now, so it gets its own message rather than "missing".
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string old_v = state_name(params_[i].first, "exp_avg_sq.codes");
    LT_CHECK(slot_[i] < 0 || by_name.count(old_v) == 0, "'", old_v,
             "' is an 8-bit second moment in the earlier layout (codes of v, whose small values "
             "rounded to 0); this version keeps the codes of sqrt(v) ('",
             state_name(params_[i].first, "sqrt_exp_avg_sq.codes"),
             "') and cannot read it. Start the optimizer states afresh: train from that "
             "checkpoint's folder as model.path, or resume with another optim.name");
  }
  const int64_t step_count = read_step("step");
  NamedTensors small{};
  std::vector<std::array<const Tensor*, 4>> quantized;
  std::vector<int64_t> steps;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string& name = params_[i].first;
    if (slot_[i] < 0) {
      for (const char* f : {"exp_avg", "exp_avg_sq", "step"})
        small.emplace_back(state_name(name, f), find(state_name(name, f)));
      continue;
    }
    const int64_t numel = params_[i].second.numel();
    const int64_t nb = blocks_of(numel, opts8_.block_size);
    quantized.push_back({&expect(state_name(name, "exp_avg.codes"), DType::U8, {numel}),
                         &expect(state_name(name, "exp_avg.scales"), DType::F32, {nb}),
                         &expect(state_name(name, "sqrt_exp_avg_sq.codes"), DType::U8, {numel}),
                         &expect(state_name(name, "sqrt_exp_avg_sq.scales"), DType::F32, {nb})});
    // The blocks' scales (absolute maxima) are finite and never negative.
    for (const char* scales : {"exp_avg.scales", "sqrt_exp_avg_sq.scales"})
      check_state_values(find(state_name(name, scales)), state_name(name, scales), true);
    const int64_t t = read_step(state_name(name, "step"));
    LT_CHECK(t <= step_count, "'", state_name(name, "step"), "' = ", t,
             " exceeds the optimizer's step = ", step_count);
    steps.push_back(t);
  }
  for (const auto& entry : state) {
    LT_CHECK(used.count(entry.first) != 0, "'", entry.first,
             "' belongs to no parameter of this optimizer");
  }
  small.emplace_back("step", step_scalar(step_count));
  fp32_->load_state(small);  // validates the f32 entries before copying
  for (size_t k = 0; k < q_.size(); ++k) {
    q_[k].m_codes.copy_(*quantized[k][0]);
    q_[k].m_scales.copy_(*quantized[k][1]);
    q_[k].sqrt_v_codes.copy_(*quantized[k][2]);
    q_[k].sqrt_v_scales.copy_(*quantized[k][3]);
    q_[k].steps = steps[k];
  }
  step_count_ = step_count;
}

}  // namespace lt::optim
