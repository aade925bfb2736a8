// When out.dir cannot take what a run writes, or stops being the run's:
// a save on a disk short of room says how much it needs and has and what
// may go; TensorBoard logs that cannot be written cost only themselves; a
// run whose out.dir is deleted under it stops without writing there again;
// an out.dir that cannot be a folder is named for what it is.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/bytes_text.h"
#include "support/file_size_limit.h"
#include "train/checkpoint.h"
#include "train/out_dir_lock.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class OutDirErrors : public OutDirRun {
 protected:
  OutDirErrors() : OutDirRun("out_dir_errors") {}
};

// The bytes of the regular files under `dir`, as du --apparent-size -b
// counts them.
int64_t bytes_under(const fs::path& dir) {
  int64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    if (entry.is_regular_file() && !entry.is_symlink())
      bytes += static_cast<int64_t>(entry.file_size());
  return bytes;
}

// Note [A save short of room] (train/checkpoint.h): the tester's full
// disk, resumed with keep_last 1 over step-1 and step-2. The file size
// limit makes the save of step 3 fail (as a full disk would), and the free
// space stands in as 100000 bytes: the error gives that, the size of
// step-2 (a checkpoint's), step-1 with its size as what may go, and the
// way on; both checkpoints stay.
// A disk too full for config.yaml, the run's first write: the run fails
// and, as any run failing in its setup, removes the out.dir it made (it
// left the folder and its .lock).
TEST_F(OutDirErrors, ADiskTooFullForConfigYamlLeavesNoOutDir) {
  ASSERT_FALSE(fs::exists(out()));
  const TrainConfig one_step = config({"train.steps=1"});
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  std::string m;
  {
    const lt::testing::FileSizeLimit limit(64);  // below config.yaml's size
    try {
      train_quietly(one_step);
    } catch (const std::exception& e) {
      m = e.what();
    }
  }
  ::testing::internal::GetCapturedStdout();
  ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(m, "config.yaml");
  EXPECT_FALSE(fs::exists(out())) << m;
}

TEST_F(OutDirErrors, ASaveShortOfRoomSaysWhatToRemove) {
  train_quietly(config({"train.steps=2", "train.save_every=1", "train.keep_last=5"}));
  const int64_t step_1 = bytes_under(out() / "step-1"), step_2 = bytes_under(out() / "step-2");
  ASSERT_GT(step_2, 64 * 1024);

  TrainRunOptions options;
  options.resume = "latest";
  options.sample_at_end = false;
  options.free_disk_bytes = [](const fs::path&) { return int64_t{100000}; };
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  std::string m;
  {
    const lt::testing::FileSizeLimit limit(64 * 1024);  // below the fixture's 129 KiB weights
    try {
      run_training(config({"train.steps=4", "train.save_every=1", "train.keep_last=1"}), options);
    } catch (const std::exception& e) {
      m = e.what();
    }
  }
  ::testing::internal::GetCapturedStdout();
  ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(m, "cannot save step 3: out.dir '" + out().string() + "' is short of room");
  EXPECT_MENTIONS(m, "has 100000 bytes free");
  EXPECT_MENTIONS(m, "takes about " + bytes_text(step_2) + " (the size of step-2)");
  EXPECT_MENTIONS(m, "besides step-2, the one --resume latest continues from: step-1 (" +
                         bytes_text(step_1) + ")");
  EXPECT_MENTIONS(m, "Remove those you do not need");
  EXPECT_MENTIONS(m, "then --resume latest");
  EXPECT_MENTIONS(m, "File too large");  // the write's own error
  EXPECT_TRUE(fs::exists(out() / "step-1" / "trainer_state.json"));
  EXPECT_EQ(resolve_checkpoint("latest", out()), out() / "step-2");
}

