// What a run does to out.dir besides its own outputs (issue 18): it deletes
// only what this program made, prunes by save order rather than step
// number, refuses a second run on the same folder, clears a killed run's
// leftovers, and stops when a metrics line or a save cannot be written.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/resource.h>

#include <csignal>

#include "io/disk_offload.h"
#include "train/checkpoint.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

#define EXPECT_MENTIONS(message, text)               \
  EXPECT_NE((message).find(text), std::string::npos) \
      << "'" << (message) << "' lacks '" << (text) << "'"

class OutDir : public ::testing::Test {
 protected:
  OutDir() : tmp_("out_dir") { write_random_tokens(tmp_ / "data.jsonl", 8, 97, 5); }
  TrainConfig config(const std::vector<std::string>& overrides = {}) {
    return fixture_config(fixture("llama"), tmp_ / "data.jsonl", out(), overrides);
  }
  std::string error_of(const TrainConfig& c, const std::string& resume = "") {
    return training_error(c, resume);
  }
  fs::path out() const { return tmp_ / "out"; }
  TempDir tmp_;
};

// Rewrites a checkpoint's trainer_state.json as another step saved earlier
// (a checkpoint of an older run: no save time, an old file time).
void make_older_checkpoint(const fs::path& from, const fs::path& to, int64_t step) {
  fs::rename(from, to);
  auto state = nlohmann::json::parse(read_text(to / "trainer_state.json"));
  state["step"] = step;
  state.erase("saved_at_ns");
  write_text(to / "trainer_state.json", state.dump());
  fs::last_write_time(to / "trainer_state.json",
                      fs::file_time_type::clock::now() - std::chrono::hours(24));
}

// A run resumed from step 2 into a folder holding an older run's step-100
// keeps its own newest saves (keep_last 2: step-3 and step-4), and
// `--resume latest` then picks step-4, not the stale step-100.
TEST_F(OutDir, PruningKeepsThisRunsNewestSaves) {
  train_quietly(config({"train.steps=2", "train.save_every=1", "train.keep_last=5"}));
  make_older_checkpoint(out() / "step-1", out() / "step-100", 100);
  train_quietly(config({"train.steps=4", "train.save_every=1", "train.keep_last=2"}),
                (out() / "step-2").string());
  EXPECT_TRUE(fs::exists(out() / "step-3" / "trainer_state.json"));
  EXPECT_TRUE(fs::exists(out() / "step-4" / "trainer_state.json"));
  EXPECT_FALSE(fs::exists(out() / "step-100"));
  EXPECT_FALSE(fs::exists(out() / "step-2"));
  EXPECT_EQ(resolve_checkpoint("latest", out()), out() / "step-4");
}

// `--resume latest` is the most recent save even when an older run left a
// higher step behind (keep_last large enough to keep both).
TEST_F(OutDir, LatestIsTheMostRecentSave) {
  train_quietly(config({"train.steps=2", "train.save_every=1", "train.keep_last=5"}));
  make_older_checkpoint(out() / "step-1", out() / "step-50", 50);
  EXPECT_EQ(resolve_checkpoint("latest", out()), out() / "step-2");
}

// The user's files in out.dir survive a run: a hidden ".step-notes" folder
// and file, and a "step-9/" folder that is no checkpoint; a "step-3/" of
// the user's, which this run would have to replace, stops it at start.
TEST_F(OutDir, UserFilesAreNeverDeleted) {
  fs::create_directories(out() / ".step-notes");
  write_text(out() / ".step-notes" / "mine.txt", "keep me");
  write_text(out() / ".step-2.txt", "keep me too");
  fs::create_directories(out() / "step-9");
  write_text(out() / "step-9" / "mine.txt", "and me");
  train_quietly(config({"train.steps=2"}));
  EXPECT_EQ(read_text(out() / ".step-notes" / "mine.txt"), "keep me");
  EXPECT_EQ(read_text(out() / ".step-2.txt"), "keep me too");
  EXPECT_EQ(read_text(out() / "step-9" / "mine.txt"), "and me");

  fs::create_directories(out() / "step-3");
  write_text(out() / "step-3" / "mine.txt", "mine");
  const std::string m = error_of(config({"train.steps=3", "out.overwrite=true"}));
  EXPECT_MENTIONS(m, (out() / "step-3").string());
  EXPECT_MENTIONS(m, "not a lazytrain checkpoint");
  EXPECT_EQ(read_text(out() / "step-3" / "mine.txt"), "mine");
}

