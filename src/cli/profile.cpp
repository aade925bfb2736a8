// `lazytrain profile`: measure this machine and write a hardware profile
// for `lazytrain plan`; with --model, also the model's per-stage times
// (the profile's stage_times, plan/stage_times.h).
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/shell_expanded_path.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "models/context_limit.h"
#include "plan/profile.h"

namespace lt::cli {

namespace {

struct StageTimingArgs {
  std::string model;    // a Hugging Face folder or a config.json; empty: no stage times
  int64_t seq_len = 0;  // 0: not given, default_seq_len
  std::vector<int64_t> batch_sizes;  // empty: plan::default_stage_batch_sizes
};

}  // namespace

void add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "Measure this machine into a hardware profile (YAML)");
  // No default file: `profile > mine.yaml` wrote ./hw.yaml too, over a
  // profile of the user's there.
  auto out = std::make_shared<std::string>();
  auto options = std::make_shared<plan::ProfileOptions>();
  auto disk_mb = std::make_shared<int64_t>(512);
  auto timing = std::make_shared<StageTimingArgs>();
  cmd->add_option("--out", *out,
                  "also write the profile to this file (it is printed on stdout either way)")
      ->check(shell_expanded_path());
  cmd->add_option("--disk-path", options->disk_path, "folder for the disk test and offload")
      ->check(shell_expanded_path())
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  cmd->add_option("--disk-mb", *disk_mb, "MiB written and read back")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_option("--repeats", options->repeats, "runs per figure (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  CLI::Option* model_given =
      cmd->add_option("--model", timing->model,
                      "also time this model's stages (Hugging Face folder or config.json; random "
                      "weights) into stage_times")
          ->check(shell_expanded_path());
  CLI::Option* seq_len_given = cmd->add_option(
      "--seq-len", timing->seq_len,
      fmt::format("tokens per sequence for the stage times (default: {}, or the model's "
                  "max_position_embeddings when shorter, as plan's)",
                  kDefaultSeqLen));
  cmd->add_option("--batch-sizes", timing->batch_sizes,
                  "the batch sizes (sequences per chunk) the stages are timed at, two or more "
                  "(default: on a GPU half the planner's default chunk, the chunk and 4 times "
                  "it, 4,8,32 at seq 1024; on the CPU 1,2)")
      ->delimiter(',')
      ->type_name("N,N[,...]")
      ->needs(model_given);
  // Both shape the stage times alone: without --model they were taken and
  // ignored, and the profile held no stage times the user had asked for.
  seq_len_given->needs(model_given);
  cmd->callback([out, options, disk_mb, timing, seq_len_given] {
    options->disk_bytes = *disk_mb << 20;
    // Everything that can be refused is, before the measuring (a minute
    // on a GPU): the output's folder, and the model's sequence length as
    // plan, train and eval check it.
    if (!out->empty()) io::check_can_write(*out, "--out");
    // The stage timing's own check, before the machine's measuring.
    if (!timing->model.empty() && !timing->batch_sizes.empty())
      plan::check_stage_batch_sizes(timing->batch_sizes);
    plan::ProfileReport r;
    if (timing->model.empty()) {
      r = plan::measure_profile(*options);
    } else {
      const models::ModelConfig config = load_model_config(timing->model, "--model ");
      LT_CHECK(seq_len_given->count() == 0 || timing->seq_len > 0,
               "--seq-len must be a number of tokens (leave it out for the default), got ",
               timing->seq_len);
      const int64_t seq_len =
          seq_len_given->count() > 0 ? timing->seq_len : default_seq_len(config);
      models::check_seq_len_fits(seq_len, "--seq-len", config, timing->model);
      r = plan::measure_profile_for_model(*options, config, seq_len, timing->batch_sizes);
    }
    const std::string yaml = plan::profile_yaml(r);
    if (!out->empty()) io::write_file_atomic(*out, yaml);
    // stdout is the profile alone, so `profile > hw.yaml` is one too; what
    // was measured and the notes go to stderr.
    fmt::print("{}", yaml);
    std::string measured;
    for (const auto& k : r.measured) measured += (measured.empty() ? "" : ", ") + k;
    fmt::print(stderr, "measured: {}\n", measured);
    for (const auto& n : r.notes) fmt::print(stderr, "note: {}\n", n);
    if (!out->empty()) fmt::print(stderr, "written to {}\n", *out);
  });
}

}  // namespace lt::cli