// A save that fails with room to spare (a file size limit here; out.dir
// made read-only, a permission, in the tester's runs) names the step it
// was saving and what --resume latest continues from: it said only
// "PATH: Permission denied". With nothing saved before, it says so.
TEST_F(OutDirErrors, AFailedSaveNamesItsStepAndWhatToResumeFrom) {
  train_quietly(config({"train.steps=2", "train.save_every=1", "train.keep_last=5"}));
  const auto failure = [&](const TrainConfig& run, const std::string& resume) {
    TrainRunOptions options;
    options.resume = resume;
    options.sample_at_end = false;
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    std::string m;
    {
      const lt::testing::FileSizeLimit limit(64 * 1024);  // below the fixture's 129 KiB weights
      try {
        run_training(run, options);
      } catch (const std::exception& e) {
        m = e.what();
      }
    }
    ::testing::internal::GetCapturedStdout();
    ::testing::internal::GetCapturedStderr();
    return m;
  };
  const std::string resumed =
      failure(config({"train.steps=4", "train.save_every=1", "train.keep_last=1"}), "latest");
  EXPECT_MENTIONS(resumed, "cannot save step 3 in out.dir '" + out().string() + "': ");
  EXPECT_MENTIONS(resumed, "File too large");
  EXPECT_MENTIONS(resumed,
                  "The checkpoints saved before are kept; --resume latest continues from " +
                      (out() / "step-2").string());
  EXPECT_EQ(resolve_checkpoint("latest", out()), out() / "step-2");
  EXPECT_TRUE(fs::exists(out() / "step-1" / "trainer_state.json"));

  const std::string first =
      failure(config({"train.steps=1", "out.dir=" + (out().string() + "_fresh")}), "");
  EXPECT_MENTIONS(first, "cannot save step 1 in out.dir '" + out().string() + "_fresh': ");
  EXPECT_MENTIONS(first, "No checkpoint is saved in out.dir yet");
}

