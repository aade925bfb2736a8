// A source's fingerprint against facts worked out by hand: the same
// samples give the same one; reordering them changes the in-order hash
// only; changing one token id or one label, or dropping a sample, changes
// both; the any-order hash is the sum of the samples' own hashes.
#include "data/sample_fingerprint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace lt::data {
namespace {

WeightedSamples three_samples() {
  WeightedSamples source;
  source.name = "data/train.jsonl";
  source.samples = {{{5, 6, 7}, {-100, 6, 7}, 1}, {{8, 9}, {8, 9}, 2}, {{10}, {10}, 3}};
  return source;
}

TEST(SampleFingerprint, TheSameSamplesGiveTheSameFingerprint) {
  const SourceFingerprint a = fingerprint(three_samples());
  WeightedSamples copy = three_samples();
  copy.name = "elsewhere.jsonl";
  for (Sample& s : copy.samples) s.line += 10;  // where a row sits is not its content
  const SourceFingerprint b = fingerprint(copy);
  EXPECT_TRUE(a.same_samples(b));
  EXPECT_EQ(a.samples, 3u);
  EXPECT_EQ(a.source, "data/train.jsonl");
  EXPECT_EQ(a.any_order, sample_hash(three_samples().samples[0]) +
                             sample_hash(three_samples().samples[1]) +
                             sample_hash(three_samples().samples[2]));
}

TEST(SampleFingerprint, AReorderingChangesOnlyTheInOrderHash) {
  const SourceFingerprint a = fingerprint(three_samples());
  WeightedSamples reordered = three_samples();
  std::reverse(reordered.samples.begin(), reordered.samples.end());
  const SourceFingerprint b = fingerprint(reordered);
  EXPECT_FALSE(a.same_samples(b));
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_NE(a.in_order, b.in_order);
  EXPECT_EQ(a.any_order, b.any_order);
}

TEST(SampleFingerprint, AnEditChangesBothHashes) {
  const SourceFingerprint a = fingerprint(three_samples());
  WeightedSamples id = three_samples();
  id.samples[1].ids[0] = 11;
  WeightedSamples label = three_samples();
  label.samples[0].labels[0] = 5;  // the prompt token now trained on
  WeightedSamples longer = three_samples();
  longer.samples[2].ids.push_back(12);
  longer.samples[2].labels.push_back(12);
  WeightedSamples fewer = three_samples();
  fewer.samples.pop_back();
  for (const WeightedSamples& edited : {id, label, longer, fewer}) {
    const SourceFingerprint b = fingerprint(edited);
    EXPECT_NE(a.in_order, b.in_order);
    EXPECT_NE(a.any_order, b.any_order);
  }
  EXPECT_EQ(fingerprint(fewer).samples, 2u);
  // Ids and labels are told apart: swapping them is another sample.
  Sample s{{1, 2}, {3, 4}, 0}, swapped{{3, 4}, {1, 2}, 0};
  EXPECT_NE(sample_hash(s), sample_hash(swapped));
}

}  // namespace
}  // namespace lt::data
