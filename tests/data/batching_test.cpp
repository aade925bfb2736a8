// The Batcher against a reference written out here: every sample's ids
// name the sample and the position (id = 1000 * sample + position + 1), so
// each row can be taken apart and checked token by token.
#include "data/batching.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "core/error.h"

namespace lt::data {
namespace {

constexpr int32_t kPad = 0;

int32_t id_of(int sample, int position) {
  return 1000 * sample + position + 1;
}
int sample_of(int64_t id) {
  return static_cast<int>((id - 1) / 1000);
}
int position_of(int64_t id) {
  return static_cast<int>((id - 1) % 1000);
}

// Samples of the given lengths; every third token is masked, so targets
// show whether they came from the right label.
std::vector<Sample> make_samples(const std::vector<int>& lengths) {
  std::vector<Sample> samples;
  for (int s = 0; s < static_cast<int>(lengths.size()); ++s) {
    Sample sample;
    for (int p = 0; p < lengths[s]; ++p) {
      sample.ids.push_back(id_of(s, p));
      sample.labels.push_back(p % 3 == 1 ? kIgnoreLabel : id_of(s, p));
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

struct Rows {
  int64_t b = 0, t = 0;
  std::vector<int64_t> ids, targets;
  int64_t id(int64_t r, int64_t c) const { return ids[r * t + c]; }
  int64_t target(int64_t r, int64_t c) const { return targets[r * t + c]; }
};

Rows rows_of(const Batch& batch) {
  Rows rows;
  rows.b = batch.ids.size(0);
  rows.t = batch.ids.size(1);
  EXPECT_EQ(batch.targets.size(0), rows.b);
  EXPECT_EQ(batch.targets.size(1), rows.t);
  const int64_t* ids = batch.ids.data<int64_t>();
  const int64_t* targets = batch.targets.data<int64_t>();
  rows.ids.assign(ids, ids + rows.b * rows.t);
  rows.targets.assign(targets, targets + rows.b * rows.t);
  return rows;
}

bool same_batch(const Batch& a, const Batch& b) {
  Rows x = rows_of(a), y = rows_of(b);
  return x.b == y.b && x.t == y.t && x.ids == y.ids && x.targets == y.targets &&
         a.tokens == b.tokens && a.target_count == b.target_count;
}

BatchOptions options(int64_t batch_size, int64_t seq_len, bool pack, uint64_t seed = 7) {
  BatchOptions o;
  o.batch_size = batch_size;
  o.seq_len = seq_len;
  o.pack = pack;
  o.pad_id = kPad;
  o.seed = seed;
  return o;
}

// Padding: one sample per row, cut at seq_len, padded to the longest row.
void check_padded(const Batch& batch, const std::vector<Sample>& samples, int64_t seq_len,
                  std::vector<int>* order) {
  Rows rows = rows_of(batch);
  int64_t longest = 0, tokens = 0, target_count = 0;
  for (int64_t r = 0; r < rows.b; ++r) {
    const int s = sample_of(rows.id(r, 0));
    ASSERT_EQ(position_of(rows.id(r, 0)), 0);
    order->push_back(s);
    const Sample& sample = samples[s];
    const int64_t n = std::min<int64_t>(seq_len, static_cast<int64_t>(sample.ids.size()));
    longest = std::max(longest, n);
    tokens += n;
    for (int64_t c = 0; c < rows.t; ++c) {
      if (c < n) {
        EXPECT_EQ(rows.id(r, c), sample.ids[c]) << "row " << r << " col " << c;
        // The target of position c is the label of token c + 1, if that
        // token is in the row.
        const int64_t want = c + 1 < n ? sample.labels[c + 1] : kIgnoreLabel;
        EXPECT_EQ(rows.target(r, c), want) << "row " << r << " col " << c;
        target_count += want != kIgnoreLabel;
      } else {
        EXPECT_EQ(rows.id(r, c), kPad) << "row " << r << " col " << c;
        EXPECT_EQ(rows.target(r, c), kIgnoreLabel) << "row " << r << " col " << c;
      }
    }
  }
  EXPECT_EQ(rows.t, longest);
  EXPECT_EQ(batch.tokens, tokens);
  EXPECT_EQ(batch.target_count, target_count);
}

TEST(Batcher, PadTruncatesPadsAndShiftsLabels) {
  std::vector<Sample> samples = make_samples({3, 7, 4, 5, 1, 6});
  Batcher batcher(samples, options(3, 5, false));
  std::vector<int> order;
  for (int i = 0; i < 4; ++i) check_padded(batcher.next(), samples, 5, &order);
  // Two epochs of 6 samples: each epoch shows every sample once.
  ASSERT_EQ(order.size(), 12u);
  EXPECT_EQ(std::set<int>(order.begin(), order.begin() + 6).size(), 6u);
  EXPECT_EQ(std::set<int>(order.begin() + 6, order.end()).size(), 6u);
}

TEST(Batcher, PadRowsAreAsLongAsTheLongestSampleInTheBatch) {
  std::vector<Sample> samples = make_samples({2, 3});
  Batcher batcher(samples, options(2, 100, false));
  Batch batch = batcher.next();
  EXPECT_EQ(batch.ids.size(1), 3);
  std::vector<int> order;
  check_padded(batch, samples, 100, &order);
}

TEST(Batcher, PadWritesThePadId) {
  std::vector<Sample> samples = make_samples({2, 4});
  BatchOptions o = options(2, 8, false);
  o.pad_id = 77;
  Rows rows = rows_of(Batcher(samples, o).next());
  int pads = 0;
  for (int64_t r = 0; r < rows.b; ++r) {
    for (int64_t c = 0; c < rows.t; ++c) pads += rows.id(r, c) == 77;
  }
  EXPECT_EQ(pads, 2);
}

// Packing, checked by walking the token stream the rows make: within an
// epoch, samples follow each other whole, in some order, each once; a row
// is exactly seq_len tokens; a target is the label of the next token only
// when that token is the same sample's next one (in the same row or, at a
// row's end, the first of the next row).
struct PackedStream {
  const std::vector<Sample>& samples;
  int current = -1;  // sample being read
  int next_position = 0;
  std::vector<int> order;

  void check(const Batch& batch, int64_t seq_len) {
    Rows rows = rows_of(batch);
    ASSERT_EQ(rows.t, seq_len);
    EXPECT_EQ(batch.tokens, rows.b * seq_len);
    int64_t target_count = 0;
    for (int64_t r = 0; r < rows.b; ++r) {
      for (int64_t c = 0; c < rows.t; ++c) {
        const int64_t id = rows.id(r, c);
        ASSERT_NE(id, kPad) << "packed rows are full";
        const int s = sample_of(id), p = position_of(id);
        if (current >= 0 && next_position < static_cast<int>(samples[current].ids.size())) {
          // The open sample continues, even across a row or batch boundary.
          ASSERT_EQ(s, current) << "row " << r << " col " << c;
          ASSERT_EQ(p, next_position) << "row " << r << " col " << c;
        } else {
          ASSERT_EQ(p, 0) << "a new sample starts at its first token";
          current = s;
          order.push_back(s);
        }
        next_position = p + 1;
        // The next token of the same sample, in this row or the next.
        const bool sample_continues = next_position < static_cast<int>(samples[s].ids.size());
        const int64_t want = sample_continues ? samples[s].labels[next_position] : kIgnoreLabel;
        EXPECT_EQ(rows.target(r, c), want) << "row " << r << " col " << c;
        target_count += want != kIgnoreLabel;
      }
    }
    EXPECT_EQ(batch.target_count, target_count);
  }
};

TEST(Batcher, PackFillsRowsAndNeverPredictsAcrossSamples) {
  // Lengths chosen so samples end mid-row, fill a row exactly (8) and span
  // three rows (20).
  std::vector<Sample> samples = make_samples({5, 3, 20, 2, 8, 1, 11});
  const int total = 5 + 3 + 20 + 2 + 8 + 1 + 11;  // 50 tokens per epoch
  Batcher batcher(samples, options(2, 8, true));
  PackedStream stream{samples, -1, 0, {}};
  // Enough batches for three full epochs.
  for (int i = 0; i < (3 * total) / 16 + 1; ++i) stream.check(batcher.next(), 8);
  ASSERT_GE(stream.order.size(), 21u);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::set<int> seen(stream.order.begin() + 7 * epoch, stream.order.begin() + 7 * (epoch + 1));
    EXPECT_EQ(seen.size(), 7u) << "epoch " << epoch;
  }
}

TEST(Batcher, SameSeedSameOrderAndEachEpochReshuffles) {
  std::vector<Sample> samples = make_samples(std::vector<int>(32, 3));
  Batcher a(samples, options(4, 3, false, 11)), b(samples, options(4, 3, false, 11));
  Batcher c(samples, options(4, 3, false, 12));
  std::vector<int> order_a, order_c;
  for (int i = 0; i < 16; ++i) {  // two epochs
    Batch batch_a = a.next();
    EXPECT_TRUE(same_batch(batch_a, b.next())) << "batch " << i;
    check_padded(batch_a, samples, 3, &order_a);
    check_padded(c.next(), samples, 3, &order_c);
  }
  std::vector<int> epoch0(order_a.begin(), order_a.begin() + 32);
  std::vector<int> epoch1(order_a.begin() + 32, order_a.end());
  std::vector<int> sorted = epoch0;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 32; ++i) ASSERT_EQ(sorted[i], i) << "each sample once per epoch";
  std::sort(epoch1.begin(), epoch1.end());
  EXPECT_EQ(epoch1, sorted);
  // 32! orders: a repeat here would be a bug, not chance.
  EXPECT_NE(epoch0, std::vector<int>(order_a.begin() + 32, order_a.end()));
  EXPECT_NE(std::vector<int>(order_c.begin(), order_c.begin() + 32), epoch0);
  EXPECT_NE(epoch0, sorted) << "the order is shuffled";
  EXPECT_EQ(a.state().epoch, 2u);
  EXPECT_EQ(a.state().position, 0u);
}

TEST(Batcher, RestoreMidEpochReplaysTheSameBatches) {
  std::vector<Sample> samples = make_samples({3, 7, 4, 5, 1, 6, 2, 9, 4});
  Batcher batcher(samples, options(2, 5, false));
  for (int i = 0; i < 3; ++i) batcher.next();
  SamplerState saved = batcher.state();
  EXPECT_EQ(saved.epoch, 0u);
  EXPECT_EQ(saved.position, 6u);
  std::vector<Batch> expected;
  for (int i = 0; i < 10; ++i) expected.push_back(batcher.next());

  Batcher resumed(samples, options(2, 5, false));
  resumed.restore(saved);
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(same_batch(resumed.next(), expected[i])) << "batch " << i;
}

TEST(Batcher, RestoreMidSampleWhenPackingReplaysTheSameBatches) {
  std::vector<Sample> samples = make_samples({5, 3, 20, 2, 8, 1, 11, 6});
  Batcher batcher(samples, options(1, 7, true));
  // Walk until the state is inside a sample.
  int steps = 0;
  do {
    batcher.next();
    ASSERT_LT(++steps, 100);
  } while (batcher.state().offset == 0);
  SamplerState saved = batcher.state();
  std::vector<Batch> expected;
  for (int i = 0; i < 20; ++i) expected.push_back(batcher.next());

  Batcher resumed(samples, options(1, 7, true));
  resumed.restore(saved);
  EXPECT_EQ(resumed.state(), saved);
  for (int i = 0; i < 20; ++i)
    EXPECT_TRUE(same_batch(resumed.next(), expected[i])) << "batch " << i;
}

TEST(Batcher, RestoreIntoALaterEpoch) {
  std::vector<Sample> samples = make_samples({2, 3, 4, 5});
  Batcher batcher(samples, options(3, 4, false));
  for (int i = 0; i < 5; ++i) batcher.next();
  SamplerState saved = batcher.state();
  EXPECT_EQ(saved.epoch, 3u);
  Batch expected = batcher.next();
  Batcher fresh(samples, options(3, 4, false));
  fresh.restore(saved);
  EXPECT_TRUE(same_batch(fresh.next(), expected));
}

TEST(Batcher, RejectsBadInputAndStates) {
  EXPECT_THROW(Batcher(std::vector<Sample>{}, options(2, 4, false)), Error);
  EXPECT_THROW(Batcher(make_samples({3}), options(0, 4, false)), Error);
  EXPECT_THROW(Batcher(make_samples({3}), options(1, 1, false)), Error);
  Sample uneven = make_samples({3})[0];
  uneven.labels.pop_back();
  EXPECT_THROW(Batcher({uneven}, options(1, 4, false)), Error);
  // An empty sample would make packing loop forever.
  EXPECT_THROW(Batcher({Sample{}}, options(1, 4, true)), Error);

  Batcher batcher(make_samples({3, 4}), options(1, 4, true));
  EXPECT_THROW(batcher.restore(SamplerState{0, 2, 0}), Error);  // past the last sample
  EXPECT_THROW(batcher.restore(SamplerState{0, 0, 4}), Error);  // past every sample's end
  Batcher padded(make_samples({3, 4}), options(1, 4, false));
  EXPECT_THROW(padded.restore(SamplerState{0, 0, 1}), Error);  // offsets are for packing
}

// A state saved on other data does not fit: try_restore says why, naming
// the file and the counts, and leaves the batcher where it was.
TEST(Batcher, AStateThatDoesNotFitNamesTheFileAndLeavesTheBatcherAsItWas) {
  std::vector<WeightedSamples> sources(1);
  sources[0].samples = make_samples({3, 3});  // whichever comes first has 3 tokens
  sources[0].name = "data/train.jsonl";
  Batcher batcher(sources, options(1, 4, true));
  Batcher fresh(sources, options(1, 4, true));
  EXPECT_EQ(batcher.try_restore(SamplerState{1, 320, 0}),
            "data/train.jsonl: the sampler's position 320 of epoch 1 is beyond the 2 samples it "
            "holds now");
  EXPECT_EQ(batcher.try_restore(SamplerState{0, 1, 3}),
            "data/train.jsonl: the sampler's offset 3 is beyond the end of the sample at position "
            "1 of epoch 0 (3 tokens)");
  EXPECT_EQ(batcher.state(), SamplerState{});
  EXPECT_TRUE(same_batch(batcher.next(), fresh.next()));
  // One that fits is taken.
  EXPECT_EQ(batcher.try_restore(SamplerState{0, 1, 2}), "");
  EXPECT_EQ(batcher.state(), (SamplerState{0, 1, 2}));
  EXPECT_THROW(batcher.restore(SamplerState{0, 2, 0}), Error);
}

}  // namespace
}  // namespace lt::data
