#include "train/run_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "core/shell_syntax.h"
#include "data/json_fields.h"
#include "data/seq_len_cut.h"
#include "models/config.h"
#include "models/context_limit.h"

namespace lt::train {

namespace fs = std::filesystem;

namespace {

// ", line L," for the longest row when its file line is known.
std::string longest_at(const data::SeqLenCut& cut) {
  return cut.longest_line > 0 ? fmt::format(", line {},", cut.longest_line) : "";
}

// What to do about rows train.seq_len cuts: raise it, but not past the
// model's context, which a set length is refused past (it suggested
// lengths the run refused); at the context already, shorten or split the
// rows. Packing (training rows only: evaluation rows are always cut) keeps
// a long row whole across rows. `with_longest`: say the longest row.
std::string seq_len_advice(const data::SeqLenCut& cut, const models::ModelConfig* model,
                           int64_t seq_len, bool trains, bool with_longest) {
  const std::string longest =
      with_longest ? fmt::format(" (the longest row{} has {} tokens)", longest_at(cut), cut.longest)
                   : "";
  const std::string pack = trains ? ", or train packed (data.pack: true)" : "";
  const int64_t context = model ? model->exact_context() : 0;
  if (context > 0 && seq_len >= context) {
    return fmt::format(
        "train.seq_len is the model's context already ({} tokens, {}): shorten or split the "
        "longer rows{}{}",
        context, model->exact_context_key(), pack, longest);
  }
  if (context > 0 && cut.longest > context) {
    return fmt::format(
        "raise train.seq_len, up to the model's context of {} tokens ({}){}; rows longer than "
        "that must be shortened or split{}",
        context, model->exact_context_key(), longest, pack);
  }
  return "raise train.seq_len" + longest;
}

// Padded training rows and every evaluation row (of eval_loss, when the run
// evaluates) are a sample's first train.seq_len tokens (packing carries the
// rest into the next row): says how many rows that cuts, and how many of
// those it leaves nothing to train on or score. Training rows of which
// none keeps a trained token are refused: the run would take steps that
// compute nothing and learn nothing.
void report_seq_len_cut(const TrainConfig& c, const std::vector<data::Sample>& samples,
                        const std::string& file, bool trains, const models::ModelConfig* model,
                        ProgressBar* log) {
  if (trains ? c.data.pack : c.train.eval_every <= 0) return;
  const int64_t seq_len = c.train.seq_len;
  const data::SeqLenCut cut = data::count_seq_len_cut(samples, seq_len);
  // A row's first token is predicted by none: a one-token row, or one whose
  // only label != -100 is its first, trains nothing whatever the length.
  const std::string no_first = fmt::format(
      "{} of {} row{} {} no trained token after {} first (labels != -100 past position 0; a "
      "row's first token is never predicted)",
      cut.whole_without_target, cut.rows, cut.rows == 1 ? "" : "s",
      cut.whole_without_target == 1 ? "has" : "have",
      cut.whole_without_target == 1 ? "its" : "their");
  if (trains && cut.rows_with_target == 0) {
    if (cut.cut_without_target == 0)
      fail(file, ": no row has a token to train on: ", no_first, "; the run could learn nothing");
    fail(file, ": no row keeps a trained token (label != -100) within train.seq_len ", seq_len,
         " (", cut.rows_cut, " of ", cut.rows, " rows ", cut.rows_cut == 1 ? "is" : "are",
         " longer and ", cut.rows_cut == 1 ? "was" : "were", " cut; the longest", longest_at(cut),
         " has ", cut.longest, " tokens", cut.whole_without_target > 0 ? "; " + no_first : "",
         "): the run could learn nothing; ",
         seq_len_advice(cut, model, seq_len, trains, /*with_longest=*/false));
  }
  if (trains && cut.whole_without_target > 0)
    log->message(fmt::format("data: {}: {}; their steps train on the other rows", file, no_first));
  if (cut.rows_cut == 0) return;
  const char* use = trains ? "trained" : "scored by eval_loss";
  std::string line =
      fmt::format("data: {} of {} rows of {} {} longer than train.seq_len {} and {} cut",
                  cut.rows_cut, cut.rows, file, cut.rows_cut == 1 ? "is" : "are", seq_len,
                  cut.rows_cut == 1 ? "was" : "were");
  if (cut.cut_without_target > 0) {
    const bool one = cut.cut_without_target == 1;
    line += fmt::format("; {} of them {} no {} token (all of {} lie past token {})",
                        cut.cut_without_target, one ? "keeps" : "keep",
                        trains ? "trained" : "scored", one ? "its" : "theirs", seq_len);
  }
  // Padded rows and evaluation rows keep a sample's first seq_len tokens:
  // every label != -100 past them is dropped (data/seq_len_cut.h), the end
  // of an answer most often.
  if (cut.cut_losing_targets > 0) {
    const bool one = cut.cut_losing_targets == 1;
    line += fmt::format("; {} of them {} part of {} {} tokens (those past token {})",
                        cut.cut_losing_targets, one ? "loses" : "lose", one ? "its" : "their",
                        trains ? "trained" : "scored", seq_len);
  }
  if (cut.cut_without_target > 0 || cut.cut_losing_targets > 0) {
    line += ": " + seq_len_advice(cut, model, seq_len, trains, /*with_longest=*/true);
  } else {
    line += fmt::format(" (their tokens past {} are not {})", seq_len, use);
  }
  log->message(line);
}

}  // namespace

int64_t rows_per_epoch(const std::vector<data::WeightedSamples>& sources, int64_t seq_len,
                       bool pack) {
  int64_t rows = 0, tokens = 0;
  for (const auto& source : sources) {
    rows += static_cast<int64_t>(source.samples.size());
    for (const auto& s : source.samples) tokens += static_cast<int64_t>(s.ids.size());
  }
  return pack ? (tokens + seq_len - 1) / seq_len : rows;
}

fs::path tokenizer_dir_of(const TrainConfig& c) {
  return fs::path(c.data.tokenizer.empty() ? c.model.path : c.data.tokenizer);
}

std::vector<data::DataSource> data_sources(const TrainConfig& c) {
  std::vector<data::DataSource> sources = c.data.sources;
  if (sources.empty()) sources.push_back(data::DataSource{c.data.path, "", 1.0, "", "train"});
  for (data::DataSource& s : sources) {
    if (s.format.empty()) s.format = c.data.format;
    if (s.template_name.empty()) s.template_name = c.data.template_name;
  }
  return sources;
}

namespace {

// How `source` is read, with the config's other data keys. `format_key`:
// the key its errors name for its format (data.sources[1].format).
data::DatasetOptions dataset_options(const TrainConfig& c, const data::DataSource& source,
                                     const std::string& format_key = "data.format") {
  data::DatasetOptions options;
  options.settings.format = format_key;
  options.format = source.format;
  options.template_name = source.template_name;
  options.train_on_prompt = c.data.train_on_prompt;
  options.strict = c.data.strict;
  options.prompt_field = c.data.prompt_field;
  options.response_field = c.data.response_field;
  options.tokenizer_path = tokenizer_dir_of(c);  // tokenizer_config.json: template and EOS
  return options;
}

}  // namespace

std::string source_format(const TrainConfig& c, const data::DataSource& source) {
  return data::detect_format(source.path, dataset_options(c, source));
}

namespace {

// data.eval_path as a source, in data.format and data.template.
data::DataSource eval_path_source(const TrainConfig& c) {
  return {c.data.eval_path, c.data.format, 1.0, c.data.template_name, "eval"};
}

// What in the run's data is text, for the error when no tokenizer loads
// ("data.format alpaca", "data.sources[1] (format auto: FILE reads as
// sharegpt)"), or "" when every file holds token ids. data.format auto is
// told from the file's first rows, as load_dataset (and eval) tell it;
// `*auto_found_tokens` says whether it found token ids anywhere.
std::string text_needing_a_tokenizer(const TrainConfig& c, bool* auto_found_tokens) {
  if (!c.data.eval_task.empty()) return "data.eval_task " + c.data.eval_task;
  auto text = [&](const data::DataSource& source, const std::string& key) -> std::string {
    const std::string format = source_format(c, source);
    const bool detected = format != source.format;
    if (format == "tokens") {
      *auto_found_tokens = *auto_found_tokens || detected;
      return "";
    }
    if (!detected) return fmt::format("{} {}", key, format);
    return fmt::format("{} {} ({} reads as {})", key, source.format, source.path, format);
  };
  if (!c.data.eval_path.empty()) {
    if (std::string t = text(eval_path_source(c), "data.format"); !t.empty()) return t;
  }
  const std::vector<data::DataSource> sources = data_sources(c);
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string key =
        c.data.sources.empty() ? "data.format" : fmt::format("data.sources[{}] format", i);
    if (std::string t = text(sources[i], key); !t.empty()) return t;
  }
  return "";
}

}  // namespace

