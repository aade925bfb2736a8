#include "exec/zero_optimizer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <unordered_map>

#include "core/allocator.h"
#include "core/error.h"
#include "optim/shadow.h"

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
                             std::vector<std::string> no_decay, CrossRankSum& ranks,
                             const std::vector<size_t>& group_firsts,
                             std::optional<optim::AdamW8bitOptions> adamw8bit)
    : masters_(masters),
      ranks_(ranks),
      shards_(zero_shards(numels_of(masters), ranks.rank(), ranks.world_size(), group_firsts,
                          adamw8bit ? adamw8bit->block_size : 1)),
      adamw8bit_(adamw8bit) {
  for (const auto& [name, p] : masters_) {
    LT_CHECK(p.device().is_cpu() && p.dtype() == DType::F32 && p.is_contiguous(),
             "dist.zero 1: master parameter '", name,
             "' must be a contiguous f32 CPU tensor (the offload executor's), got ", p.str());
  }
  // Named as their parameters, so no_decay and the state names apply alike.
  nn::NamedParameters plain, quantized;
  first_piece_.assign(masters_.size(), shards_.pieces.size());
  for (size_t k = 0; k < shards_.pieces.size(); ++k) {
    const ZeroPiece& piece = shards_.pieces[k];
    const auto& [name, p] = masters_[piece.param];
    first_piece_[piece.param] = k;
    pieces_.emplace_back(name,
                         p.detach().flatten().slice(0, piece.begin, piece.begin + piece.length));
    // AdamW8bit's choice is made on the whole parameter, as one process makes it.
    const bool quantize = adamw8bit && p.numel() >= adamw8bit->min_8bit_numel;
    nn::NamedParameters& to = quantize ? quantized : plain;
    inner_of_.emplace_back(quantize ? 1 : 0, to.size());
    to.push_back(pieces_.back());
  }
  if (adamw8bit) {
    optim::AdamW8bitOptions every_piece = *adamw8bit;
    every_piece.min_8bit_numel = 1;  // a short piece of a quantized parameter is quantized
    adam8_ = std::make_unique<optim::AdamW8bit>(quantized, options, no_decay, every_piece);
  }
  adam_ = std::make_unique<optim::AdamW>(plain, options, std::move(no_decay));
  shard_grad_ = Tensor::empty({shards_.shard}, DType::F32);
}

const Tensor& ZeroOptimizer::flat() const {
  // Zeros: the padding stays zero (nothing writes it but the all-gather,
  // which copies other ranks' zeros), so a reduce-scatter adds zeros there.
  // Host memory by name: the first use may run inside a device's compute
  // scope (the streaming executor's uploads), which would place it there.
  if (!flat_.defined()) {
    flat_ = Tensor::empty({shards_.flat_size}, DType::F32, cpu_allocator());
    flat_.zero_();
  }
  return flat_;
}

void ZeroOptimizer::share_weights(SharedWeights& shared) {
  shared_ = &shared;
  if (shares_weights()) return;
  // Note [Gathers among a host's peers]
  // On several hosts each rank copies into its host's segment only the
  // shards of copied_ranks(); the others reach its host through other
  // ranks. So where the communicator can, a group's weights are gathered
  // among a rank's peers alone (those ranks and itself, one per host when
  // the hosts hold as many ranks each, which the copied ranks' rule
  // assures: exec/shared_weights.h), into a buffer of one block per peer:
  // every shard then crosses to each other host once, not once for every
  // rank of that host, and no rank holds the whole flat buffer.
  std::vector<int> peers = shared.copied_ranks();
  peers.push_back(shards_.rank);
  std::sort(peers.begin(), peers.end());
  if (!ranks_.join_peers(peers)) return;
  peers_ = std::move(peers);
  peer_flat_ = Tensor::empty({static_cast<int64_t>(peers_.size()) * shards_.shard}, DType::F32,
                             cpu_allocator());
  peer_flat_.zero_();  // the padding
}

int64_t ZeroOptimizer::peer_index(int rank) const {
  return std::lower_bound(peers_.begin(), peers_.end(), rank) - peers_.begin();
}

float* ZeroOptimizer::gathered_shard(size_t group, int rank) const {
  const ZeroGroup& g = shards_.groups[group];
  if (peers_.empty()) return flat_data(flat_) + g.flat + rank * g.shard;
  const int64_t blocks_at = static_cast<int64_t>(peers_.size()) * g.shard_at;
  return flat_data(peer_flat_) + blocks_at + peer_index(rank) * g.shard;
}