// `--resume latest` passes over a damaged newest checkpoint (its
// trainer_state.json cut short) saying so, and the run's pruning leaves it:
// only checkpoints the run can read are deleted. A run whose saves would
// replace it stops at start.
TEST_F(OutDir, ADamagedCheckpointIsSkippedWithAWarningAndNeverDeleted) {
  train_quietly(config({"train.steps=2", "train.save_every=1", "train.keep_last=5"}));
  fs::copy(out() / "step-2", out() / "step-9", fs::copy_options::recursive);
  write_text(out() / "step-9" / "trainer_state.json", R"({"step": )");
  ::testing::internal::CaptureStderr();
  try {
    train_quietly(config({"train.steps=4", "train.save_every=1", "train.keep_last=1"}), "latest");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(log, "skipped " + (out() / "step-9").string());
  EXPECT_MENTIONS(log, "trainer_state.json is malformed");
  EXPECT_EQ(read_metrics(out()).size(), 4u);  // resumed at step 2
  EXPECT_TRUE(fs::exists(out() / "step-4" / "trainer_state.json"));
  EXPECT_FALSE(fs::exists(out() / "step-2"));  // keep_last 1
  EXPECT_EQ(read_text(out() / "step-9" / "trainer_state.json"), R"({"step": )");
  EXPECT_TRUE(fs::exists(out() / "step-9" / "model.safetensors"));

  const std::string m = error_of(config({"train.steps=10"}), "latest");
  EXPECT_MENTIONS(m, (out() / "step-9").string());
  EXPECT_MENTIONS(m, "malformed");
  EXPECT_EQ(read_text(out() / "step-9" / "trainer_state.json"), R"({"step": )");
}

// A second run on a locked out.dir is refused, naming the holder's PID; the
// lock goes with its holder.
TEST_F(OutDir, ASecondRunOnTheSameFolderIsRefused) {
  fs::create_directories(out());
  const int fd = ::open((out() / ".lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ASSERT_EQ(::ftruncate(fd, 0), 0);
  ASSERT_EQ(::pwrite(fd, "4242\n", 5, 0), 5);
  const std::string m = error_of(config({"train.steps=1"}));
  EXPECT_MENTIONS(m, "in use by another lazytrain run (pid 4242)");
  EXPECT_MENTIONS(m, out().string());
  EXPECT_FALSE(fs::exists(out() / "metrics.jsonl"));
  ::close(fd);
  EXPECT_NO_THROW(train_quietly(config({"train.steps=1"})));
}

// What a killed run leaves (a save folder carrying the marker, an activation
// scratch file nobody holds) is removed at the next start; a scratch file a
// live process holds is not.
TEST_F(OutDir, AKilledRunsLeftoversAreRemovedAtTheNextStart) {
  fs::create_directories(out() / ".step-7.tmp-99999");
  write_text(out() / ".step-7.tmp-99999" / ".lazytrain-save", "99999\n");
  write_text(out() / ".step-7.tmp-99999" / "model.safetensors", "partial");
  write_text(out() / "lazytrain_activations_99999_0.bin", "stale");
  const fs::path held = out() / "lazytrain_activations_1_0.bin";
  write_text(held, "in use");
  const int fd = ::open(held.c_str(), O_RDONLY);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  train_quietly(config({"train.steps=1"}));
  EXPECT_FALSE(fs::exists(out() / ".step-7.tmp-99999"));
  EXPECT_FALSE(fs::exists(out() / "lazytrain_activations_99999_0.bin"));
  EXPECT_TRUE(fs::exists(held));
  ::close(fd);
}

// A metrics line that cannot be written (a full disk: /dev/full) stops the
// run with a message naming metrics.jsonl.
TEST_F(OutDir, AFailedMetricsWriteStopsTheRun) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  fs::create_directories(out());
  fs::create_symlink("/dev/full", out() / "metrics.jsonl");
  const std::string m = error_of(config({"train.steps=2"}));
  EXPECT_MENTIONS(m, "metrics.jsonl");
  EXPECT_MENTIONS(m, "No space left on device");
}

// A save that fails midway (the file size limit stands in for a full disk)
// stops the run and leaves no temporary folder behind.
TEST_F(OutDir, AFailedSaveLeavesNoTemporaryFolder) {
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
  rlimit small = old;
  small.rlim_cur = 64 * 1024;  // below the fixture's 129 KiB weights
  // The run's output goes to fresh files: stdout redirected to a file
  // already past the limit would fail the run at its first line instead.
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string m;
  try {
    train_quietly(config({"train.steps=1"}));
  } catch (const std::exception& e) {
    m = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  ::testing::internal::GetCapturedStdout();
  ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(m.empty()) << "the save did not fail";
  for (const auto& entry : fs::directory_iterator(out())) {
    EXPECT_NE(entry.path().filename().string().rfind(".step-", 0), 0u) << entry.path();
    EXPECT_NE(entry.path().filename().string().rfind("step-", 0), 0u) << entry.path();
  }
}

}  // namespace
}  // namespace lt::train::testing
