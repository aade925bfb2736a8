#include "train/earlier_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/checkpoint.h"

namespace lt::train {

void refuse_fresh_run_over_checkpoints(const std::filesystem::path& out_dir) {
  const auto checkpoints = saved_checkpoints(out_dir);
  if (checkpoints.empty()) return;
  fail(fmt::format(
      "out.dir '{}' holds {} checkpoint(s) of an earlier run (the newest is {}), and this run "
      "starts fresh: it would replace them and that run's metrics.jsonl (the run deletes nothing "
      "it did not make). To continue that run, add --resume latest; to keep it, set another "
      "out.dir; to start over here, set out.overwrite: true (--set out.overwrite=true)",
      out_dir.string(), checkpoints.size(), checkpoints.back().filename().string()));
}

void remove_earlier_checkpoints(const std::filesystem::path& out_dir) {
  std::vector<std::string> removed;
  for (const std::filesystem::path& earlier : saved_checkpoints(out_dir)) {
    std::filesystem::remove_all(earlier);
    removed.push_back(earlier.filename().string());
  }
  if (removed.empty()) return;
  fmt::print("out.overwrite: removed the earlier run's checkpoints ({})\n",
             fmt::join(removed, ", "));
  std::fflush(stdout);  // before the progress lines on stderr, also when piped
}

}  // namespace lt::train