// The shadows follow the masters: every rank's are refilled from the
// gathered masters (finish_gathers), the pieces' optimizers keep none.
// With shared weights the shadow is shared too, and each rank's pieces'
// optimizers write their own pieces of it as they update.
void ZeroOptimizer::set_bf16_shadow(size_t index, Tensor shadow) {
  LT_CHECK(index < masters_.size(), "dist.zero 1: shadow of parameter ", index, " of ",
           masters_.size());
  if (shared_) {
    for (size_t k = first_piece_[index];
         k < shards_.pieces.size() && shards_.pieces[k].param == index; ++k) {
      const ZeroPiece& piece = shards_.pieces[k];
      const auto [inner, at] = inner_of_[k];
      Tensor part = shadow.defined()
                        ? shadow.flatten().slice(0, piece.begin, piece.begin + piece.length)
                        : Tensor();
      if (inner == 0) {
        adam_->set_bf16_shadow(at, std::move(part));
      } else {
        adam8_->set_bf16_shadow(at, std::move(part));
      }
    }
    shadows_.resize(masters_.size());
    shadows_[index] = std::move(shadow);  // finish_oldest_gather: other hosts' shards
    return;
  }
  if (shadow.defined()) {
    optim::check_bf16_shadow("dist.zero 1", masters_[index].first, masters_[index].second, shadow);
    optim::fill_bf16_shadow(masters_[index].second, shadow);
  }
  shadows_.resize(masters_.size());
  shadows_[index] = std::move(shadow);
}

void ZeroOptimizer::finish_step() {
  adam_->finish_step();
  if (adam8_) adam8_->finish_step();
}

bool ZeroOptimizer::use_compiled_updates(std::shared_ptr<compile::KernelCache> cache) {
  if (adam8_) adam8_->use_compiled_updates(cache);
  return adam_->use_compiled_updates(std::move(cache));
}

int64_t ZeroOptimizer::compiled_updates() const {
  return adam_->compiled_updates() + (adam8_ ? adam8_->compiled_updates() : 0);
}

std::string ZeroOptimizer::compiled_fallback() const {
  const std::string why = adam_->compiled_fallback();
  return why.empty() && adam8_ ? adam8_->compiled_fallback() : why;
}

optim::NamedTensors ZeroOptimizer::shard_state() const {
  optim::NamedTensors out;
  Tensor step;
  for (const optim::Optimizer* inner : {static_cast<const optim::Optimizer*>(adam_.get()),
                                        static_cast<const optim::Optimizer*>(adam8_.get())}) {
    if (!inner) continue;
    for (auto& [name, t] : inner->state()) {
      if (name == "step") {
        step = t;
        continue;
      }
      out.emplace_back(name, t);
    }
  }
  out.emplace_back("step", step);
  return out;
}

int64_t ZeroOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, t] : shard_state())
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
  float* flat = flat_data(this->flat());
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
  for (size_t g = 0; g < shards_.groups.size(); ++g) start_reduce(g);
  ranks_.wait_for_sums();
  std::vector<bool> has_gradient(has.size());
  for (size_t i = 0; i < has.size(); ++i) has_gradient[i] = has[i] > 0;
  take_reduced(has_gradient);
  double squared = shard_squares();
  ranks_.sum(std::span<double>(&squared, 1));
  return squared;
}

void ZeroOptimizer::start_reduce(size_t group) {
  const ZeroGroup& g = shards_.groups.at(group);
  ranks_.start_reduce_scatter(flat().slice(0, g.flat, g.flat + shards_.world * g.shard),
                              shard_grad_.slice(0, g.shard_at, g.shard_at + g.shard));
}

double ZeroOptimizer::shard_squares() const {
  double squared = 0;
  const float* g = flat_data(shard_grad_);
  for (int64_t e = 0; e < shard_grad_.numel(); ++e) squared += double(g[e]) * double(g[e]);
  return squared;
}

void ZeroOptimizer::take_reduced(const std::vector<bool>& has_gradient) {
  LT_CHECK(has_gradient.size() == masters_.size(), "dist.zero 1: ", has_gradient.size(),
           " gradient flags for ", masters_.size(), " parameters");
  for (size_t k = 0; k < shards_.pieces.size(); ++k) {
    const ZeroPiece& piece = shards_.pieces[k];
    const int64_t at = shards_.shard_offset(piece);
    pieces_[k].second.set_grad(
        has_gradient[piece.param] ? shard_grad_.slice(0, at, at + piece.length) : Tensor());
  }
}

Tensor ZeroOptimizer::shard_gradient(size_t group) const {
  const ZeroGroup& g = shards_.groups.at(group);
  return shard_grad_.slice(0, g.shard_at, g.shard_at + g.shard);
}