std::optional<data::Tokenizer> load_run_tokenizer(const TrainConfig& c, ProgressBar& log) {
  const fs::path folder = tokenizer_dir_of(c);
  const std::string chosen_by =
      c.data.tokenizer.empty() ? "model.path (data.tokenizer is unset)" : "data.tokenizer";
  bool auto_found_tokens = false;
  const std::string text = text_needing_a_tokenizer(c, &auto_found_tokens);
  std::optional<data::Tokenizer> tokenizer;
  if (!text.empty()) {
    tokenizer = data::load_tokenizer_for(folder, text, chosen_by);
  } else if (auto_found_tokens && data::Tokenizer::found_at(folder)) {
    // Token ids need none. One there is still read when data.format auto
    // found them: the greedy sample at the end of the run decodes with it.
    tokenizer = data::load_tokenizer_for(folder, "the sample at the end of the run", chosen_by);
  }
  if (!tokenizer) return std::nullopt;
  // Checked before the data is read. A config.json that cannot be read is
  // left to the model's own load, which says what is wrong with it.
  const std::string config_file = models::model_config_file(c.model.path);
  int64_t vocab_size = 0;
  try {
    vocab_size = models::ModelConfig::from_file(config_file).vocab_size;
  } catch (const Error&) {
    return tokenizer;
  }
  const std::string warning = data::check_tokenizer_runs_model(*tokenizer, vocab_size, config_file);
  if (!warning.empty()) log.message(warning);
  return tokenizer;
}

