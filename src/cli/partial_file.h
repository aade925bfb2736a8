#pragma once
// Note [Stopping eval and generate] (cli/rows_stop.h): eval --task math's
// answers go to `--out`.partial as they come, and the whole file replaces
// --out at the end (atomically: a reader sees the earlier file or the
// whole new one). A stop or an error leaves the .partial file with the
// answers made, or no file when none was.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace lt::cli {

class PartialFile {
 public:
  // `target` empty: nothing is written. Throws lt::Error when the
  // .partial file cannot be made, naming `setting` ("--out").
  PartialFile(const std::filesystem::path& target, const std::string& setting);
  void add(const std::string& line);  // one line, without its '\n'
  // Replaces the target with every line, and removes the .partial file.
  void commit();
  // After a stop or an error: "" when nothing is kept (the empty .partial
  // file is removed), else where the lines are.
  std::string kept();
  int64_t lines() const { return lines_; }

 private:
  std::filesystem::path target_, partial_;
  std::ofstream out_;
  std::string text_;
  int64_t lines_ = 0;
};

}  // namespace lt::cli
