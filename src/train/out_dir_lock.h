#pragma once
// One run per out.dir: two runs writing one folder interleave
// metrics.jsonl, overwrite each other's checkpoints and delete each other's
// saves mid-write. A run holds an exclusive flock(2) on out.dir/.lock for
// its lifetime; the kernel drops it when the process ends, however it ends,
// so a killed run never leaves a stale lock. The file holds the holder's
// PID for the message a second run prints. It is never deleted: removing a
// lock file while another process opens it would let two runs lock two
// different files.
#include <filesystem>

namespace lt::train {

class OutDirLock {
 public:
  // Creates out_dir if needed and takes the lock, or throws naming out.dir
  // and the PID of the run holding it.
  explicit OutDirLock(const std::filesystem::path& out_dir);
  ~OutDirLock();
  OutDirLock(const OutDirLock&) = delete;
  OutDirLock& operator=(const OutDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace lt::train