std::vector<data::Sample> load_samples(const TrainConfig& c, const data::DataSource& source,
                                       const data::Tokenizer* tokenizer, ProgressBar* log,
                                       const std::string& format_key,
                                       const models::ModelConfig* model) {
  const data::DatasetOptions options = dataset_options(c, source, format_key);
  data::DatasetReport report;
  auto samples = data::load_dataset(source.path, tokenizer, options, &report);
  // The evaluation set's line is marked: data.eval_path may be the training
  // file, whose two lines would otherwise read alike.
  log->message(fmt::format("{}: {} sample{} from {} row{} of {} (format {}{}){}",
                           source.split == "eval" ? "data (eval)" : "data", report.samples,
                           report.samples == 1 ? "" : "s", report.rows, report.rows == 1 ? "" : "s",
                           source.path, report.format,
                           report.template_name.empty() ? "" : ", template " + report.template_name,
                           report.skipped ? fmt::format(", {} skipped", report.skipped) : ""));
  if (!report.warning.empty()) log->message("  warning: " + report.warning);
  constexpr int64_t kShown = 5;
  for (size_t i = 0; i < report.problems.size() && i < kShown; ++i) {
    log->message("  skipped: " + report.problems[i]);
  }
  if (report.skipped > kShown) {
    log->message(fmt::format(
        "  ... and {} more skipped (lazytrain tokenize --tokenizer MODEL --data {}, with the run's "
        "--format and --template, lists up to {})",
        report.skipped - kShown, shell_word(source.path), data::kMaxReportedProblems));
  }
  report_seq_len_cut(c, samples, source.path, source.split != "eval", model, log);
  return samples;
}

