// `lazytrain train [CONFIG | --config FILE] [--set key=value ...] [--resume DIR|latest]`
// With no config, the embedded demo config is the base.
#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "cli/ranks.h"
#include "cli/shell_expanded_path.h"
#include "core/error.h"
#include "core/shell_syntax.h"
#include "train/progress.h"
#include "train/trainer.h"

namespace lt::cli {

namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string resume;
  bool no_sample = false;
};

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  auto* cmd = app.add_subcommand(
      "train", "Train or fine-tune a model (no arguments: the demo on the bundled corpus)");
  // `lazytrain train run.yaml` is what people type first: the config may
  // also come as the one positional argument.
  cmd->add_option("config,--config", args->config,
                  "YAML config; without it the embedded demo is the base")
      ->check(shell_expanded_path());
  cmd->add_option("--set", args->overrides,
                  "Override a key: --set train.steps=10 (value is YAML; one starting with @ "
                  "is the path as written; quote a value with ' #' in it)")
      ->allow_extra_args(false);
  auto* resume_option =
      cmd->add_option("--resume", args->resume,
                      "Continue from a checkpoint folder (a relative one not in the current "
                      "directory is out.dir's), or 'latest' in out.dir; without a config, the "
                      "checkpoint's own train_config.yaml is the base")
          ->check(shell_expanded_path());
  cmd->add_flag("--no-sample", args->no_sample,
                "Print nothing of the model at the end (the greedy sample, or the held-out "
                "problems' answers)");
  cmd->callback([args, resume_option] {
    // A run outlives its output: `lazytrain train ... | tee log` gets the
    // terminal's Ctrl-C in both, tee exits, and the run's next line to the
    // pipe raised SIGPIPE, which killed it before it saved (Note [Stopping
    // a run], train/trainer.cpp). Its writes fail quietly instead
    // (train::print_text).
    std::signal(SIGPIPE, SIG_IGN);
    // `--set a=1 b=2` leaves b=2 as the positional config: say what it is.
    if (args->config.find('=') != std::string::npos && !std::filesystem::exists(args->config))
      fail("'", args->config, "' is not a config file; each override needs its own --set (--set ",
           args->config, ")");
    // `--resume ''` is a mistake, not a fresh run: count the option, not
    // its value.
    const bool resuming = resume_option->count() > 0;
    for (const std::string& w : train::overrides_given_twice(args->overrides))
      fmt::print(stderr, "{}\n", w);
    train::TrainConfig config = train::load_train_config_for(args->config, args->overrides,
                                                             resuming ? &args->resume : nullptr);
    for (const std::string& w : config.comment_warnings()) fmt::print(stderr, "{}\n", w);
    train::TrainRunOptions options;
    options.resume = resuming ? args->resume : "";
    options.resuming = resuming;
    options.sample_at_end = !args->no_sample;
    options.config_file = args->config;
    run_as_rank([&] {
      train::TrainRunResult r = train::run_training(config, options);
      // A stop before the first step saved nothing to resume from; one
      // that saved nothing after resuming goes on from where it resumed
      // (--resume latest may name an earlier run out.dir kept).
      if (r.interrupted && r.saved)
        // The folder, not "latest": a run whose out.dir came from --set
        // would resume from the config's out.dir without that --set.
        train::print_text(stdout, fmt::format("stopped at step {} on request; resume with "
                                              "--resume {}\n",
                                              r.steps_done, shell_word(r.last_checkpoint)));
      else if (r.interrupted && !r.last_checkpoint.empty())
        train::print_text(stdout, fmt::format("stopped on request, nothing saved; resume with "
                                              "--resume {}\n",
                                              shell_word(r.last_checkpoint)));
      else if (r.interrupted)
        train::print_text(stdout, fmt::format("stopped at step {} on request, before training: "
                                              "nothing was saved\n",
                                              r.steps_done));
    });
  });
}

}  // namespace lt::cli
