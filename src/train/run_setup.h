#pragma once
// The start of a run, before its plan: the data as train reads it and what
// a resume changes from the checkpoint's own config (the weights:
// train/weights_source.h).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/sample_fingerprint.h"
#include "data/tokenizer.h"
#include "models/causal_lm.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/progress.h"

namespace lt::train {

// data.tokenizer, else model.path.
std::filesystem::path tokenizer_dir_of(const TrainConfig& c);

// data.sources as the run reads them: data.path as one source of weight 1,
// and every entry's empty format or template filled from data.format and
// data.template.
std::vector<data::DataSource> data_sources(const TrainConfig& c);

// The format `source` is read in: its own, or when that is auto what its
// first rows say (as load_samples tells it).
std::string source_format(const TrainConfig& c, const data::DataSource& source);

// The tokenizer the run reads from data.tokenizer, else model.path. Data
// in a text format (data.format auto telling it from the file's first
// rows, as eval does) or data.eval_task needs one: when none loads, the
// error names what needs it and the key that chose the folder. Token ids
// need none (nullopt); when data.format auto found them, the folder's
// tokenizer is still read if it has one, for the sample at the end. A
// tokenizer read is checked against model.path's config.json as generate
// and eval check theirs (data::check_tokenizer_runs_model): another model's
// is refused, and added tokens past the embedding's rows are a warning on
// `log`.
std::optional<data::Tokenizer> load_run_tokenizer(const TrainConfig& c, ProgressBar& log);

// The samples of `source` read with the config's other data keys; one line
// on `log` says how many, in which format and template, and what was
// skipped, and one how many rows train.seq_len cuts (padded training rows
// and evaluation rows), if any. Training rows none of which keeps a trained
// token within train.seq_len are refused, naming the file.
// `format_key`: the key its errors name for the source's format
// (data.sources[1].format for an entry of data.sources). `model`, when
// given, bounds the train.seq_len the cut line suggests by its context.
std::vector<data::Sample> load_samples(const TrainConfig& c, const data::DataSource& source,
                                       const data::Tokenizer* tokenizer, ProgressBar* log,
                                       const std::string& format_key = "data.format",
                                       const models::ModelConfig* model = nullptr);

// The rows one pass over `sources` makes: one per sample, or packed, their
// tokens in rows of seq_len.
int64_t rows_per_epoch(const std::vector<data::WeightedSamples>& sources, int64_t seq_len,
                       bool pack);

// What a run trains and evaluates on: the split-train sources with their
// weights (less the rows data.eval_split holds out), and the evaluation
// rows by origin: data.eval_path, the split-eval sources, then the held-out
// rows of each training source. Lines on `log` say what was mixed and held
// out, and when the training rows are fewer than train.batch_size (each
// step then repeats rows).
struct TrainingData {
  std::vector<data::WeightedSamples> train;
  std::vector<data::WeightedSamples> eval;
};
TrainingData load_training_data(const TrainConfig& c, const data::Tokenizer* tokenizer,
                                ProgressBar* log, const models::ModelConfig* model = nullptr);

// What a resume changes from the checkpoint's own config, each change
// printed on `log`. Changing the optimizer's kind or its state layout makes
// the saved states unusable; changing the data or its order makes the saved
// sampler position meaningless.
struct ResumeChanges {
  bool optimizer = false;
  bool data = false;
  // The checkpoint's learning-rate schedule, when it differs from the run's
  // (for lr_change_at_resume).
  std::optional<optim::ScheduleOptions> schedule;
};
ResumeChanges compare_with_checkpoint(const TrainConfig& c, const std::filesystem::path& resume_dir,
                                      ProgressBar& log);

// A line saying how the learning rate at `step` (the resume's first) moves
// from the checkpoint's schedule to the run's, when it moves: a longer
// train.steps under a decaying schedule raises it again, which a user who
// only asked for more steps would not guess. "" when the rates agree.
std::string lr_change_at_resume(const optim::ScheduleOptions& checkpoint,
                                const optim::ScheduleOptions& run, int64_t step);

// Note [Data edited in place]: a resume under the same data keys can still
// read other samples: the file was edited in place (rows reordered, added,
// removed or changed) or is tokenized otherwise (another chat template in
// tokenizer_config.json). The saved sampler state counts into a
// permutation of the samples it was saved with, so on other samples it
// would go on at a position that sees some rows of the epoch twice and
// others never (or lie past their end). Such data is new data, as a
// changed data.path is: the change is printed, and reading starts at its
// beginning. The checkpoint's fingerprints (data/sample_fingerprint.h)
// tell; one saved before them is checked only by whether its sampler
// state fits (Batcher::try_restore).
//
// Each training source whose samples are not the ones `saved` recorded is
// one line on `log`, led by its key ("data.path F", "data.sources[1] F")
// and saying how they differ, then one saying where the sampler stood and
// that reading starts over: true then. `checkpoint` is the folder, for
// the line saying that a checkpoint without fingerprints is checked only
// by its position.
bool samples_changed_since(const TrainConfig& c, const std::filesystem::path& checkpoint,
                           const TrainerState& saved,
                           const std::vector<data::SourceFingerprint>& now, ProgressBar& log);

// What a resume on other data says after how it differs.
inline constexpr const char* kReadingStartsOver =
    "reading starts at the data's beginning, as for new data (to go on where the checkpoint "
    "stopped, restore the data it was trained on)";

// train.seq_len left at its default for a model whose context is shorter
// runs at the model's context: sets it in `c` and returns the note saying
// so, or "" (one set anywhere is refused past it, by resolve_run).
std::string fit_default_seq_len(TrainConfig& c);

// config.json's dropout rates above 0 (GPT-2's attn_pdrop 0.1): this
// program trains without dropout, which a user of transformers' Trainer
// would otherwise assume. The note saying so, or "".
std::string dropout_not_applied(const std::string& config_json);

}  // namespace lt::train
