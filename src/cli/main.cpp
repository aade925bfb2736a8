// The lazytrain program: one binary, one subcommand per job.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/blas_kernels.h"
#include "cli/commands.h"
#include "cli/installed_assets.h"
#include "cli/parse_error.h"
#include "cli/ranks.h"
#include "core/error.h"

int main(int argc, char** argv) {
  lt::cli::reexec_for_blas_kernels(argv);
  lt::cli::use_installed_assets();
  CLI::App app{"lazytrain: train large language models on one GPU smaller than the model"};
  app.require_subcommand(1);
  app.set_version_flag("--version", LT_VERSION);
  lt::cli::add_info_command(app);
  lt::cli::add_eval_command(app);
  lt::cli::add_generate_command(app);
  lt::cli::add_convert_command(app);
  lt::cli::add_train_command(app);
  lt::cli::add_tokenize_command(app);
  lt::cli::add_plan_command(app);
  lt::cli::add_profile_command(app);
  lt::cli::add_launch_command(app);
  // CLI11 answers an unknown first word with "A subcommand is required":
  // name the word and the commands instead.
  if (argc > 1 && argv[1][0] != '-') {
    std::string commands;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
      commands += (commands.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == argv[1];
    }
    if (!known) {
      std::fprintf(stderr, "lazytrain: error: unknown command '%s' (commands: %s; see --help)\n",
                   argv[1], commands.c_str());
      return 1;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version (exit code 0), and a command's own exit status
    // (plan's 3 when nothing fits: CLI::RuntimeError), as CLI11 gives
    // them. A mistake on the command line (an unknown flag, a value that
    // does not convert) is an error as any other: said after the same
    // prefix, with status 1. CLI11 printed it bare and exited with its own
    // codes (109 for an unknown flag).
    if (e.get_exit_code() == 0 || dynamic_cast<const CLI::RuntimeError*>(&e) != nullptr)
      return app.exit(e);
    const std::vector<CLI::App*> used = app.get_subcommands();
    lt::cli::print_error(lt::cli::parse_error_text(e.what()) + " (see lazytrain " +
                         (used.empty() ? "" : used.front()->get_name() + " ") + "--help)");
    return 1;
  } catch (const lt::Error& e) {
    lt::cli::print_error(e.what());
    return 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A file operation the commands did not expect to fail: name the paths
    // and the system's reason, which is what the user can act on.
    std::fprintf(stderr, "lazytrain: error: %s%s%s%s: %s\n", e.path1().c_str(),
                 e.path2().empty() ? "" : " -> ", e.path2().c_str(),
                 e.path1().empty() ? "a file operation" : "", e.code().message().c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lazytrain: unexpected error: %s\n", e.what());
    return 2;
  }
  return 0;
}