size_t ZeroOptimizer::group_of(size_t i) const {
  for (size_t g = 0; g < shards_.groups.size(); ++g)
    if (i >= shards_.groups[g].first && i < shards_.groups[g].last) return g;
  fail("dist.zero 1: parameter ", i, " is in no group of ", masters_.size());
}

void ZeroOptimizer::start_gather(size_t group) {
  if (shares_weights()) return;  // each rank wrote its pieces into the shared masters
  const ZeroGroup& g = shards_.groups.at(group);
  // This rank's block: its shard of the flat buffer, or among its peers.
  float* own = peers_.empty() ? flat_data(this->flat()) + g.flat + shards_.rank * g.shard
                              : gathered_shard(group, shards_.rank);
  for (const ZeroPiece& piece : shards_.pieces) {
    if (piece.group != group) continue;
    const Tensor& m = masters_[piece.param].second;
    std::memcpy(own + (piece.flat - g.flat - shards_.rank * g.shard), m.data<float>() + piece.begin,
                static_cast<size_t>(piece.length) * sizeof(float));
  }
  if (peers_.empty()) {
    ranks_.start_all_gather(flat_.slice(0, g.flat, g.flat + shards_.world * g.shard));
  } else {
    const int64_t blocks = static_cast<int64_t>(peers_.size()) * g.shard;
    const int64_t at = static_cast<int64_t>(peers_.size()) * g.shard_at;
    ranks_.start_peer_all_gather(peer_flat_.slice(0, at, at + blocks));
  }
  gathering_.push_back(group);
}

void ZeroOptimizer::finish_gathers() {
  while (!gathering_.empty()) finish_oldest_gather();
}

size_t ZeroOptimizer::finish_oldest_gather() {
  LT_CHECK(!gathering_.empty(), "dist.zero 1: no all-gather in flight");
  const size_t group = gathering_.front();
  const ZeroGroup& g = shards_.groups[group];
  if (shared_) {
    copy_in_other_hosts(group);
    gathering_.erase(gathering_.begin());
    return group;
  }
  const float* flat = flat_data(flat_);
  for (size_t i = g.first; i < g.last; ++i) {
    const Tensor& m = masters_[i].second;
    std::memcpy(m.data<float>(), flat + shards_.param_offsets[i],
                static_cast<size_t>(m.numel()) * sizeof(float));
    if (i < shadows_.size() && shadows_[i].defined()) optim::fill_bf16_shadow(m, shadows_[i]);
  }
  gathering_.erase(gathering_.begin());
  return group;
}

// Note [Weights shared by the ranks of a host], several hosts: the shards
// of the other hosts' ranks this rank copies in (SharedWeights::
// copied_ranks: no other rank of this host writes them), masters and bf16
// copies; then the group is this rank's to publish.
void ZeroOptimizer::copy_in_other_hosts(size_t group) {
  const ZeroGroup& g = shards_.groups[group];
  for (int r : shared_->copied_ranks()) {
    const float* shard = gathered_shard(group, r);
    const int64_t from = g.flat + r * g.shard, to = from + g.shard;
    for (size_t i = g.first; i < g.last; ++i) {
      const Tensor& m = masters_[i].second;
      const int64_t at = shards_.param_offsets[i];
      const int64_t begin = std::max(from, at), end = std::min(to, at + m.numel());
      if (begin >= end) continue;
      std::memcpy(m.data<float>() + (begin - at), shard + (begin - from),
                  static_cast<size_t>(end - begin) * sizeof(float));
      if (i < shadows_.size() && shadows_[i].defined())
        optim::fill_bf16_shadow(m.flatten().slice(0, begin - at, end - at),
                                shadows_[i].flatten().slice(0, begin - at, end - at));
    }
  }
  shared_->publish(group);
  shared_->wait_for(group,
                    "the all-gather of the parameters from '" + masters_[g.first].first + "'");
}

Tensor ZeroOptimizer::flat_gradient_view(size_t i) const {
  const int64_t at = shards_.param_offsets.at(i);
  return flat().slice(0, at, at + masters_[i].second.numel()).view(masters_[i].second.shape());
}