namespace {

// Whether `a` and `b` name one file (through links and relative paths).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  const bool same = fs::equivalent(a, b, error);
  return !error && same;
}

// An evaluation file (data.eval_path, or an entry of data.sources with
// split eval) that is also a training source makes eval_loss measure rows
// the run trains on: said once per such file, naming both keys.
void warn_eval_on_training_rows(const TrainConfig& c, ProgressBar* log) {
  const std::vector<data::DataSource> sources = data_sources(c);
  auto key_of = [&](size_t i) {
    return c.data.sources.empty() ? std::string("data.path") : fmt::format("data.sources[{}]", i);
  };
  std::vector<std::pair<std::string, std::string>> evaluated;  // (key, path)
  if (!c.data.eval_path.empty()) evaluated.emplace_back("data.eval_path", c.data.eval_path);
  for (size_t i = 0; i < sources.size(); ++i) {
    if (sources[i].split == "eval") evaluated.emplace_back(key_of(i), sources[i].path);
  }
  for (const auto& [key, path] : evaluated) {
    for (size_t i = 0; i < sources.size(); ++i) {
      if (sources[i].split == "eval" || !same_file(path, sources[i].path)) continue;
      log->message(fmt::format(
          "data: warning: {} {} is the same file as {} {}: the evaluation then measures rows "
          "the run trains on, not held-out ones (hold rows out with data.eval_split, or "
          "evaluate another file)",
          key, path, key_of(i), sources[i].path));
      break;
    }
  }
}

}  // namespace

TrainingData load_training_data(const TrainConfig& c, const data::Tokenizer* tokenizer,
                                ProgressBar* log, const models::ModelConfig* model) {
  TrainingData d;
  if (!c.data.eval_path.empty()) {
    d.eval.push_back({load_samples(c, eval_path_source(c), tokenizer, log, "data.format", model),
                      1.0, c.data.eval_path});
  }
  std::vector<data::WeightedSamples> held_out;
  const std::vector<data::DataSource> sources = data_sources(c);
  for (size_t i = 0; i < sources.size(); ++i) {
    const data::DataSource& source = sources[i];
    // An entry of data.sources reads in its own format, else data.format's.
    const std::string format_key =
        c.data.sources.empty() ? "data.format" : fmt::format("data.sources[{}].format", i);
    std::vector<data::Sample> samples = load_samples(c, source, tokenizer, log, format_key, model);
    if (source.split == "eval") {
      d.eval.push_back({std::move(samples), source.weight, source.path});
      continue;
    }
    std::vector<data::Sample> eval;
    const size_t rows = samples.size();
    data::split_off_held_out(samples, eval, c.data.eval_split, c.train.seed);
    if (c.data.eval_split > 0) {
      log->message(fmt::format("data: data.eval_split {} holds out {} of {} samples of {}",
                               c.data.eval_split, eval.size(), rows, source.path));
      LT_CHECK(!samples.empty(), source.path, ": data.eval_split ", c.data.eval_split,
               " held out every one of its ", rows, " samples; nothing is left to train on");
      held_out.push_back({std::move(eval), 1.0, source.path + " (held out)"});
    }
    d.train.push_back({std::move(samples), source.weight, source.path});
  }
  warn_eval_on_training_rows(c, log);
  for (auto& part : held_out) d.eval.push_back(std::move(part));
  // data.eval_split holds out each sample by chance (data/mixture.h): a
  // small file may give none, and then no step logged an eval_loss, said
  // only as "holds out 0 of N".
  const bool evaluates_some = std::any_of(d.eval.begin(), d.eval.end(),
                                          [](const auto& part) { return !part.samples.empty(); });
  if (c.data.eval_split > 0 && c.train.eval_every > 0 && !evaluates_some) {
    log->message(fmt::format(
        "data: warning: data.eval_split {} held out no sample, so train.eval_every {} evaluates "
        "nothing and no step logs an eval_loss: raise data.eval_split, or name held-out rows "
        "with data.eval_path",
        c.data.eval_split, c.train.eval_every));
  }
  // A step draws train.batch_size rows whatever the data holds.
  const int64_t rows = rows_per_epoch(d.train, c.train.seq_len, c.data.pack);
  if (rows < c.train.batch_size) {
    log->message(fmt::format(
        "data: the training data makes {} row{}{}, fewer than train.batch_size {}: each step "
        "repeats rows",
        rows, rows == 1 ? "" : "s",
        c.data.pack ? fmt::format(" packed to train.seq_len {}", c.train.seq_len) : "",
        c.train.batch_size));
  }
  if (d.train.size() > 1) {
    double total = 0;
    for (const auto& s : d.train) total += s.weight;
    std::string parts;
    for (const auto& s : d.train) {
      parts += fmt::format("{}{} {:.3g} ({} samples)", parts.empty() ? "" : ", ", s.name,
                           s.weight / total, s.samples.size());
    }
    log->message(fmt::format("data: {} sources drawn by weight: {}", d.train.size(), parts));
  }
  return d;
}

