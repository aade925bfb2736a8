#pragma once
// What cutting samples at a row length (train.seq_len, eval --seq-len)
// leaves to train on. Padded batches and evaluation cut each sample to its
// first seq_len tokens, whose targets are labels[1 .. seq_len - 1] (a row
// predicts token i + 1 from tokens 0..i); packing cuts nothing (a long
// sample continues in the next row).
#include <cstdint>
#include <vector>

#include "data/batching.h"

namespace lt::data {

struct SeqLenCut {
  int64_t rows = 0;                // samples looked at
  int64_t rows_cut = 0;            // longer than seq_len
  int64_t cut_without_target = 0;  // of rows_cut, those left with no trained target
  // Of rows_cut, those that keep a trained target but lose others: a label
  // != -100 at position seq_len or later, which no cut row predicts (the
  // end of an answer).
  int64_t cut_losing_targets = 0;
  int64_t rows_with_target = 0;  // samples, cut or not, that keep a trained target
  // Samples not cut that have no trained target all the same: one token
  // long, or their only label != -100 at position 0, which no row predicts.
  int64_t whole_without_target = 0;
  int64_t longest = 0;       // tokens of the longest sample
  int64_t longest_line = 0;  // its row's line in its file (Sample::line; 0: not from a file)
};

SeqLenCut count_seq_len_cut(const std::vector<Sample>& samples, int64_t seq_len);

}  // namespace lt::data
