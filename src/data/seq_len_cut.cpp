#include "data/seq_len_cut.h"

#include <algorithm>

namespace lt::data {

SeqLenCut count_seq_len_cut(const std::vector<Sample>& samples, int64_t seq_len) {
  SeqLenCut cut;
  for (const Sample& s : samples) {
    const auto length = static_cast<int64_t>(s.ids.size());
    const int64_t kept = std::min({length, seq_len, static_cast<int64_t>(s.labels.size())});
    bool has_target = false;
    for (int64_t i = 1; i < kept && !has_target; ++i) has_target = s.labels[i] != kIgnoreLabel;
    bool loses_target = false;
    for (int64_t i = kept; i < static_cast<int64_t>(s.labels.size()) && !loses_target; ++i)
      loses_target = s.labels[i] != kIgnoreLabel;
    ++cut.rows;
    cut.rows_cut += length > seq_len;
    cut.cut_without_target += length > seq_len && !has_target;
    cut.cut_losing_targets += length > seq_len && has_target && loses_target;
    cut.rows_with_target += has_target;
    cut.whole_without_target += length <= seq_len && !has_target;
    if (length > cut.longest) {
      cut.longest = length;
      cut.longest_line = s.line;
    }
  }
  return cut;
}

}  // namespace lt::data
