#include "data/batching.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/random.h"
#include "data/mixture.h"

namespace lt::data {

namespace {

std::vector<WeightedSamples> one_source(std::vector<Sample> samples) {
  std::vector<WeightedSamples> sources(1);
  sources[0].samples = std::move(samples);
  sources[0].name = "the dataset";
  return sources;
}

}  // namespace

Batcher::Batcher(std::vector<Sample> samples, const BatchOptions& options)
    : Batcher(one_source(std::move(samples)), options) {}

Batcher::Batcher(std::vector<WeightedSamples> sources, const BatchOptions& options)
    : options_(options) {
  LT_CHECK(!sources.empty(), "the training data has no source");
  LT_CHECK(options_.batch_size > 0, "batch size must be positive, got ", options_.batch_size);
  LT_CHECK(options_.seq_len >= 2, "sequence length must be at least 2, got ", options_.seq_len);
  for (size_t i = 0; i < sources.size(); ++i) {
    WeightedSamples& from = sources[i];
    LT_CHECK(!from.samples.empty(), from.name, ": has no usable samples");
    LT_CHECK(std::isfinite(from.weight) && from.weight > 0, from.name,
             ": the weight must be a positive number, got ", from.weight);
    for (const auto& s : from.samples) {
      LT_CHECK(s.ids.size() == s.labels.size(), from.name, ": a sample has ", s.ids.size(),
               " ids but ", s.labels.size(), " labels");
      // An empty sample adds nothing to a row; were all empty, packing would
      // never fill one.
      LT_CHECK(!s.ids.empty(), from.name, ": a sample has no tokens");
    }
    Source source;
    source.samples = std::move(from.samples);
    source.name = from.name;
    // Source 0 keeps the seed, so one source walks exactly the order a
    // single dataset always walked; the others get streams of their own.
    source.seed = options_.seed + i * 0xD1B54A32D192ED03ull;
    sources_.push_back(std::move(source));
    weights_.push_back(from.weight);
  }
  current_source_ = mixture_source(options_.seed, 0, weights_);
}

int64_t Batcher::num_samples() const {
  int64_t n = 0;
  for (const Source& s : sources_) n += static_cast<int64_t>(s.samples.size());
  return n;
}

SamplerState Batcher::state() const {
  SamplerState state;
  state.offset = offset_;
  if (sources_.size() == 1) {
    const uint64_t n = sources_[0].samples.size();
    state.epoch = sources_[0].drawn / n;
    state.position = sources_[0].drawn % n;
  } else {
    state.draws = draws_;
  }
  return state;
}

void Batcher::restore(const SamplerState& state) {
  if (std::string why = try_restore(state); !why.empty()) fail(why);
}

std::string Batcher::try_restore(const SamplerState& state) {
  std::vector<uint64_t> drawn(sources_.size(), 0);
  if (sources_.size() == 1) {
    const uint64_t n = sources_[0].samples.size();
    if (state.draws != 0)
      return fmt::format(
          "{}: the sampler state is of a mixture of datasets ({} draws), but the data is one "
          "dataset",
          sources_[0].name, state.draws);
    if (state.position >= n)
      return fmt::format(
          "{}: the sampler's position {} of epoch {} is beyond the {} sample{} it holds now",
          sources_[0].name, state.position, state.epoch, n, n == 1 ? "" : "s");
    drawn[0] = state.epoch * n + state.position;
  } else {
    if (state.epoch != 0 || state.position != 0)
      return fmt::format(
          "the sampler state is of one dataset (epoch {}, position {}), but the data is a mixture "
          "of {}",
          state.epoch, state.position, source_names());
    // The sources of the draws made so far are a function of the seed:
    // replay them (a hash each, milliseconds for millions of draws).
    for (uint64_t k = 0; k < state.draws; ++k) ++drawn[mixture_source(options_.seed, k, weights_)];
  }
  if (!options_.pack && state.offset != 0)
    return fmt::format("the sampler's offset {} is for packed batches, but this batcher pads",
                       state.offset);
  std::vector<uint64_t> previous(sources_.size());
  for (size_t i = 0; i < sources_.size(); ++i) {
    previous[i] = sources_[i].drawn;
    sources_[i].drawn = drawn[i];
  }
  const uint64_t previous_draws = draws_;
  draws_ = sources_.size() == 1 ? drawn[0] : state.draws;
  current_source_ = mixture_source(options_.seed, draws_, weights_);
  // A saved offset must lie inside the sample it points at; otherwise the
  // next packed row would read past its end.
  const size_t length = current_sample().ids.size();
  if (state.offset >= length) {
    const std::string& name = sources_[current_source_].name;
    for (size_t i = 0; i < sources_.size(); ++i) sources_[i].drawn = previous[i];
    draws_ = previous_draws;
    current_source_ = mixture_source(options_.seed, draws_, weights_);
    return fmt::format(
        "{}: the sampler's offset {} is beyond the end of the sample at {} ({} token{})", name,
        state.offset,
        state.draws ? fmt::format("draw {}", state.draws)
                    : fmt::format("position {} of epoch {}", state.position, state.epoch),
        length, length == 1 ? "" : "s");
  }
  offset_ = state.offset;
  return "";
}

std::string Batcher::source_names() const {
  std::string names;
  for (const Source& s : sources_) names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

const Sample& Batcher::current_sample() {
  Source& source = sources_[current_source_];
  const uint64_t n = source.samples.size();
  const uint64_t epoch = source.drawn / n;
  if (source.permutation_epoch != epoch) {
    source.permutation.resize(n);
    for (uint32_t i = 0; i < n; ++i) source.permutation[i] = i;
    // Fisher-Yates with our own generator: the order depends only on (seed,
    // epoch), on every platform.
    Generator gen(source.seed * 0x9E3779B97F4A7C15ull + epoch);
    for (size_t i = n; i > 1; --i) {
      std::swap(source.permutation[i - 1], source.permutation[gen.below(i)]);
    }
    source.permutation_epoch = epoch;
  }
  return source.samples[source.permutation[source.drawn % n]];
}

void Batcher::advance() {
  offset_ = 0;
  ++sources_[current_source_].drawn;
  ++draws_;
  current_source_ = mixture_source(options_.seed, draws_, weights_);
}

Batch Batcher::next() {
  return options_.pack ? next_packed() : next_padded();
}

Batch Batcher::next_padded() {
  const int64_t b = options_.batch_size;
  std::vector<const Sample*> rows;
  int64_t longest = 0;
  for (int64_t r = 0; r < b; ++r) {
    rows.push_back(&current_sample());
    longest = std::max<int64_t>(
        longest,
        std::min<int64_t>(options_.seq_len, static_cast<int64_t>(rows.back()->ids.size())));
    advance();
  }
  longest = std::max<int64_t>(longest, 1);
  Batch batch;
  batch.ids = Tensor::full({b, longest}, options_.pad_id, DType::I64);
  batch.targets = Tensor::full({b, longest}, kIgnoreLabel, DType::I64);
  int64_t* ids = batch.ids.data<int64_t>();
  int64_t* targets = batch.targets.data<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const Sample& s = *rows[r];
    const int64_t n = std::min<int64_t>(longest, static_cast<int64_t>(s.ids.size()));
    for (int64_t i = 0; i < n; ++i) ids[r * longest + i] = s.ids[i];
    for (int64_t i = 0; i + 1 < n; ++i) targets[r * longest + i] = s.labels[i + 1];
    batch.tokens += n;
  }
  for (int64_t i = 0; i < b * longest; ++i) batch.target_count += targets[i] != kIgnoreLabel;
  return batch;
}

Batch Batcher::next_packed() {
  const int64_t b = options_.batch_size, t = options_.seq_len;
  Batch batch;
  batch.ids = Tensor::full({b, t}, options_.pad_id, DType::I64);
  batch.targets = Tensor::full({b, t}, kIgnoreLabel, DType::I64);
  int64_t* ids = batch.ids.data<int64_t>();
  int64_t* targets = batch.targets.data<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    int64_t col = 0;
    while (col < t) {
      const Sample& s = current_sample();
      const int64_t begin = static_cast<int64_t>(offset_);
      const int64_t take = std::min<int64_t>(t - col, static_cast<int64_t>(s.ids.size()) - begin);
      // Target of each position: the sample's next label. When the sample
      // continues in the next row, the row's last position still predicts
      // that token: it is known here, and dropping it would lose one target
      // per row of every long sample.
      const int64_t length = static_cast<int64_t>(s.ids.size());
      for (int64_t i = 0; i < take; ++i) {
        ids[r * t + col + i] = s.ids[begin + i];
        if (begin + i + 1 < length) targets[r * t + col + i] = s.labels[begin + i + 1];
      }
      col += take;
      batch.tokens += take;
      if (begin + take == static_cast<int64_t>(s.ids.size())) {
        advance();
      } else {
        offset_ = static_cast<uint64_t>(begin + take);
      }
    }
  }
  for (int64_t i = 0; i < b * t; ++i) batch.target_count += targets[i] != kIgnoreLabel;
  return batch;
}

}  // namespace lt::data
