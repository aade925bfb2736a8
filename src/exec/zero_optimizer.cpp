#include "exec/zero_optimizer.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "core/error.h"

namespace lt::exec {

namespace {

std::vector<int64_t> numels_of(const nn::NamedParameters& params) {
  std::vector<int64_t> n;
  for (const auto& [name, p] : params) n.push_back(p.numel());
  return n;
}

float* flat_data(const Tensor& t) {
  return t.data<float>();
}

}  // namespace

ZeroOptimizer::ZeroOptimizer(const nn::NamedParameters& masters, const optim::AdamWOptions& options,
                             std::vector<std::string> no_decay, CrossRankSum& ranks)
    : masters_(masters),
      ranks_(ranks),
      shards_(zero_shards(numels_of(masters), ranks.rank(), ranks.world_size())) {
  for (const auto& [name, p] : masters_) {
    LT_CHECK(p.device().is_cpu() && p.dtype() == DType::F32 && p.is_contiguous(),
             "dist.zero 1: master parameter '", name,
             "' must be a contiguous f32 CPU tensor (the offload executor's), got ", p.str());
  }
  first_piece_.assign(masters_.size(), shards_.pieces.size());
  for (size_t k = 0; k < shards_.pieces.size(); ++k) {
    const ZeroPiece& piece = shards_.pieces[k];
    const auto& [name, p] = masters_[piece.param];
    first_piece_[piece.param] = k;
    pieces_.emplace_back(name,
                         p.detach().flatten().slice(0, piece.begin, piece.begin + piece.length));
  }
  // Named as their parameters, so no_decay and the state names apply alike.
  adam_ = std::make_unique<optim::AdamW>(pieces_, options, std::move(no_decay));
  flat_ = Tensor::empty({shards_.world * shards_.shard}, DType::F32);
  shard_grad_ = Tensor::empty({shards_.shard}, DType::F32);
}

void ZeroOptimizer::set_bf16_shadow(size_t, Tensor shadow) {
  LT_CHECK(!shadow.defined(),
           "dist.zero 1 runs on the CPU only, so far: it keeps no bf16 shadows for a GPU");
}

int64_t ZeroOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, t] : adam_->state())
    if (t.dim() > 0) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

double ZeroOptimizer::reduce_gradients(const std::vector<Tensor>& grads) {
  LT_CHECK(grads.size() == masters_.size(), "dist.zero 1: ", grads.size(), " gradients for ",
           masters_.size(), " parameters");
  // Which parameters have a gradient on some rank: the same answer on all.
  std::vector<double> has(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) has[i] = grads[i].defined() ? 1 : 0;
  ranks_.sum(has);
  float* flat = flat_data(flat_);
  for (size_t i = 0; i < grads.size(); ++i) {
    float* to = flat + shards_.param_offsets[i];
    const int64_t n = masters_[i].second.numel();
    if (!grads[i].defined()) {
      std::fill_n(to, n, 0.0f);
      continue;
    }
    const Tensor& g = grads[i];
    LT_CHECK(g.device().is_cpu() && g.dtype() == DType::F32 && g.is_contiguous() && g.numel() == n,
             "dist.zero 1: the gradient of '", masters_[i].first,
             "' must be a contiguous f32 CPU tensor of ", n, " elements, got ", g.str());
    if (g.data<float>() != to)  // not already in place (flat_gradient_view)
      std::memcpy(to, g.data<float>(), static_cast<size_t>(n) * sizeof(float));
  }
  std::fill(flat + shards_.total, flat + flat_.numel(), 0.0f);  // the padding
  ranks_.reduce_scatter(flat_, shard_grad_);
  // The pieces' gradients: views of this rank's shard of the sum.
  const int64_t base = shards_.rank * shards_.shard;
  double squared = 0;
  const float* g = flat_data(shard_grad_);
  for (size_t k = 0; k < shards_.pieces.size(); ++k) {
    const ZeroPiece& piece = shards_.pieces[k];
    const Tensor& p = pieces_[k].second;
    if (has[piece.param] == 0) {
      p.set_grad(Tensor());
      continue;
    }
    const int64_t at = piece.flat - base;
    p.set_grad(shard_grad_.slice(0, at, at + piece.length));
    for (int64_t e = at; e < at + piece.length; ++e) squared += double(g[e]) * double(g[e]);
  }
  ranks_.sum(std::span<double>(&squared, 1));
  return squared;
}

Tensor ZeroOptimizer::flat_gradient_view(size_t i) const {
  const int64_t at = shards_.param_offsets.at(i);
  return flat_.slice(0, at, at + masters_[i].second.numel()).view(masters_[i].second.shape());
}