namespace {

// The tokenizer.json a run reads: data.tokenizer's file, or its (or the
// model's) folder's; "" when there is none (another kind of tokenizer).
fs::path tokenizer_json_of(const TrainConfig& c) {
  const fs::path named = tokenizer_dir_of(c);
  const fs::path file = fs::is_directory(named) ? named / "tokenizer.json" : named;
  return file.extension() == ".json" && fs::is_regular_file(file) ? file : fs::path();
}

// A resume continues the checkpoint's weights with the checkpoint's token
// ids: another model shape, or another tokenizer, under the same step
// would train weights on ids they never meant (the run logged loss 0 and
// saved the toy tokenizer beside a Qwen model). Refused, with the way to
// start from the checkpoint's weights instead.
void refuse_another_model_or_tokenizer(const TrainConfig& c, const fs::path& resume_dir) {
  const std::string start_over = fmt::format(
      "; to train the checkpoint's weights with it, start a new run from them (model.path: {}, "
      "no --resume)",
      resume_dir.string());
  const fs::path saved_config = resume_dir / "config.json";
  if (fs::is_regular_file(saved_config)) {
    const models::ModelConfig saved = models::ModelConfig::from_file(saved_config);
    const models::ModelConfig now =
        models::ModelConfig::from_file(fs::path(c.model.path) / "config.json");
    // The fields that shape the weights, named as config.json names them.
    std::vector<std::string> differ;
    const auto compare = [&](const char* key, const auto& here, const auto& there) {
      if (here != there) differ.push_back(fmt::format("{} {} against {}", key, here, there));
    };
    compare("model_type", std::string(now.model_type()), std::string(saved.model_type()));
    compare("hidden_size", now.hidden_size, saved.hidden_size);
    compare("intermediate_size", now.intermediate_size, saved.intermediate_size);
    compare("num_hidden_layers", now.num_hidden_layers, saved.num_hidden_layers);
    compare("num_attention_heads", now.num_attention_heads, saved.num_attention_heads);
    compare("num_key_value_heads", now.num_key_value_heads, saved.num_key_value_heads);
    compare("head_dim", now.head_dim, saved.head_dim);
    compare("vocab_size", now.vocab_size, saved.vocab_size);
    compare("tie_word_embeddings", now.tie_word_embeddings, saved.tie_word_embeddings);
    LT_CHECK(differ.empty(), "--resume ", resume_dir.string(), ": model.path '", c.model.path,
             "' is another model than the checkpoint's (its config.json against the "
             "checkpoint's: ",
             fmt::format("{}", fmt::join(differ, ", ")),
             "); a resume continues the checkpoint's own weights", start_over);
  }
  const fs::path saved_tokenizer = resume_dir / "tokenizer.json";
  const fs::path tokenizer = tokenizer_json_of(c);
  if (fs::is_regular_file(saved_tokenizer) && !tokenizer.empty()) {
    LT_CHECK(data::read_whole_file(saved_tokenizer.string()) ==
                 data::read_whole_file(tokenizer.string()),
             "--resume ", resume_dir.string(), ": the tokenizer ", tokenizer.string(),
             " (data.tokenizer, else model.path's) is not the one the checkpoint was trained with "
             "(its tokenizer.json)",
             start_over);
  }
}

}  // namespace

