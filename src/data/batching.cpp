#include "data/batching.h"

#include <algorithm>

#include "core/error.h"
#include "core/random.h"

namespace lt::data {

Batcher::Batcher(std::vector<Sample> samples, const BatchOptions& options)
    : samples_(std::move(samples)), options_(options) {
  LT_CHECK(!samples_.empty(), "the dataset has no usable samples");
  LT_CHECK(options_.batch_size > 0, "batch size must be positive, got ", options_.batch_size);
  LT_CHECK(options_.seq_len >= 2, "sequence length must be at least 2, got ", options_.seq_len);
  for (const auto& s : samples_) {
    LT_CHECK(s.ids.size() == s.labels.size(), "a sample has ", s.ids.size(), " ids but ",
             s.labels.size(), " labels");
    // An empty sample adds nothing to a row; were all empty, packing would
    // never fill one.
    LT_CHECK(!s.ids.empty(), "a sample has no tokens");
  }
}

void Batcher::restore(const SamplerState& state) {
  LT_CHECK(state.position < samples_.size(), "sampler position ", state.position,
           " is beyond the dataset's ", samples_.size(), " samples (was the data changed?)");
  LT_CHECK(options_.pack || state.offset == 0, "sampler offset ", state.offset,
           " is for packed batches, but this batcher pads");
  const SamplerState previous = state_;
  state_ = state;
  // A saved offset must lie inside the sample it points at; otherwise the
  // next packed row would read past its end.
  if (state.offset >= current_sample().ids.size()) {
    const size_t length = current_sample().ids.size();
    state_ = previous;
    fail("sampler offset ", state.offset, " is beyond the end of sample ", state.position,
         " of epoch ", state.epoch, " (", length, " tokens; was the data changed?)");
  }
}

void Batcher::ensure_permutation() {
  if (permutation_epoch_ == state_.epoch) return;
  permutation_.resize(samples_.size());
  for (uint32_t i = 0; i < permutation_.size(); ++i) permutation_[i] = i;
  // Fisher-Yates with our own generator: the order depends only on (seed,
  // epoch), on every platform.
  Generator gen(options_.seed * 0x9E3779B97F4A7C15ull + state_.epoch);
  for (size_t i = permutation_.size(); i > 1; --i) {
    std::swap(permutation_[i - 1], permutation_[gen.below(i)]);
  }
  permutation_epoch_ = state_.epoch;
}

const Sample& Batcher::current_sample() {
  ensure_permutation();
  return samples_[permutation_[state_.position]];
}

void Batcher::advance() {
  state_.offset = 0;
  if (++state_.position == samples_.size()) {
    state_.position = 0;
    ++state_.epoch;
  }
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
      const int64_t begin = static_cast<int64_t>(state_.offset);
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
        state_.offset = static_cast<uint64_t>(begin + take);
      }
    }
  }
  for (int64_t i = 0; i < b * t; ++i) batch.target_count += targets[i] != kIgnoreLabel;
  return batch;
}

}  // namespace lt::data