void ZeroOptimizer::update(double lr, double grad_scale, size_t first, size_t last) {
  // Pieces are in parameter order: those of [first, last) are one run.
  size_t from = pieces_.size(), to = 0;
  for (size_t k = 0; k < shards_.pieces.size(); ++k) {
    const size_t param = shards_.pieces[k].param;
    if (param < first || param >= last) continue;
    from = std::min(from, k);
    to = k + 1;
  }
  if (from < to) adam_->update(lr, grad_scale, from, to);
  for (size_t k = from; k < to; ++k) pieces_[k].second.set_grad(Tensor());
}

void ZeroOptimizer::gather_masters() {
  float* flat = flat_data(flat_);
  for (const ZeroPiece& piece : shards_.pieces) {
    const Tensor& m = masters_[piece.param].second;
    std::memcpy(flat + piece.flat, m.data<float>() + piece.begin,
                static_cast<size_t>(piece.length) * sizeof(float));
  }
  ranks_.all_gather(flat_);
  for (size_t i = 0; i < masters_.size(); ++i) {
    const Tensor& m = masters_[i].second;
    std::memcpy(m.data<float>(), flat + shards_.param_offsets[i],
                static_cast<size_t>(m.numel()) * sizeof(float));
  }
}

optim::NamedTensors ZeroOptimizer::state() const {
  const optim::NamedTensors mine = adam_->state();
  std::unordered_map<std::string, Tensor> by_name(mine.begin(), mine.end());
  // m and v: each rank writes its pieces into its shard of a flat buffer,
  // and the all-gather gives every rank the whole.
  auto gather = [&](const char* field) {
    Tensor whole = Tensor::zeros({shards_.world * shards_.shard}, DType::F32);
    float* w = whole.data<float>();
    for (const ZeroPiece& piece : shards_.pieces) {
      const Tensor& t = by_name.at(masters_[piece.param].first + "." + field);
      std::memcpy(w + piece.flat, t.data<float>(),
                  static_cast<size_t>(piece.length) * sizeof(float));
    }
    ranks_.all_gather(whole);
    return whole;
  };
  const Tensor m = gather("exp_avg"), v = gather("exp_avg_sq");
  // Each parameter's step count, from the rank holding its first element.
  std::vector<double> steps(masters_.size(), 0);
  for (const ZeroPiece& piece : shards_.pieces)
    if (piece.begin == 0)
      steps[piece.param] =
          static_cast<double>(*by_name.at(masters_[piece.param].first + ".step").data<int64_t>());
  ranks_.sum(steps);
  optim::NamedTensors out;
  for (size_t i = 0; i < masters_.size(); ++i) {
    const auto& [name, p] = masters_[i];
    const int64_t at = shards_.param_offsets[i];
    out.emplace_back(name + ".exp_avg", m.slice(0, at, at + p.numel()).reshape(p.shape()).clone());
    out.emplace_back(name + ".exp_avg_sq",
                     v.slice(0, at, at + p.numel()).reshape(p.shape()).clone());
    Tensor step = Tensor::empty({}, DType::I64);
    *step.data<int64_t>() = static_cast<int64_t>(steps[i]);
    out.emplace_back(name + ".step", step);
  }
  out.emplace_back("step", by_name.at("step"));
  return out;
}

void ZeroOptimizer::load_state(const optim::NamedTensors& state) {
  std::unordered_map<std::string, Tensor> by_name(state.begin(), state.end());
  auto find = [&](const std::string& name) -> const Tensor& {
    auto it = by_name.find(name);
    LT_CHECK(it != by_name.end() && it->second.defined(), "dist.zero 1: the optimizer state '",
             name, "' is missing (a checkpoint of another model or optimizer?)");
    return it->second;
  };
  optim::NamedTensors mine;
  for (size_t k = 0; k < shards_.pieces.size(); ++k) {
    const ZeroPiece& piece = shards_.pieces[k];
    const auto& [name, p] = masters_[piece.param];
    for (const char* field : {"exp_avg", "exp_avg_sq"}) {
      const Tensor& whole = find(name + "." + field);
      LT_CHECK(whole.numel() == p.numel() && whole.dtype() == DType::F32,
               "dist.zero 1: the optimizer state '", name, ".", field, "' is ", whole.str(),
               ", not f32 of ", p.numel(), " elements");
      mine.emplace_back(
          name + "." + field,
          whole.contiguous().flatten().slice(0, piece.begin, piece.begin + piece.length).clone());
    }
    mine.emplace_back(name + ".step", find(name + ".step"));
  }
  mine.emplace_back("step", find("step"));
  adam_->load_state(mine);
}

}  // namespace lt::exec
