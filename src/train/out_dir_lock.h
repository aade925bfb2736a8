#pragma once
// One run per out.dir: two runs writing one folder interleave
// metrics.jsonl, overwrite each other's checkpoints and delete each other's
// saves mid-write. A run holds an exclusive flock(2) on out.dir/.lock for
// its lifetime; the kernel drops it when the process ends, however it ends,
// so a killed run never leaves a stale lock. The file holds the holder's
// PID for the message a second run prints.
//
// A run that fails before it writes anything (a missing model file, a bad
// --resume) leaves out.dir as it found it: the lock removes the lock file
// and the folders it made for it, if it made them. Removing a lock file is
// safe because a run that takes a lock checks that the file it locked is
// still the one at out.dir/.lock, and takes the new one when it is not.
// A run stopped by SIGINT, SIGTERM or SIGHUP in that time leaves it so too (Note
// [An interrupted setup] in out_dir_lock.cpp).
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace lt::train {

// "" when a file can be created in `dir` (one is made and removed), else
// why not (strerror: "Permission denied", "Read-only file system").
std::string cannot_create_files_in(const std::filesystem::path& dir);

class OutDirLock {
 public:
  // Creates out_dir if needed and takes the lock, or throws naming out.dir
  // and the PID of the run holding it. An out.dir that cannot be a folder
  // (a file, a link to nothing, a file where a folder above it would go)
  // is refused saying which.
  explicit OutDirLock(const std::filesystem::path& out_dir);
  // Without commit(): removes the lock file and the folders this lock made.
  ~OutDirLock();
  OutDirLock(const OutDirLock&) = delete;
  OutDirLock& operator=(const OutDirLock&) = delete;

  // The run writes into out.dir from now on: the lock file and the folders
  // made for it stay, also when a signal ends the process.
  void commit();

  // What every uncommitted lock of this process made, removed at once, for
  // a signal handler about to end the process (the trainer's second stop
  // request while the run is still setting up). Async-signal-safe.
  static void remove_uncommitted() noexcept;

  // The default action back for SIGINT, SIGTERM and SIGHUP where a lock's
  // setup handler is still set and no lock is uncommitted: a handler
  // installed over it while a lock was uncommitted (the trainer's stop
  // signals) restores it when it goes.
  static void release_signals();

  // "" while out_dir/.lock is still the file this lock holds; else what
  // became of it ("... is gone", "... is another file now"): out.dir was
  // deleted, moved or replaced under the run, and another run may hold a
  // lock there now. One stat(2), cheap enough for every step.
  std::string lost() const;
  // Whether out_dir is still the folder locked (the same file system and
  // inode): after lost(), the lock file alone was removed or replaced.
  bool folder_kept() const;

 private:
  // Removes the lock file (when this lock made it) and the folders made for
  // it; async-signal-safe, for the interrupted setup's handler too.
  void remove_what_it_made() const noexcept;
  static void on_signal_in_setup(int signal);

  std::filesystem::path out_dir_;
  std::filesystem::path path_;
  int fd_ = -1;
  bool made_file_ = false;
  std::vector<std::filesystem::path> made_dirs_;  // deepest first
  bool committed_ = false;
  bool in_slot_ = false;     // armed: a signal's cleanup can find it
  dev_t folder_device_ = 0;  // out_dir's, once locked
  ino_t folder_inode_ = 0;
};

}  // namespace lt::train
