#include "core/regular_file.h"

#include <sys/stat.h>

#include <cerrno>

#include "core/error.h"

namespace lt {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISDIR(mode)) return "a folder";
  return "a special file";
}

}  // namespace

void require_regular_file(const std::filesystem::path& path) {
  struct stat st {};
  // stat, not lstat: a link to a regular file is read as that file. stat
  // itself never blocks on a FIFO; only open does.
  if (::stat(path.c_str(), &st) != 0) return;
  if (S_ISREG(st.st_mode)) return;
  fail(path.string(), ": is ", kind_of(st.st_mode),
       ", not a regular file; lazytrain reads its inputs only from regular files");
}

std::string why_not_a_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "no file '" + path.string() + "'";
  if (S_ISREG(st.st_mode)) return "";
  return "'" + path.string() + "' is " + kind_of(st.st_mode) + ", not a file";
}

std::filesystem::path nearest_existing_folder(const std::filesystem::path& path,
                                              std::error_code& error) {
  std::filesystem::path dir = std::filesystem::absolute(path, error);
  while (!error && !std::filesystem::exists(dir, error) && dir.has_parent_path() &&
         dir.parent_path() != dir)
    dir = dir.parent_path();
  return dir;
}

}  // namespace lt
