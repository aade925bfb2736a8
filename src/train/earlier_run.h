#pragma once
// A fresh run (no --resume) in an out.dir that holds an earlier run's
// checkpoints would replace that run's work: its saves prune the earlier
// checkpoints by train.keep_last, and metrics.jsonl starts over. As Hugging
// Face Trainer's overwrite_output_dir, such a run is refused before it
// writes anything, unless out.overwrite says to start over.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lt::train {

// Throws naming out_dir, how many checkpoints it holds and the newest (the
// one --resume latest continues from), and the three ways on: --resume
// latest, another out.dir, or out.overwrite: true. Without a checkpoint, a
// metrics.jsonl with steps is refused likewise (another out.dir or
// out.overwrite); nothing when out_dir holds neither.
void refuse_fresh_run_over_checkpoints(const std::filesystem::path& out_dir);

// Whether out_dir holds checkpoints or metrics.jsonl lines of a run.
bool holds_an_earlier_run(const std::filesystem::path& out_dir);

// out.overwrite: a fresh run starts over, so the earlier run's checkpoints
// go once it is set up (saying which), not one by one as keep_last prunes,
// which left the earlier run's higher-numbered step-N beside this run's as
// if it were this run's progress.
// A link among them stays, saying so (Note [Links in out.dir],
// train/checkpoint.h); so too in remove_later_checkpoints.
void remove_earlier_checkpoints(const std::filesystem::path& out_dir);

// Note [Inputs in the checkpoints out.overwrite removes]: a run that
// reads one of its inputs (`inputs`: {key, path}, model.path first) from a
// checkpoint of out_dir that out.overwrite would remove (every checkpoint;
// with `after_step`, those of later steps) is refused before anything is
// removed, naming the key, the checkpoint and the ways on: branching from
// one's own checkpoint into the same out.dir deleted the base model
// silently.
void refuse_overwrite_of_inputs(const std::filesystem::path& out_dir,
                                std::optional<int64_t> after_step,
                                const std::vector<std::pair<std::string, std::string>>& inputs);

// A resume from a checkpoint at `step` into an out.dir holding checkpoints
// of later steps (a run that went on past it) would replace that run's
// work in the same way: its saves take those steps' names and prune by
// keep_last, and metrics.jsonl is cut to `step`. Refused, naming them and
// the ways on: another out.dir to branch, --resume latest to continue the
// newest, or out.overwrite: true, with which they go once the run is set
// up (remove_later_checkpoints).
void refuse_resume_over_later_checkpoints(const std::filesystem::path& out_dir,
                                          const std::filesystem::path& resumed, int64_t step);
void remove_later_checkpoints(const std::filesystem::path& out_dir, int64_t step);

// Whether `resumed` (a checkpoint folder) lies outside out_dir: then every
// checkpoint and metrics line already in out_dir is another run's (or
// another branch's), which this run's saves would prune by keep_last and
// its steps follow in metrics.jsonl, as if one run. Such a resume is
// refused as a fresh run is (refuse_fresh_run_over_checkpoints), naming
// the checkpoint it resumes from; under out.overwrite they go as a fresh
// run's do (remove_earlier_checkpoints), and metrics.jsonl starts over.
// (`resumed` as resolve_checkpoint returns it.)
bool resumed_from_another_folder(const std::filesystem::path& out_dir,
                                 const std::filesystem::path& resumed);
void refuse_resume_into_another_runs_out_dir(const std::filesystem::path& out_dir,
                                             const std::filesystem::path& resumed);

}  // namespace lt::train
