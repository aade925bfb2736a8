// count_seq_len_cut against counts made by hand from the rows below.
#include <gtest/gtest.h>

#include "data/seq_len_cut.h"

namespace lt::data {
namespace {

// A sample of `length` tokens whose first `masked` labels are -100.
Sample row(int64_t length, int64_t masked) {
  Sample s;
  for (int64_t i = 0; i < length; ++i) {
    s.ids.push_back(static_cast<int32_t>(i + 1));
    s.labels.push_back(i < masked ? kIgnoreLabel : static_cast<int32_t>(i + 1));
  }
  return s;
}

TEST(SeqLenCut, CountsTheRowsCutAndThoseLeftWithoutATarget) {
  // At seq_len 8 a row keeps tokens 0..7, whose targets are labels 1..7.
  const std::vector<Sample> samples = {
      row(5, 0),    // not cut, trained
      row(12, 10),  // cut, first trained label 10: nothing kept
      row(12, 4),   // cut, labels 4..7 kept
      row(8, 7),    // exactly 8: not cut, label 7 kept
      row(9, 8),    // cut by one token, its only trained label (8) with it
      row(4, 4),    // not cut, but nothing trained at all
      row(3, 1),    // label 0 is never a target; 1 and 2 are
  };
  const SeqLenCut cut = count_seq_len_cut(samples, 8);
  EXPECT_EQ(cut.rows, 7);
  EXPECT_EQ(cut.rows_cut, 3);
  EXPECT_EQ(cut.cut_without_target, 2);
  EXPECT_EQ(cut.rows_with_target, 4);
  EXPECT_EQ(cut.longest, 12);
  // Long enough for every row: nothing cut; all but the untrained row keep
  // a target.
  const SeqLenCut whole = count_seq_len_cut(samples, 12);
  EXPECT_EQ(whole.rows_cut, 0);
  EXPECT_EQ(whole.rows_with_target, 6);
}

// A cut row keeps labels 1..seq_len - 1 as targets (data/batching.cpp's
// padded rows, exec/evaluate.cpp's rows): a label != -100 at seq_len or
// later is dropped. Rows that keep some targets and lose others are
// counted apart from those that keep none.
TEST(SeqLenCut, CountsTheCutRowsThatLosePartOfTheirTargets) {
  Sample masked_tail = row(10, 0);  // trained 1..5, masked 6..9: loses nothing trained
  for (size_t i = 6; i < masked_tail.labels.size(); ++i) masked_tail.labels[i] = kIgnoreLabel;
  const std::vector<Sample> samples = {
      row(12, 4),   // keeps labels 4..7, loses 8..11
      row(9, 0),    // keeps 1..7, loses label 8 by one token
      row(9, 8),    // its only trained label (8) lost: keeps none, not counted here
      row(8, 0),    // exactly 8: not cut
      masked_tail,  // cut, but past 8 only masked labels
  };
  const SeqLenCut cut = count_seq_len_cut(samples, 8);
  EXPECT_EQ(cut.rows_cut, 4);
  EXPECT_EQ(cut.cut_without_target, 1);
  EXPECT_EQ(cut.cut_losing_targets, 2);
  EXPECT_EQ(count_seq_len_cut(samples, 12).cut_losing_targets, 0);
}

}  // namespace
}  // namespace lt::data
