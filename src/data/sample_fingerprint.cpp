#include "data/sample_fingerprint.h"

#include "core/random.h"

namespace lt::data {

namespace {

// Where the chains start: any fixed value, apart from the other hashes' so
// that a fingerprint never equals a held-out hash by construction.
constexpr uint64_t kSampleStream = 0x73616D706C653031ull;  // "sample01"
constexpr uint64_t kOrderStream = 0x6F72646572303031ull;   // "order001"

}  // namespace

uint64_t sample_hash(const Sample& sample) {
  // split_seed is splitmix64's finalizer: every output bit depends on every
  // bit of the hash so far and of the value folded in.
  uint64_t h = split_seed(kSampleStream, sample.ids.size());
  for (int32_t id : sample.ids) h = split_seed(h, static_cast<uint32_t>(id));
  for (int32_t label : sample.labels) h = split_seed(h, static_cast<uint32_t>(label));
  return h;
}

SourceFingerprint fingerprint(const WeightedSamples& source) {
  SourceFingerprint f;
  f.source = source.name;
  f.samples = source.samples.size();
  f.in_order = kOrderStream;
  for (const Sample& s : source.samples) {
    const uint64_t h = sample_hash(s);
    f.in_order = split_seed(f.in_order, h);
    f.any_order += h;  // mod 2^64: a sum does not see the order
  }
  return f;
}

}  // namespace lt::data
