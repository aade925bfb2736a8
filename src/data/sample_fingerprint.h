#pragma once
// What a checkpoint remembers of the samples its sampler walked, so that a
// resume can tell whether they are still the ones its position counts
// into. The sampler's state is a position in a permutation of sample
// numbers (batching.h), so it means the same samples only while every
// source holds the same samples in the same order: a file edited in place
// (rows reordered, added, removed or changed) or tokenized otherwise (a new
// chat template in tokenizer_config.json) under the same config is other
// data.
//
// Per source: how many samples, a hash of all of them in order, and the sum
// of their own hashes (the same whatever their order), which tells a
// reordering apart from other edits. Each sample's hash covers its length,
// token ids and labels. Hashing costs some nanoseconds a token, little
// next to tokenizing it.
#include <cstdint>
#include <string>
#include <vector>

#include "data/batching.h"

namespace lt::data {

struct SourceFingerprint {
  std::string source;  // the file, for the reader of trainer_state.json
  uint64_t samples = 0;
  uint64_t in_order = 0;   // over the samples in their order
  uint64_t any_order = 0;  // sum over the samples of each one's hash
  // The same samples in the same order; the name is not compared.
  bool same_samples(const SourceFingerprint& other) const {
    return samples == other.samples && in_order == other.in_order && any_order == other.any_order;
  }
};

// The hash of one sample: its length, ids and labels.
uint64_t sample_hash(const Sample& sample);

SourceFingerprint fingerprint(const WeightedSamples& source);

}  // namespace lt::data
