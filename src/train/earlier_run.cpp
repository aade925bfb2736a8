#include "train/earlier_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/shell_syntax.h"
#include "train/checkpoint.h"
#include "train/progress.h"

namespace lt::train {

namespace {

namespace fs = std::filesystem;

// out_dir's checkpoints of steps after `step`, oldest save first; with
// `furthest`, also the one of the highest step.
std::vector<fs::path> checkpoints_after(const fs::path& out_dir, int64_t step,
                                        fs::path* furthest = nullptr) {
  std::vector<fs::path> later;
  int64_t furthest_step = step;
  for (const fs::path& dir : saved_checkpoints(out_dir)) {
    const int64_t saved_at = read_trainer_state(dir).step;
    if (saved_at <= step) continue;
    later.push_back(dir);
    if (furthest && saved_at > furthest_step) {
      furthest_step = saved_at;
      *furthest = dir;
    }
  }
  return later;
}

// Removes the checkpoints `dirs` but the links among them (Note [Links in
// out.dir], train/checkpoint.h), and says which went and which stayed:
// "out.overwrite: removed {what} (...)".
void remove_checkpoints(const std::vector<fs::path>& dirs, const std::string& what) {
  std::vector<std::string> removed, links;
  for (const fs::path& dir : dirs) {
    if (is_link(dir)) {
      links.push_back(dir.filename().string());
      continue;
    }
    fs::remove_all(dir);
    removed.push_back(dir.filename().string());
  }
  if (!removed.empty())
    print_text(stdout,
               fmt::format("out.overwrite: removed {} ({})\n", what, fmt::join(removed, ", ")));
  if (links.size() == 1)
    print_text(
        stdout,
        fmt::format(
            "out.overwrite: left {}, a symbolic link (not this run's); remove it yourself if it is "
            "not needed\n",
            links.front()));
  if (links.size() > 1)
    print_text(
        stdout,
        fmt::format(
            "out.overwrite: left {}, symbolic links (not this run's); remove them yourself if they "
            "are not needed\n",
            fmt::join(links, ", ")));
  std::fflush(stdout);  // before the progress lines on stderr, also when piped
}

std::vector<std::string> names_of(const std::vector<fs::path>& dirs) {
  std::vector<std::string> names;
  for (const fs::path& dir : dirs) names.push_back(dir.filename().string());
  return names;
}

size_t metrics_lines(const fs::path& metrics) {
  // Note [metrics.jsonl that is not a file]: a device read as a file never
  // ends (/dev/zero), or fills a line of gigabytes.
  if (!fs::is_regular_file(metrics)) return 0;
  std::ifstream in(metrics);
  size_t lines = 0;
  for (std::string line; std::getline(in, line);) lines += line.empty() ? 0 : 1;
  return lines;
}

}  // namespace

void refuse_resume_over_later_checkpoints(const fs::path& out_dir, const fs::path& resumed,
                                          int64_t step) {
  fs::path furthest;
  const std::vector<fs::path> later = checkpoints_after(out_dir, step, &furthest);
  if (later.empty()) return;
  fail(fmt::format(
      "--resume {} is at step {}, and out.dir '{}' holds checkpoints of later steps ({}): this "
      "run would save over and prune them, and cut metrics.jsonl to step {} (the run deletes "
      "nothing it did not make). To branch from step {}, set another out.dir (--set "
      "out.dir=...); to go on from the last of them, --resume {}; to replace them, set "
      "out.overwrite: true (--set out.overwrite=true)",
      resumed.string(), step, out_dir.string(), fmt::join(names_of(later), ", "), step, step,
      shell_word(furthest.string())));
}

void remove_later_checkpoints(const fs::path& out_dir, int64_t step) {
  remove_checkpoints(checkpoints_after(out_dir, step),
                     fmt::format("the checkpoints of steps after the resumed {}", step));
}

bool holds_an_earlier_run(const fs::path& out_dir) {
  return !saved_checkpoints(out_dir).empty() || metrics_lines(out_dir / "metrics.jsonl") > 0;
}

void refuse_fresh_run_over_checkpoints(const std::filesystem::path& out_dir) {
  const auto checkpoints = saved_checkpoints(out_dir);
  if (checkpoints.empty()) {
    // A run that saved nothing (save_every 0, stopped by a kill) leaves its
    // record of steps: the only trace of it.
    const size_t steps = metrics_lines(out_dir / "metrics.jsonl");
    if (steps == 0) return;
    fail(fmt::format(
        "out.dir '{}' holds an earlier run's metrics.jsonl ({} steps) and no checkpoint, and "
        "this run starts fresh: it would replace that file. To keep it, set another out.dir; to "
        "start over here, set out.overwrite: true (--set out.overwrite=true)",
        out_dir.string(), steps));
  }
  fail(fmt::format(
      "out.dir '{}' holds {} checkpoint(s) of an earlier run (the newest is {}), and this run "
      "starts fresh: it would replace them and that run's metrics.jsonl (the run deletes nothing "
      "it did not make). To continue that run, add --resume latest; to keep it, set another "
      "out.dir; to start over here, set out.overwrite: true (--set out.overwrite=true)",
      out_dir.string(), checkpoints.size(), checkpoints.back().filename().string()));
}

bool resumed_from_another_folder(const fs::path& out_dir, const fs::path& resumed) {
  // `resumed` as resolve_checkpoint gives it: normal, no trailing slash.
  fs::path parent = resumed.parent_path();
  if (parent.empty()) parent = ".";  // "step-4" with out.dir the current directory
  std::error_code here_error, there_error;
  const fs::path here = fs::weakly_canonical(parent, here_error);
  const fs::path there = fs::weakly_canonical(out_dir, there_error);
  // Not told apart: taken as out.dir's own, as before this check.
  if (here_error || there_error) return false;
  return here != there;
}

void refuse_resume_into_another_runs_out_dir(const fs::path& out_dir, const fs::path& resumed) {
  const auto checkpoints = saved_checkpoints(out_dir);
  const size_t steps = metrics_lines(out_dir / "metrics.jsonl");
  if (checkpoints.empty() && steps == 0) return;
  fail(fmt::format(
      "--resume {} is a checkpoint of another folder, and out.dir '{}' holds {}: this run would "
      "prune them by train.keep_last and log its steps after theirs in metrics.jsonl, as if one "
      "run. If they are this run's own, from an earlier resume of that checkpoint, continue with "
      "--resume latest; else set another out.dir (an empty one) for this run, or, to replace what "
      "is there, set out.overwrite: true (--set out.overwrite=true)",
      resumed.string(), out_dir.string(),
      checkpoints.empty()
          ? fmt::format("an earlier run's metrics.jsonl ({} steps)", steps)
          : fmt::format("{} checkpoint(s) of an earlier run (the newest is {}) and its "
                        "metrics.jsonl",
                        checkpoints.size(), checkpoints.back().filename().string())));
}

void refuse_overwrite_of_inputs(const fs::path& out_dir, std::optional<int64_t> after_step,
                                const std::vector<std::pair<std::string, std::string>>& inputs) {
  const std::vector<fs::path> doomed =
      after_step ? checkpoints_after(out_dir, *after_step) : saved_checkpoints(out_dir);
  for (const auto& [key, input] : inputs) {
    if (input.empty()) continue;
    std::error_code ec;
    const fs::path path = fs::weakly_canonical(input, ec);
    if (ec) continue;
    for (const fs::path& checkpoint : doomed) {
      const fs::path dir = fs::weakly_canonical(checkpoint, ec);
      if (ec) continue;
      // `path` is `dir` or lies under it.
      const auto [end, rest] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
      (void)rest;
      if (end != dir.end()) continue;
      fail(fmt::format(
          "{} '{}' lies in {}, a checkpoint of out.dir '{}' that out.overwrite removes as the "
          "run starts{}: the run would delete what it reads. Copy that checkpoint out of "
          "out.dir and point {} at the copy, or set another out.dir",
          key, input, checkpoint.string(), out_dir.string(),
          after_step ? fmt::format(" (a step after the resumed {})", *after_step) : "", key));
    }
  }
}

void remove_earlier_checkpoints(const std::filesystem::path& out_dir) {
  remove_checkpoints(saved_checkpoints(out_dir), "the earlier run's checkpoints");
}

}  // namespace lt::train
