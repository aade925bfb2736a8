#pragma once
// Atomic file replacement: bytes go to a temporary file in the target's
// folder, which is fsync'd and then renamed over the target. A reader sees
// either the old file or the complete new one, never a torn write, even if
// the process dies or the machine loses power mid-save. The temporary file
// lives in the same folder because rename(2) is atomic only within one
// filesystem.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace lt::io {

class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path target);
  // Removes the temporary file unless commit() succeeded.
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t nbytes);
  void write(const std::string& text) { write(text.data(), text.size()); }
  // Writes at byte `offset` of the file (pwrite), for a writer that fills
  // a laid-out file out of order; bytes_written() counts these too.
  void write_at(uint64_t offset, const void* data, size_t nbytes);
  // fsync, close, rename over the target, fsync the folder.
  void commit();

  const std::filesystem::path& target() const { return target_; }
  size_t bytes_written() const { return written_; }

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  size_t written_ = 0;
  bool committed_ = false;
};

// Replaces `path` with `text` atomically (config.json, index json, ...).
void write_file_atomic(const std::filesystem::path& path, const std::string& text);

// Copies the file `from` to `to` as write_file_atomic writes: a copy that
// a folder's rename then publishes (a checkpoint, convert's output) is on
// disk, not only in the page cache (fs::copy_file does not sync). Throws
// lt::Error naming the file that cannot be read or written.
void copy_file_atomic(const std::filesystem::path& from, const std::filesystem::path& to);

// Refuses, before the work that makes its bytes, a `path` that an
// AtomicFileWriter could not replace: its folder missing or not writable
// (a temporary file is made there and removed, as the writer's first step),
// or the path itself a folder. `setting` names where the path came from
// ("--out"). Throws lt::Error naming both.
void check_can_write(const std::filesystem::path& path, const std::string& setting);

// Puts `dir`'s entries on disk (fsync of the folder): a rename into it is
// durable only then. Best effort: a file system refusing it is not an error.
void sync_directory(const std::filesystem::path& dir);

// Whether `name` is one of AtomicFileWriter's temporary file names,
// ".<target>.tmp-<pid>-<count>-<attempt>".
bool is_atomic_temp_name(const std::string& name);

// Removes the temporary files that writers killed before their commit left
// in `dir` (regular files of AtomicFileWriter's naming only; links, folders
// and subfolders are left alone) and returns how many. Only where no
// writer works now: a run's out.dir under its lock, at its start.
int remove_stale_temp_files(const std::filesystem::path& dir);

}  // namespace lt::io
