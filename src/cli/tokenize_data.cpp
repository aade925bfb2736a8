#include "cli/tokenize_data.h"

#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string_view>
#include <vector>

#include "data/dataset.h"
#include "data/seq_len_cut.h"

namespace lt::cli {

namespace {

// The sample's text, its trained runs between `open` and `close`.
std::string marked_text(const data::Tokenizer& tokenizer, const data::Sample& sample,
                        std::string_view open, std::string_view close) {
  std::string text;
  size_t k = 0;
  while (k < sample.ids.size()) {
    const bool trained = sample.labels[k] != data::kIgnoreLabel;
    std::vector<uint32_t> run;
    for (; k < sample.ids.size() && (sample.labels[k] != data::kIgnoreLabel) == trained; ++k) {
      run.push_back(static_cast<uint32_t>(sample.ids[k]));
    }
    if (trained) text += open;
    text += tokenizer.decode(run);
    if (trained) text += close;
  }
  return text;
}

int64_t trained_tokens(const data::Sample& sample) {
  return std::count_if(sample.labels.begin(), sample.labels.end(),
                       [](int32_t l) { return l != data::kIgnoreLabel; });
}

// How many rows a cut at seq_len shortens, and what they lose, as train
// counts them (data/seq_len_cut.h).
std::string cut_line(const std::vector<data::Sample>& samples, int64_t seq_len) {
  const data::SeqLenCut cut = data::count_seq_len_cut(samples, seq_len);
  return fmt::format(
      "--seq-len {}: {} of {} rows longer and cut ({} keep no trained token, {} lose part of "
      "theirs); the longest has {} tokens",
      seq_len, cut.rows_cut, cut.rows, cut.cut_without_target, cut.cut_losing_targets, cut.longest);
}

}  // namespace

void show_dataset_rows(const data::Tokenizer& tokenizer, const TokenizeDataOptions& options) {
  data::DatasetOptions dataset;
  dataset.format = options.format;
  dataset.template_name = options.template_name;
  dataset.train_on_prompt = options.train_on_prompt;
  dataset.prompt_field = options.prompt_field;
  dataset.response_field = options.response_field;
  dataset.settings = data::kCommandOptions;
  dataset.tokenizer_path = options.tokenizer;
  dataset.accept_mostly_bad = true;  // the listing is what a broken file needs
  data::DatasetReport report;
  const std::vector<data::Sample> samples =
      data::load_dataset(options.data, &tokenizer, dataset, &report);
  fmt::print(stderr, "{}: {} sample{} from {} row{} (format {}{}{}), {} skipped\n", options.data,
             report.samples, report.samples == 1 ? "" : "s", report.rows,
             report.rows == 1 ? "" : "s", report.format,
             report.template_name.empty() ? "" : ", template ", report.template_name,
             report.skipped);
  if (!report.warning.empty()) fmt::print(stderr, "  warning: {}\n", report.warning);
  for (const std::string& problem : report.problems) fmt::print(stderr, "  skipped: {}\n", problem);
  const auto listed = static_cast<int64_t>(report.problems.size());
  if (report.skipped > listed) {
    fmt::print(stderr, "  ... and {} more skipped (the first {} are listed)\n",
               report.skipped - listed, listed);
  }
  if (options.seq_len > 0) fmt::print(stderr, "{}\n", cut_line(samples, options.seq_len));
  const bool terminal = isatty(STDOUT_FILENO) != 0;
  const size_t shown = static_cast<size_t>(std::max<int64_t>(options.rows, 0));
  for (size_t i = 0; i < std::min(shown, samples.size()); ++i) {
    const data::Sample& whole = samples[i];
    const bool cut =
        options.seq_len > 0 && static_cast<int64_t>(whole.ids.size()) > options.seq_len;
    data::Sample sample = whole;
    if (cut) {
      sample.ids.resize(static_cast<size_t>(options.seq_len));
      sample.labels.resize(static_cast<size_t>(options.seq_len));
    }
    const auto past = static_cast<int64_t>(whole.ids.size() - sample.ids.size());
    const int64_t trained_past = trained_tokens(whole) - trained_tokens(sample);
    if (options.json) {
      nlohmann::json row{{"line", sample.line}, {"ids", sample.ids}, {"labels", sample.labels}};
      if (cut) row["tokens_cut"] = past;
      fmt::print("{}\n", row.dump());
      continue;
    }
    fmt::print("{}:{}: {} tokens, {} trained{}\n{}\n\n", options.data, sample.line,
               sample.ids.size(), trained_tokens(sample),
               cut ? fmt::format(" (cut at --seq-len {}: {} more tokens, {} of them trained, not "
                                 "read)",
                                 options.seq_len, past, trained_past)
                   : std::string(),
               terminal ? marked_text(tokenizer, sample, "\x1b[32m", "\x1b[0m")
                        : marked_text(tokenizer, sample, "⟦", "⟧"));
  }
}

}  // namespace lt::cli