void ZeroOptimizer::update(double lr, double grad_scale, size_t first, size_t last) {
  // Pieces are in parameter order: each inner optimizer's pieces of
  // [first, last) are one run of its own list.
  size_t from[2] = {SIZE_MAX, SIZE_MAX}, to[2] = {0, 0};
  for (size_t k = 0; k < shards_.pieces.size(); ++k) {
    const size_t param = shards_.pieces[k].param;
    if (param < first || param >= last) continue;
    const auto [inner, index] = inner_of_[k];
    from[inner] = std::min(from[inner], index);
    to[inner] = index + 1;
  }
  if (from[0] < to[0]) adam_->update(lr, grad_scale, from[0], to[0]);
  if (from[1] < to[1]) adam8_->update(lr, grad_scale, from[1], to[1]);
  for (size_t k = 0; k < shards_.pieces.size(); ++k) {
    const size_t param = shards_.pieces[k].param;
    if (param >= first && param < last) pieces_[k].second.set_grad(Tensor());
  }
  if (!shares_weights()) return;  // several hosts: finish_oldest_gather publishes
  // Note [Weights shared by the ranks of a host]: done when every rank of
  // the host has written its pieces of the groups updated here.
  for (size_t g = 0; g < shards_.groups.size(); ++g) {
    const ZeroGroup& group = shards_.groups[g];
    if (group.first < first || group.last > last) continue;
    shared_->publish(g);
    shared_->wait_for(g, "the update of the parameters from '" + masters_[group.first].first + "'");
  }
}

void ZeroOptimizer::gather_masters() {
  if (shares_weights()) return;  // update() waited for every rank's pieces
  for (size_t g = 0; g < shards_.groups.size(); ++g) start_gather(g);
  ranks_.wait_for_sums();
  finish_gathers();
}

optim::NamedTensors ZeroOptimizer::state() const {
  LT_CHECK(!adam8_, "dist.zero 1 with optim.name adamw8bit: the whole state is not gathered; ",
           "checkpoints save it per shard (exec/zero_checkpoint.h)");
  const optim::NamedTensors mine = adam_->state();
  std::unordered_map<std::string, Tensor> by_name(mine.begin(), mine.end());
  // m and v: each rank writes its pieces into its shard of a flat buffer,
  // and the all-gather gives every rank the whole.
  auto gather = [&](const char* field) {
    Tensor whole = Tensor::zeros({shards_.flat_size}, DType::F32);
    float* w = whole.data<float>();
    for (const ZeroPiece& piece : shards_.pieces) {
      const Tensor& t = by_name.at(masters_[piece.param].first + "." + field);
      std::memcpy(w + piece.flat, t.data<float>(),
                  static_cast<size_t>(piece.length) * sizeof(float));
    }
    for (const ZeroGroup& g : shards_.groups)
      ranks_.all_gather(whole.slice(0, g.flat, g.flat + shards_.world * g.shard));
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
  StateSource whole;
  whole.part = [&](size_t i, const std::string& field, DType dtype, int64_t from, int64_t to) {
    const auto& [name, p] = masters_[i];
    const std::string key = name + "." + field;
    const Tensor& t = find(key);
    const bool scales = field.ends_with(".scales");
    const int64_t count =
        scales ? (p.numel() + adamw8bit_->block_size - 1) / adamw8bit_->block_size : p.numel();
    LT_CHECK(t.numel() == count && t.dtype() == dtype, "dist.zero 1: the optimizer state '", key,
             "' is ", t.str(), ", not ", dtype_name(dtype), " of ", count, " elements");
    return t.contiguous().flatten().slice(0, from, to).clone();
  };
  whole.step = [&](size_t i) {
    return find(i < masters_.size() ? masters_[i].first + ".step" : std::string("step"));
  };
  load_state_parts(whole);
}

void ZeroOptimizer::load_state_parts(const StateSource& source) {
  optim::NamedTensors mine[2];
  for (size_t k = 0; k < shards_.pieces.size(); ++k) {
    const ZeroPiece& piece = shards_.pieces[k];
    const std::string& name = masters_[piece.param].first;
    const int inner = inner_of_[k].first;
    // The piece's units of a state counted in `unit`s of elements.
    auto part = [&](const std::string& field, DType dtype, int64_t unit) {
      return source.part(piece.param, field, dtype, piece.begin / unit,
                         (piece.begin + piece.length + unit - 1) / unit);
    };
    if (inner == 0) {
      for (const char* field : {"exp_avg", "exp_avg_sq"})
        mine[0].emplace_back(name + "." + field, part(field, DType::F32, 1));
    } else {
      for (const std::string moment : {"exp_avg", "sqrt_exp_avg_sq"}) {
        mine[1].emplace_back(name + "." + moment + ".codes", part(moment + ".codes", DType::U8, 1));
        mine[1].emplace_back(name + "." + moment + ".scales",
                             part(moment + ".scales", DType::F32, adamw8bit_->block_size));
      }
    }
    mine[inner].emplace_back(name + ".step", source.step(piece.param));
  }
  const Tensor step = source.step(static_cast<size_t>(-1));
  for (auto& m : mine) m.emplace_back("step", step);
  adam_->load_state(mine[0]);
  if (adam8_) adam8_->load_state(mine[1]);
}

}  // namespace lt::exec