// A tb/ that cannot be made (a file of that name) costs the run its
// TensorBoard logs, said once, and nothing else: it trains and saves.
TEST_F(OutDirErrors, TensorBoardLogsThatCannotBeWrittenWarnAndTheRunGoesOn) {
  fs::create_directories(out());
  write_text(out() / "tb", "not a folder");
  ::testing::internal::CaptureStderr();
  try {
    train_quietly(config({"train.steps=2"}));
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(log, "warning: no TensorBoard logs for this run: " + (out() / "tb").string());
  EXPECT_EQ(read_metrics(out()).size(), 2u);
  EXPECT_TRUE(fs::exists(out() / "step-2" / "trainer_state.json"));
  EXPECT_EQ(read_text(out() / "tb"), "not a folder");
}

// The lock sees its folder go: deleted (the lock file is gone), and made
// again by someone else with a new lock file (another run's).
TEST(OutDirLockTest, SaysWhenItsFolderWasDeletedOrReplaced) {
  TempDir tmp("lock_lost");
  const fs::path out = tmp / "out";
  OutDirLock lock(out);
  lock.commit();
  EXPECT_EQ(lock.lost(), "");
  EXPECT_TRUE(lock.folder_kept());
  fs::remove_all(out);
  EXPECT_EQ(lock.lost(), "its lock file " + (out / ".lock").string() + " is gone");
  EXPECT_FALSE(lock.folder_kept());
  fs::create_directories(out);
  write_text(out / ".lock", "4242\n");
  EXPECT_EQ(lock.lost(), (out / ".lock").string() + " is another lock file now");
  EXPECT_FALSE(lock.folder_kept()) << "a new folder of the same name";
}

// The lock file alone removed by hand: the lock says it is gone, and that
// the folder (with the run's checkpoints) is the one it locked, so the run's
// error does not say they went with it.
TEST(OutDirLockTest, SaysWhenOnlyItsLockFileWasRemoved) {
  TempDir tmp("lock_file_lost");
  const fs::path out = tmp / "out";
  OutDirLock lock(out);
  lock.commit();
  fs::remove(out / ".lock");
  EXPECT_EQ(lock.lost(), "its lock file " + (out / ".lock").string() + " is gone");
  EXPECT_TRUE(lock.folder_kept());
}

// A resume into an out.dir made read-only since its run (its lock file
// still there and writable) took the lock, trained its steps, then failed
// writing config.yaml. The lock is refused at once. Permissions do not stop
// root, so as root the lock is taken in a child process run as nobody.
TEST(OutDirLockTest, AFolderThatTookNoNewFilesIsRefusedThoughItsLockFileOpens) {
  TempDir tmp("lock_read_only");
  const fs::path out = tmp / "out";
  {
    OutDirLock lock(out);
    lock.commit();
  }
  using fs::perms;
  fs::permissions(out / ".lock", perms::owner_read | perms::owner_write | perms::group_read |
                                     perms::group_write | perms::others_read | perms::others_write);
  const perms read_and_enter = perms::owner_read | perms::owner_exec | perms::group_read |
                               perms::group_exec | perms::others_read | perms::others_exec;
  fs::permissions(tmp.path(), read_and_enter | perms::owner_write);
  fs::permissions(out, read_and_enter);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    std::string message = "not refused";
    try {
      OutDirLock lock(out);
    } catch (const Error& e) {
      message = e.what();
    }
    const ssize_t written = ::write(pipe_fds[1], message.data(), message.size());
    ::_exit(written == static_cast<ssize_t>(message.size()) ? 0 : 4);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buffer[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;)
    message.append(buffer, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  fs::permissions(out, perms::owner_all);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "root here cannot become nobody";
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_MENTIONS(message, "out.dir '" + out.string() +
                               "': cannot create files there (Permission denied); the run writes "
                               "its config, metrics and checkpoints into it");
  // Writable again, it is taken.
  EXPECT_NO_THROW(OutDirLock{out});
}

// Note [out.dir taken away] (train/trainer.cpp): out.dir deleted while the
// program trains and saves every step. It stops with an error naming
// out.dir, does not make the folder again, and does not say its outputs
// are there.
TEST_F(OutDirErrors, ARunWhoseFolderIsDeletedStopsWithoutWritingThere) {
  const std::vector<std::string> args = {"train", "--no-sample",
                                         "--set", "model.path=" + fixture("llama").string(),
                                         "--set", "model.init=pretrained",
                                         "--set", "data.path=" + (tmp_ / "data.jsonl").string(),
                                         "--set", "data.format=tokens",
                                         "--set", "train.steps=100000",
                                         "--set", "train.batch_size=2",
                                         "--set", "train.seq_len=16",
                                         "--set", "train.save_every=1",
                                         "--set", "train.keep_last=2",
                                         "--set", "out.dir=" + out().string()};
  Child child(args, tmp_ / "run.log");
  ASSERT_TRUE(wait_for_lines(child, out() / "metrics.jsonl", 2)) << child.output();
  // The run writes as it goes: a file made in a folder being removed
  // fails one round.
  for (int round = 0; round < 100 && fs::exists(out()); ++round) {
    std::error_code ec;
    fs::remove_all(out(), ec);
  }
  ASSERT_FALSE(fs::exists(out()));
  const int status = child.wait(60);
  const std::string output = child.output();
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_NE(WEXITSTATUS(status), 0) << output;
  // Seen as the folder gone, or as its lock file gone first (the folder's
  // removal had begun), which is said with both cases.
  EXPECT_TRUE(output.find("out.dir '" + out().string() + "' was deleted, moved or replaced") !=
                  std::string::npos ||
              output.find("out.dir '" + out().string() + "' lost its lock file") !=
                  std::string::npos)
      << output;
  EXPECT_MENTIONS(output, "writes nothing more there");
  EXPECT_EQ(output.find("outputs:"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(out()));
}

// An out.dir that cannot be a folder is named as the user would say it: a
// link to nothing, a file, a file where a folder above it would go.
TEST_F(OutDirErrors, AnOutDirThatCannotBeAFolderSaysWhatItIs) {
  const fs::path nowhere = tmp_ / "nowhere";
  fs::create_symlink(nowhere, out());
  EXPECT_MENTIONS(error_of(config()), "out.dir '" + out().string() + "' is a symbolic link to '" +
                                          nowhere.string() + "', which does not exist");
  fs::remove(out());
  write_text(out(), "a file");
  EXPECT_MENTIONS(error_of(config()), "out.dir '" + out().string() + "' is a file, not a folder");
  const fs::path below = out() / "run";
  EXPECT_MENTIONS(error_of(config({"out.dir=" + below.string()})),
                  "out.dir '" + below.string() + "' cannot be made: '" + out().string() +
                      "' is a file, not a folder");
  EXPECT_EQ(read_text(out()), "a file");
}

}  // namespace
}  // namespace lt::train::testing