std::string lr_change_at_resume(const optim::ScheduleOptions& checkpoint,
                                const optim::ScheduleOptions& run, int64_t step) {
  double was = 0, is = 0;
  try {
    was = optim::lr_at(checkpoint, step);
    is = optim::lr_at(run, step);
  } catch (const Error&) {
    return "";  // a saved config read unchecked, whose schedule no run takes: nothing to compare
  }
  if (std::abs(is - was) <= 1e-9 * std::max(std::abs(is), std::abs(was))) return "";
  return fmt::format(
      "resume: step {}'s learning rate is {:.4g} under this run's schedule ({}, train.steps {}), "
      "{} from {:.4g} where the checkpoint's (train.steps {}) had it{}",
      step + 1, is, run.name, run.total_steps, is > was ? "up" : "down", was,
      checkpoint.total_steps,
      is > was ? fmt::format("; sched.name constant with optim.lr {:.4g} would keep it there", was)
               : "");
}

ResumeChanges compare_with_checkpoint(const TrainConfig& c, const fs::path& resume_dir,
                                      ProgressBar& log) {
  if (!resume_dir.empty()) refuse_another_model_or_tokenizer(c, resume_dir);
  ResumeChanges changes;
  const fs::path saved_path = resume_dir / "train_config.yaml";
  if (resume_dir.empty() || !fs::is_regular_file(saved_path)) return changes;
  TrainConfig saved = read_train_config_unchecked(saved_path);
  if (saved.train.steps != c.train.steps || saved.sched.name != c.sched.name)
    changes.schedule = saved.lr_schedule();
  const bool dtype_auto = c.train.dtype == "auto" || saved.train.dtype == "auto";
  for (const std::string& change : config_differences(saved, c)) {
    // Extending the run, or writing it elsewhere, is what a resume is for;
    // but a schedule that spans train.steps is no longer the one the
    // checkpoint's steps followed.
    if (change.rfind("train.steps:", 0) == 0) {
      if (c.sched.name != "constant")
        log.message(fmt::format(
            "resume: {} (the checkpoint's -> this run's) {} the "
            "learning-rate schedule (sched.name {}) over the new length",
            change, c.train.steps > saved.train.steps ? "stretches" : "compresses", c.sched.name));
      continue;
    }
    if (change.rfind("out.", 0) == 0) continue;
    if (dtype_auto && change.rfind("train.dtype:", 0) == 0) continue;
    // A model of the same shape is let through (refuse_another_model_or_tokenizer),
    // but it does not change what trains: said, so it is not taken for a switch.
    if (change.rfind("model.path:", 0) == 0) {
      log.message("resume: " + change +
                  " (the checkpoint's -> this run's): the weights go on from the checkpoint's; "
                  "model.path gives no weights to a resume (to train another model's, start a "
                  "new run without --resume)");
      continue;
    }
    log.message("resume: " + change + " (the checkpoint's -> this run's)");
  }
  changes.optimizer =
      saved.optim.name != c.optim.name ||
      (c.optim.name == "adamw8bit" && (saved.optim.block_size != c.optim.block_size ||
                                       saved.optim.min_8bit_numel != c.optim.min_8bit_numel));
  const auto& a = saved.data;
  const auto& b = c.data;
  changes.data = a.path != b.path || a.sources != b.sources || a.eval_split != b.eval_split ||
                 a.format != b.format || a.template_name != b.template_name ||
                 a.tokenizer != b.tokenizer || a.train_on_prompt != b.train_on_prompt ||
                 a.pack != b.pack || a.prompt_field != b.prompt_field ||
                 a.response_field != b.response_field || saved.train.seed != c.train.seed;
  return changes;
}

namespace {

// Where a sampler stands, for messages: "position 320 of epoch 0", "draw
// 1234" (a mixture), with ", 5 tokens into its sample" when packing.
std::string sampler_position(const data::SamplerState& state) {
  std::string where = state.draws > 0
                          ? fmt::format("draw {}", state.draws)
                          : fmt::format("position {} of epoch {}", state.position, state.epoch);
  if (state.offset > 0) where += fmt::format(", {} tokens into its sample", state.offset);
  return where;
}

}  // namespace

