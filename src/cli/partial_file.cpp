#include "cli/partial_file.h"

#include <fmt/format.h>

#include "core/error.h"
#include "io/atomic_file.h"

namespace lt::cli {

PartialFile::PartialFile(const std::filesystem::path& target, const std::string& setting)
    : target_(target) {
  if (target_.empty()) return;
  partial_ = target_.string() + ".partial";
  out_.open(partial_, std::ios::trunc);
  LT_CHECK(out_.good(), setting, " ", target_.string(), ": cannot write ", partial_.string());
}

void PartialFile::add(const std::string& line) {
  if (target_.empty()) return;
  text_ += line + "\n";
  out_ << line << '\n' << std::flush;
  ++lines_;
}

void PartialFile::commit() {
  if (target_.empty()) return;
  out_.close();
  io::write_file_atomic(target_, text_);
  std::error_code ignored;
  std::filesystem::remove(partial_, ignored);
}

std::string PartialFile::kept() {
  if (target_.empty()) return "";
  out_.close();
  if (lines_ == 0) {
    std::error_code ignored;
    std::filesystem::remove(partial_, ignored);
    return "";
  }
  return fmt::format("{} answer{} in {}", lines_, lines_ == 1 ? "" : "s", partial_.string());
}

}  // namespace lt::cli
