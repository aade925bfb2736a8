#pragma once
// `lazytrain tokenize --data FILE`: a dataset's first rows as training reads
// them (format, chat template, labels), with the trained tokens marked, so
// that what a fine-tune learns from can be checked before it runs.
#include <cstdint>
#include <string>

#include "data/tokenizer.h"

namespace lt::cli {

struct TokenizeDataOptions {
  std::string tokenizer;  // the folder or file the tokenizer came from (its template)
  std::string data;
  std::string format = "auto";
  std::string template_name = "auto";
  std::string prompt_field, response_field;
  bool train_on_prompt = false;
  int64_t rows = 3;
  // > 0: each row as train.seq_len cuts a padded row (data.pack false) and
  // evaluation reads it: its first seq_len tokens, the cut counted.
  int64_t seq_len = 0;
  bool json = false;  // one {"line", "ids", "labels"} line a sample
};

// Prints the report (format, template, rows read and skipped, the first
// problems) to stderr and the first `rows` samples to stdout: each as
// "FILE:LINE: N tokens, M trained" and its text, the trained runs green on
// a terminal and between ⟦ and ⟧ otherwise.
void show_dataset_rows(const data::Tokenizer& tokenizer, const TokenizeDataOptions& options);

}  // namespace lt::cli