bool samples_changed_since(const TrainConfig& c, const fs::path& checkpoint,
                           const TrainerState& saved,
                           const std::vector<data::SourceFingerprint>& now, ProgressBar& log) {
  if (saved.data.empty()) {
    log.message(fmt::format(
        "resume: {} records no fingerprint of its data (saved by an earlier version), so a "
        "change to the data's rows since is noticed only when the sampler's position lies past "
        "them",
        (checkpoint / "trainer_state.json").string()));
    return false;
  }
  std::vector<std::string> lines;
  if (saved.data.size() != now.size()) {
    lines.push_back(
        fmt::format("the checkpoint's sampler walked {} training source{}, this run's {}",
                    saved.data.size(), saved.data.size() == 1 ? "" : "s", now.size()));
  } else {
    for (size_t i = 0; i < now.size(); ++i) {
      const data::SourceFingerprint& a = saved.data[i];
      const data::SourceFingerprint& b = now[i];
      if (a.same_samples(b)) continue;
      const std::string key = c.data.sources.empty()
                                  ? "data.path " + b.source
                                  : fmt::format("data.sources[{}] {}", i, b.source);
      std::string how;
      if (a.samples != b.samples) {
        how = fmt::format("{} sample{} now, {} when the checkpoint was saved", b.samples,
                          b.samples == 1 ? "" : "s", a.samples);
      } else if (a.any_order == b.any_order) {
        how = fmt::format("the same {} samples as when the checkpoint was saved, in another order",
                          b.samples);
      } else {
        how = fmt::format(
            "its samples changed since the checkpoint (the same count, {}): its rows, or how they "
            "are tokenized",
            b.samples);
      }
      lines.push_back(key + ": " + how);
    }
  }
  if (lines.empty()) return false;
  for (const std::string& line : lines) log.message("resume: " + line);
  log.message(fmt::format(
      "resume: the checkpoint's sampler ({}) counts into the samples it was saved with, so {}",
      sampler_position(saved.sampler), kReadingStartsOver));
  return true;
}

// config.json's dropout rates (GPT-2's attn_pdrop 0.1, a Llama's
// attention_dropout) above 0: this program trains without dropout, which a
// user of transformers' Trainer would otherwise assume. The note, or "".
std::string dropout_not_applied(const std::string& config_json) {
  nlohmann::json j;
  try {
    std::ifstream in(config_json);
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return "";  // the model's own load says what is wrong with it
  }
  std::vector<std::string> set;
  if (!j.is_object()) return "";
  for (const auto& [key, value] : j.items()) {
    const bool rate = key.find("dropout") != std::string::npos || key.ends_with("_pdrop");
    if (rate && value.is_number() && value.get<double>() > 0)
      set.push_back(fmt::format("{} {}", key, value.get<double>()));
  }
  if (set.empty()) return "";
  return fmt::format("note: {} sets {}; this program trains without dropout", config_json,
                     fmt::join(set, ", "));
}

// train.seq_len left at its default (512) for a model whose context is
// shorter (a small model's 64 positions) runs at the model's context,
// saying so; one set anywhere is refused past it (resolve_run). Returns
// the note, or "".
std::string fit_default_seq_len(TrainConfig& c) {
  if (c.key_origins.count("train.seq_len") > 0) return "";
  int64_t context = 0;
  std::string key;
  try {
    const auto model = models::ModelConfig::from_file(models::model_config_file(c.model.path));
    context = model.exact_context();
    key = model.exact_context_key();
  } catch (const Error&) {
    return "";  // the model's own load says what is wrong with it
  }
  if (context <= 0 || c.train.seq_len <= context) return "";
  const std::string note = fmt::format(
      "train.seq_len {} (the default) is past the model's context of {} tokens ({}): "
      "it runs at {}",
      c.train.seq_len, context, key, context);
  c.train.seq_len = context;
  return note;
}

}  // namespace lt::train
