// What a run does to out.dir besides its own outputs (issue 18): it deletes
// only what this program made, never through a link, prunes by save order
// rather than step number, refuses a second run on the same folder, clears
// a killed run's leftovers, stops when a metrics line or a save cannot be
// written, and takes a relative --resume that is not in the current
// directory from out.dir. (out_dir_errors_test.cpp: a disk short of room,
// TensorBoard logs that cannot be written, out.dir deleted under a run or
// not a folder.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>

#include <functional>
#include <map>

#include "io/disk_offload.h"
#include "support/file_size_limit.h"
#include "train/checkpoint.h"
#include "train/report.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class OutDir : public OutDirRun {
 protected:
  OutDir() : OutDirRun("out_dir") {}

 public:
  fs::path out_dir() const { return out(); }
  void run(const std::vector<std::string>& overrides, const std::string& resume = "") {
    train_quietly(config(overrides), resume);
  }
};

// Every file under `dir` (links not followed) with its bytes; links as
// "-> target".
std::map<std::string, std::string> files_of(const fs::path& dir) {
  std::map<std::string, std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = fs::relative(entry.path(), dir).string();
    if (entry.is_symlink())
      found[name] = "-> " + fs::read_symlink(entry.path()).string();
    else if (entry.is_regular_file())
      found[name] = read_text(entry.path());
  }
  return found;
}

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
// is refused (it would prune it: Note in train/earlier_run.h); with
// out.overwrite it removes it and keeps its own newest saves (keep_last 2:
// step-3 and step-4), and `--resume latest` then picks step-4.
TEST_F(OutDir, PruningKeepsThisRunsNewestSaves) {
  train_quietly(config({"train.steps=2", "train.save_every=1", "train.keep_last=5"}));
  make_older_checkpoint(out() / "step-1", out() / "step-100", 100);
  EXPECT_MENTIONS(error_of(config({"train.steps=4", "train.save_every=1", "train.keep_last=2"}),
                           (out() / "step-2").string()),
                  "holds checkpoints of later steps (step-100)");
  EXPECT_TRUE(fs::exists(out() / "step-100"));
  train_quietly(
      config({"train.steps=4", "train.save_every=1", "train.keep_last=2", "out.overwrite=true"}),
      (out() / "step-2").string());
  EXPECT_TRUE(fs::exists(out() / "step-3" / "trainer_state.json"));
  EXPECT_TRUE(fs::exists(out() / "step-4" / "trainer_state.json"));
  EXPECT_FALSE(fs::exists(out() / "step-100"));
  EXPECT_FALSE(fs::exists(out() / "step-2"));
  EXPECT_EQ(resolve_checkpoint("latest", out()), out() / "step-4");
}

// A checkpoint the run cannot remove (chmod 555, another user's) stopped
// the run at its next save with "<step-2>/.lazytrain-save: cannot write",
// after that save was made, and every resume the same way. It is warned
// and left. The removal is made to fail as a permission would (this test
// may run as root, whom modes do not stop): a folder where the removal's
// marker file goes.
TEST_F(OutDir, ACheckpointThatCannotBeRemovedIsLeftAndTheRunGoesOn) {
  train_quietly(config({"train.steps=2", "train.save_every=1", "train.keep_last=5"}));
  fs::create_directory(out() / "step-1" / ".lazytrain-save");
  ::testing::internal::CaptureStderr();
  train_quietly(config({"train.steps=4", "train.save_every=1", "train.keep_last=2"}), "latest");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(log, "warning: could not remove " + (out() / "step-1").string() +
                           " to keep the last 2 checkpoints (train.keep_last): ");
  EXPECT_MENTIONS(log, "it is left in place, and the run goes on");
  // Once, not at each save that tries again (steps 3 and 4 both prune).
  EXPECT_EQ(log.find("could not remove"), log.rfind("could not remove")) << log;
  EXPECT_TRUE(fs::exists(out() / "step-1" / "trainer_state.json"));
  EXPECT_FALSE(fs::exists(out() / "step-2"));  // pruned as before
  EXPECT_TRUE(fs::exists(out() / "step-3" / "trainer_state.json"));
  EXPECT_TRUE(fs::exists(out() / "step-4" / "trainer_state.json"));
  EXPECT_EQ(read_metrics(out()).back()["step"], 3);
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
// only checkpoints the run can read are deleted. A run past its step that
// saves only at its end trains on and leaves it as it was.
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

  train_quietly(config({"train.steps=10"}), "latest");
  EXPECT_TRUE(fs::exists(out() / "step-10" / "trainer_state.json"));
  EXPECT_EQ(read_text(out() / "step-9" / "trainer_state.json"), R"({"step": )");
  EXPECT_FALSE(fs::exists(out() / "step-9.damaged"));
}

// Note [A damaged checkpoint] (train/checkpoint.h), on the save grid: a run
// of 4 steps saving every 2 has its newest checkpoint, step-4, damaged by
// `damage`. `--resume latest` to 6 steps passes over step-4, saying why,
// and resumes at step 2; its save of step 4 renames the damaged folder
// `aside` (saying so), nothing in it changed, and the run goes on to 6.
// Returns the resumed run's log.
std::string resume_past_a_damaged_step_4(OutDir& t, const std::vector<std::string>& settings,
                                         const std::function<void(const fs::path&)>& damage,
                                         const std::string& aside_name) {
  std::vector<std::string> four = settings, six = settings;
  four.push_back("train.steps=4");
  six.push_back("train.steps=6");
  t.run(four);
  const fs::path step_4 = t.out_dir() / "step-4";
  damage(step_4);
  std::map<std::string, std::string> damaged;  // file name -> bytes
  for (const auto& entry : fs::directory_iterator(step_4))
    damaged[entry.path().filename().string()] = read_text(entry.path());

  ::testing::internal::CaptureStderr();
  try {
    t.run(six, "latest");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(log, "skipped " + step_4.string() + " (");
  EXPECT_MENTIONS(log, "resumed from " + (t.out_dir() / "step-2").string() + " at step 2");
  const fs::path aside = t.out_dir() / aside_name;
  EXPECT_MENTIONS(log, step_4.string() + " is a damaged checkpoint (");
  EXPECT_MENTIONS(log, "renamed it " + aside.string() + " to save step 4 there");
  // Every damaged file is still on disk, byte for byte.
  std::map<std::string, std::string> kept;
  for (const auto& entry : fs::directory_iterator(aside))
    kept[entry.path().filename().string()] = read_text(entry.path());
  EXPECT_EQ(kept, damaged);
  // The run went on from step 2: metrics of steps 0..5, once each, and
  // whole saves of steps 4 and 6, the latter what `latest` now takes.
  std::vector<int64_t> steps;
  for (const auto& line : read_metrics(t.out_dir())) steps.push_back(line.at("step"));
  EXPECT_EQ(steps, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(nlohmann::json::parse(read_text(step_4 / "trainer_state.json")).at("step"), 4);
  EXPECT_EQ(resolve_checkpoint("latest", t.out_dir()), t.out_dir() / "step-6");
  return log;
}

// A model.safetensors cut to half its length (a copy that ran out of disk):
// its header no longer fits the file. Resuming from it by name is refused,
// naming the file.
TEST_F(OutDir, ATruncatedCheckpointIsPassedOverAndSetAsideWhenItsStepIsSaved) {
  const auto truncate = [this](const fs::path& dir) {
    fs::resize_file(dir / "model.safetensors", fs::file_size(dir / "model.safetensors") / 2);
    const std::string m = error_of(config({"train.steps=6"}), dir.string());
    EXPECT_MENTIONS(m, "is a damaged checkpoint");
    EXPECT_MENTIONS(m, (dir / "model.safetensors").string());
  };
  const std::string log = resume_past_a_damaged_step_4(
      *this, {"train.save_every=2", "train.keep_last=5"}, truncate, "step-4.damaged");
  EXPECT_MENTIONS(log, (out() / "step-4" / "model.safetensors").string());
  EXPECT_MENTIONS(log, "lies beyond the data region");
}

// A trainer_state.json cut short on the save grid, where a folder of the
// user's already holds the name step-4.damaged: the set-aside name is
// step-4.damaged-2, and the user's folder is untouched.
TEST_F(OutDir, AMalformedStateOnTheSaveGridIsPassedOverAndSetAsideWhenItsStepIsSaved) {
  const auto cut_state = [this](const fs::path& dir) {
    write_text(dir / "trainer_state.json", R"({"step": )");
    fs::create_directories(out() / "step-4.damaged");
    write_text(out() / "step-4.damaged" / "mine.txt", "mine");
  };
  const std::string log = resume_past_a_damaged_step_4(
      *this, {"train.save_every=2", "train.keep_last=5"}, cut_state, "step-4.damaged-2");
  EXPECT_MENTIONS(log, "trainer_state.json is malformed");
  EXPECT_EQ(read_text(out() / "step-4.damaged" / "mine.txt"), "mine");
}

// A train_config.yaml that is not YAML (the config a resume without one
// takes) marks a damaged checkpoint: `--resume latest` stopped on it.
TEST_F(OutDir, AnUnreadableTrainConfigIsADamagedCheckpoint) {
  const auto cut_config = [](const fs::path& dir) {
    write_text(dir / "train_config.yaml", "train: [unclosed\n");
  };
  const std::string log = resume_past_a_damaged_step_4(
      *this, {"train.save_every=2", "train.keep_last=5"}, cut_config, "step-4.damaged");
  EXPECT_MENTIONS(log, "train_config.yaml: not valid YAML");
}

// A trainer_state.json whose "step" no save of that folder writes (below 0,
// or another than its step-N name) marks a damaged checkpoint: resumed by
// name under out.overwrite it is refused before anything is removed (at
// step -3 the run removed every checkpoint "after" it and cut
// metrics.jsonl to nothing), and `--resume latest` passes over it and
// never takes it for a later step to prune.
TEST_F(OutDir, AStateWhoseStepNoSaveWritesIsADamagedCheckpoint) {
  const auto set_step = [](const fs::path& dir, int64_t step) {
    auto state = nlohmann::json::parse(read_text(dir / "trainer_state.json"));
    state["step"] = step;
    write_text(dir / "trainer_state.json", state.dump());
  };
  const auto negative = [&](const fs::path& dir) {
    set_step(dir, -3);
    const std::string m = error_of(config({"train.steps=6", "out.overwrite=true"}), dir.string());
    EXPECT_MENTIONS(m, dir.string() + "' is a damaged checkpoint");
    EXPECT_MENTIONS(m, "trainer_state.json: \"step\" is -3, below 0");
    EXPECT_TRUE(fs::exists(out_dir() / "step-2" / "trainer_state.json"));
    EXPECT_EQ(read_metrics(out_dir()).size(), 4u);
  };
  std::string log = resume_past_a_damaged_step_4(*this, {"train.save_every=2", "train.keep_last=5"},
                                                 negative, "step-4.damaged");
  EXPECT_MENTIONS(log, "trainer_state.json: \"step\" is -3, below 0");

  // A step-2 whose state says 1000 is neither resumed nor pruned as later.
  set_step(out_dir() / "step-2", 1000);
  ::testing::internal::CaptureStderr();
  try {
    run({"train.steps=7", "train.save_every=2", "train.keep_last=5", "out.overwrite=true"},
        "latest");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  log = ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(log, "trainer_state.json: \"step\" is 1000, where the folder's name says 2");
  EXPECT_MENTIONS(log, "resumed from " + (out_dir() / "step-6").string() + " at step 6");
  EXPECT_TRUE(fs::exists(out_dir() / "step-2" / "model.safetensors"));

  // A step that is no whole number (read as 6, or as INT64_MIN, before).
  for (const auto& [value, shown] :
       {std::pair{nlohmann::json(6.5), "6.5"}, std::pair{nlohmann::json(1e30), "1e+30"}}) {
    auto state = nlohmann::json::parse(read_text(out_dir() / "step-6" / "trainer_state.json"));
    state["step"] = value;
    write_text(out_dir() / "step-6" / "trainer_state.json", state.dump());
    EXPECT_MENTIONS(
        error_of(config({"train.steps=9"}), (out_dir() / "step-6").string()),
        std::string("trainer_state.json: \"step\" is ") + shown + ", not a whole number of steps");
  }
}

// A resume from a checkpoint of another folder into an out.dir holding
// another run's checkpoints is refused as a fresh run there is: it pruned
// that run's step-1 by keep_last and logged its steps after that run's in
// metrics.jsonl (steps 0, 2, 3). Under out.overwrite that run's
// checkpoints go and metrics.jsonl holds this run's steps alone; into an
// empty folder the resume runs as before.
TEST_F(OutDir, AResumeFromAnotherFolderDoesNotTakeOverAnotherRunsOutDir) {
  const fs::path other = tmp_ / "other";
  train_quietly(fixture_config(fixture("llama"), tmp_ / "data.jsonl", other,
                               {"train.steps=2", "train.save_every=1", "train.keep_last=5"}));
  run({"train.steps=1"});
  const auto before = files_of(out());
  const std::string m =
      error_of(config({"train.steps=4", "train.keep_last=1"}), (other / "step-2").string());
  EXPECT_MENTIONS(m, "--resume " + (other / "step-2").string() +
                         " is a checkpoint of another folder, and out.dir '" + out().string() +
                         "' holds 1 checkpoint(s) of an earlier run (the newest is step-1)");
  EXPECT_MENTIONS(m, "out.overwrite: true");
  EXPECT_EQ(files_of(out()), before);

  run({"train.steps=4", "train.keep_last=5", "out.overwrite=true"}, (other / "step-2").string());
  EXPECT_FALSE(fs::exists(out() / "step-1"));
  EXPECT_TRUE(fs::exists(out() / "step-4" / "trainer_state.json"));
  std::vector<int64_t> steps;
  for (const auto& line : read_metrics(out())) steps.push_back(line.at("step"));
  EXPECT_EQ(steps, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(fs::exists(other / "step-2" / "trainer_state.json"));  // what it resumed from

  const fs::path fresh = tmp_ / "fresh";
  train_quietly(fixture_config(fixture("llama"), tmp_ / "data.jsonl", fresh, {"train.steps=3"}),
                (other / "step-2").string());
  EXPECT_TRUE(fs::exists(fresh / "step-3" / "trainer_state.json"));
}

// A checkpoint of out.dir named with a trailing slash (a shell's
// completion) or a "./" is out.dir's own: the resume was taken for one from
// another folder and refused (and under out.overwrite it removed the very
// checkpoint it resumed from).
TEST_F(OutDir, ACheckpointNamedWithATrailingSlashIsOutDirsOwn) {
  run({"train.steps=2", "train.save_every=1", "train.keep_last=5"});
  const std::string named = (out() / "." / "step-2").string() + "/";
  ::testing::internal::CaptureStderr();
  const TrainRunResult r = train_quietly(config({"train.steps=3", "train.keep_last=5"}), named);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.steps_done, 3);
  // Nor does it say the name was looked up in out.dir: it was not.
  EXPECT_EQ(log.find("not in the current directory"), std::string::npos) << log;
  EXPECT_MENTIONS(log, "resumed from " + (out() / "step-2").string() + " at step 2");
  EXPECT_TRUE(fs::exists(out() / "step-1" / "trainer_state.json"));
  EXPECT_TRUE(fs::exists(out() / "step-2" / "trainer_state.json"));
  EXPECT_EQ(read_metrics(out()).size(), 3u);
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
// run with a message naming metrics.jsonl. out.overwrite: a fresh run
// without it first counts the lines of the metrics.jsonl an earlier run
// left (train/earlier_run.h), and /dev/full reads as NUL bytes without
// end, which took 40 s and gigabytes before the read gave up.
TEST_F(OutDir, AFailedMetricsWriteStopsTheRun) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  fs::create_directories(out());
  fs::create_symlink("/dev/full", out() / "metrics.jsonl");
  const std::string m = error_of(config({"train.steps=2", "out.overwrite=true"}));
  EXPECT_MENTIONS(m, "metrics.jsonl");
  EXPECT_MENTIONS(m, "No space left on device");
}

// A full disk (the file size limit stands in) that takes part of a metrics
// line: the part is cut off, so the file stays whole lines of JSON (a torn
// last line failed pandas and jq), and the error names the step as the
// progress line counts it, with its "step" field.
TEST_F(OutDir, AMetricsLineCutByAFullDiskIsTakenBackWhole) {
  fs::create_directories(out());
  std::vector<std::string> warnings;
  MetricsWriter metrics(out() / "metrics.jsonl", false, 0,
                        [&](const std::string& w) { warnings.push_back(w); });
  const nlohmann::json line = {{"step", 0}, {"loss", 13.151287007331848}, {"note", "padding"}};
  const auto line_bytes = line.dump().size() + 1;
  std::string error;
  int64_t written = 0;
  {
    // Room for three lines and a half.
    const lt::testing::FileSizeLimit limit(static_cast<rlim_t>(3.5 * line_bytes));
    try {
      for (; written < 10; ++written) {
        nlohmann::json next = line;
        next["step"] = written;
        metrics.write(next);
      }
    } catch (const Error& e) {
      error = e.what();
    }
  }
  EXPECT_EQ(written, 3);
  EXPECT_MENTIONS(error, "cannot write the metrics of step 4 (\"step\": 3)");
  EXPECT_EQ(fs::file_size(out() / "metrics.jsonl"), 3 * line_bytes);
  EXPECT_EQ(read_metrics(out()).size(), 3u);  // each line parses
}

// Note [metrics.jsonl that is not a file]: a fresh run, a resume and the
// loss curve each read an earlier metrics.jsonl; one that is a link to
// /dev/zero is written to and never read, where reading it filled memory
// with one endless line (8 GB and 40 s before the allocation failed).
TEST_F(OutDir, AMetricsFileThatIsADeviceIsNeverRead) {
  if (!fs::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
  fs::create_directories(out());
  fs::create_symlink("/dev/zero", out() / "metrics.jsonl");
  EXPECT_EQ(train_quietly(config({"train.steps=2", "train.save_every=2"})).steps_done, 2);
  EXPECT_EQ(train_quietly(config({"train.steps=3"}), "latest").steps_done, 3);
  EXPECT_TRUE(fs::is_symlink(out() / "metrics.jsonl"));
}

// A save that fails midway (the file size limit stands in for a full disk)
// stops the run and leaves no temporary folder behind.
TEST_F(OutDir, AFailedSaveLeavesNoTemporaryFolder) {
  // The run's output goes to fresh files: stdout redirected to a file
  // already past the limit would fail the run at its first line instead.
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  std::string m;
  {
    const lt::testing::FileSizeLimit limit(64 * 1024);  // below the fixture's 129 KiB weights
    try {
      train_quietly(config({"train.steps=1"}));
    } catch (const std::exception& e) {
      m = e.what();
    }
  }
  ::testing::internal::GetCapturedStdout();
  ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(m.empty()) << "the save did not fail";
  // The disk has room: not a save short of room (Note [A save short of room]).
  EXPECT_EQ(m.find("short of room"), std::string::npos) << m;
  for (const auto& entry : fs::directory_iterator(out())) {
    EXPECT_NE(entry.path().filename().string().rfind(".step-", 0), 0u) << entry.path();
    EXPECT_NE(entry.path().filename().string().rfind("step-", 0), 0u) << entry.path();
  }
}

// Another run's checkpoint linked into out.dir as step-3 (the user's way to
// resume from it) is read through but never deleted through: pruning to
// keep_last 2 leaves the other run's folder byte for byte (no marker added),
// leaves the link, and prunes only this run's own step-4. A hidden
// leftover-looking link (".step-9.tmp-1") to a folder carrying the save
// marker is not cleaned up either.
TEST_F(OutDir, PruningNeverDeletesThroughALinkedCheckpoint) {
  const fs::path victim = tmp_ / "victim";
  train_quietly(fixture_config(fixture("llama"), tmp_ / "data.jsonl", victim,
                               {"train.steps=3", "train.save_every=1", "train.keep_last=5"}));
  const auto before = files_of(victim / "step-3");
  ASSERT_TRUE(before.count("model.safetensors"));
  const fs::path marked = tmp_ / "marked";
  fs::create_directories(marked);
  write_text(marked / ".lazytrain-save", "1\n");
  write_text(marked / "mine.txt", "mine");
  fs::create_directories(out());
  fs::create_directory_symlink(victim / "step-3", out() / "step-3");
  fs::create_directory_symlink(marked, out() / ".step-9.tmp-1");

  train_quietly(config({"train.steps=6", "train.save_every=1", "train.keep_last=2"}), "latest");
  EXPECT_EQ(files_of(victim / "step-3"), before);
  EXPECT_TRUE(fs::is_symlink(out() / "step-3"));
  EXPECT_EQ(read_text(marked / "mine.txt"), "mine");
  EXPECT_TRUE(fs::is_symlink(out() / ".step-9.tmp-1"));
  EXPECT_FALSE(fs::exists(out() / "step-4"));
  EXPECT_TRUE(fs::exists(out() / "step-5" / "trainer_state.json"));
  EXPECT_TRUE(fs::exists(out() / "step-6" / "trainer_state.json"));
  std::vector<int64_t> steps;
  for (const auto& line : read_metrics(out())) steps.push_back(line.at("step"));
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 4, 5}));  // resumed through the link
}

// A run that would save a step where a link stands is refused at start,
// naming the link and where it points; out.overwrite removes the earlier
// run's own checkpoints but leaves a link (saying so), and what it points
// to.
TEST_F(OutDir, ALinkedCheckpointIsNeitherSavedOverNorRemovedByOverwrite) {
  const fs::path victim = tmp_ / "victim";
  train_quietly(fixture_config(fixture("llama"), tmp_ / "data.jsonl", victim,
                               {"train.steps=2", "train.save_every=1", "train.keep_last=5"}));
  // A checkpoint of step 100 (a folder's state names its step).
  fs::copy(victim / "step-1", victim / "step-100", fs::copy_options::recursive);
  auto state = nlohmann::json::parse(read_text(victim / "step-100" / "trainer_state.json"));
  state["step"] = 100;
  write_text(victim / "step-100" / "trainer_state.json", state.dump());
  const auto before = files_of(victim);
  train_quietly(config({"train.steps=1", "train.save_every=1"}));
  fs::create_directory_symlink(victim / "step-2", out() / "step-2");
  fs::create_directory_symlink(victim / "step-100", out() / "step-100");

  const std::string m = error_of(config({"train.steps=3", "out.overwrite=true"}));
  EXPECT_MENTIONS(m, (out() / "step-2").string() + " is a symbolic link to '" +
                         (victim / "step-2").string() + "'");
  EXPECT_MENTIONS(m, "this run may save step 2 there");
  EXPECT_TRUE(fs::is_symlink(out() / "step-2"));

  fs::remove(out() / "step-2");
  ::testing::internal::CaptureStdout();
  train_quietly(config({"train.steps=3", "out.overwrite=true"}));
  const std::string said = ::testing::internal::GetCapturedStdout();
  EXPECT_MENTIONS(said, "removed the earlier run's checkpoints (step-1)");
  EXPECT_MENTIONS(said, "left step-100, a symbolic link (not this run's)");
  EXPECT_TRUE(fs::is_symlink(out() / "step-100"));
  EXPECT_TRUE(fs::exists(out() / "step-3" / "trainer_state.json"));
  EXPECT_EQ(files_of(victim), before);
}

// The atomic writer's temporary file that a kill during the rewrite of
// metrics.jsonl at a resume left (the name the tester found) is removed at
// the next start; files and links that only look like one are not.
TEST_F(OutDir, AKilledWritersTemporaryFileIsRemovedAtTheNextStart) {
  fs::create_directories(out());
  write_text(out() / ".metrics.jsonl.tmp-13697-1-0", "{\"step\": 0, \"lo");
  const std::vector<std::string> kept = {".metrics.jsonl.tmp-notes", "metrics.jsonl.tmp-1-2-3",
                                         ".notes.tmp-1-2", ".notes.tmp-1-2-3-4"};
  for (const std::string& name : kept) write_text(out() / name, "mine");
  fs::create_directories(out() / ".folder.tmp-1-2-3");
  write_text(out() / ".folder.tmp-1-2-3" / "mine.txt", "mine");
  write_text(tmp_ / "elsewhere.txt", "mine");
  fs::create_symlink(tmp_ / "elsewhere.txt", out() / ".link.tmp-1-2-3");

  ::testing::internal::CaptureStderr();
  train_quietly(config({"train.steps=1"}));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(log, "removed 1 temporary file(s) a killed run left in out.dir");
  EXPECT_FALSE(fs::exists(out() / ".metrics.jsonl.tmp-13697-1-0"));
  for (const std::string& name : kept) EXPECT_EQ(read_text(out() / name), "mine") << name;
  EXPECT_EQ(read_text(out() / ".folder.tmp-1-2-3" / "mine.txt"), "mine");
  EXPECT_TRUE(fs::is_symlink(out() / ".link.tmp-1-2-3"));
  EXPECT_EQ(read_text(tmp_ / "elsewhere.txt"), "mine");
}

// `--resume step-2` from a directory without a step-2 is out.dir's step-2,
// and the run says so, in a run with a config and in one on the
// checkpoint's own; a name in neither place is refused naming both.
TEST_F(OutDir, ARelativeResumeNotInTheCurrentDirectoryIsOutDirs) {
  train_quietly(config({"train.steps=2", "train.save_every=1", "train.keep_last=5"}));
  const InDirectory elsewhere(tmp_ / "elsewhere");
  ::testing::internal::CaptureStderr();
  try {
    train_quietly(config({"train.steps=3"}), "step-2");
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_MENTIONS(log, "--resume step-2: not in the current directory; resuming from " +
                           (out() / "step-2").string() + " in out.dir");
  EXPECT_EQ(read_metrics(out()).size(), 3u);

  const std::string m = error_of(config({"train.steps=5"}), "step-7");
  EXPECT_MENTIONS(m, "--resume: 'step-7' is not there (in the current directory, " +
                         (tmp_ / "elsewhere").string() + ", nor in out.dir '" + out().string() +
                         "')");

  std::string output;
  EXPECT_EQ(run_program({"train", "--resume", "step-3", "--no-sample", "--set", "train.steps=4",
                         "--set", "out.dir=" + out().string()},
                        tmp_ / "cli.log", &output),
            0)
      << output;
  EXPECT_MENTIONS(output, "resuming from " + (out() / "step-3").string() + " in out.dir");
  EXPECT_EQ(read_metrics(out()).size(), 4u);
}

// The demo's config sets out.overwrite (to run again from scratch), and a
// checkpoint's train_config.yaml kept it: `--resume run/step-1` on the
// checkpoint's own config deleted step-2 and step-3 unasked. out.overwrite
// is now the resuming command's: refused, the later saves kept, until
// --set out.overwrite=true says to replace them.
TEST_F(OutDir, AResumeOnTheCheckpointsOwnConfigTakesNoOverwriteFromIt) {
  const fs::path run = tmp_ / "demo";
  std::string output;
  ASSERT_EQ(run_program({"train", "--no-sample", "--set", "train.steps=3", "--set",
                         "train.save_every=1", "--set", "train.keep_last=5", "--set",
                         "train.eval_every=0", "--set", "out.dir=" + run.string()},
                        tmp_ / "first.log", &output),
            0)
      << output;
  ASSERT_NE(read_text(run / "step-1" / "train_config.yaml").find("overwrite: true"),
            std::string::npos);
  const std::string step3 = read_text(run / "step-3" / "model.safetensors");
  EXPECT_NE(run_program({"train", "--no-sample", "--resume", (run / "step-1").string()},
                        tmp_ / "refused.log", &output),
            0);
  EXPECT_MENTIONS(output, "holds checkpoints of later steps (step-2, step-3)");
  EXPECT_MENTIONS(output, "--set out.overwrite=true");
  EXPECT_EQ(read_text(run / "step-3" / "model.safetensors"), step3);
  EXPECT_TRUE(fs::exists(run / "step-2"));
  ASSERT_EQ(run_program({"train", "--no-sample", "--resume", (run / "step-1").string(), "--set",
                         "out.overwrite=true", "--set", "train.steps=2"},
                        tmp_ / "replaced.log", &output),
            0)
      << output;
  EXPECT_MENTIONS(output, "the checkpoints of steps after the resumed 1");
  EXPECT_FALSE(fs::exists(run / "step-3"));
  EXPECT_TRUE(fs::exists(run / "step-2"));
}

// Note [out.dir's config.yaml]: a config kept as out.dir's config.yaml was
// replaced by the run's resolved dump (its comments gone): refused, the file
// as it was; trained from a copy, the run writes its dump there, and a run
// from that dump (it carries the header) is taken.
TEST_F(OutDir, AHandWrittenConfigInOutDirIsNotRewritten) {
  const fs::path exp = tmp_ / "exp1";
  fs::create_directories(exp);
  std::string demo = read_text(assets_dir() / "demo" / "gsm8k.yaml");
  const auto set_line = [&](const std::string& from, const std::string& to) {
    const size_t at = demo.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    demo.replace(at, demo.find('\n', at) - at, to);
  };
  set_line("  steps: 60", "  steps: 1");
  set_line("  save_every: 30", "  save_every: 0");
  set_line("  dir: ", "  dir: " + exp.string());
  const std::string mine = demo + "# tuned by hand\n";
  write_text(exp / "config.yaml", mine);
  std::string output;
  EXPECT_NE(run_program({"train", (exp / "config.yaml").string(), "--no-sample"},
                        tmp_ / "refused.log", &output),
            0);
  EXPECT_MENTIONS(
      output, (exp / "config.yaml").string() + " is out.dir's config.yaml, which the run rewrites");
  EXPECT_EQ(read_text(exp / "config.yaml"), mine);
  write_text(tmp_ / "mine.yaml", mine);
  ASSERT_EQ(run_program({"train", (tmp_ / "mine.yaml").string(), "--no-sample"}, tmp_ / "copy.log",
                        &output),
            0)
      << output;
  const std::string dump = read_text(exp / "config.yaml");
  EXPECT_EQ(dump.rfind("# lazytrain: the resolved config of the run in this folder", 0), 0u)
      << dump;
  EXPECT_EQ(dump.find("tuned by hand"), std::string::npos);
  EXPECT_EQ(run_program({"train", (exp / "config.yaml").string(), "--no-sample", "--set",
                         "out.overwrite=true"},
                        tmp_ / "again.log", &output),
            0)
      << output;
  // A dump written before the header line was (the same text without it)
  // is a run's own too.
  const std::string header = "# lazytrain: the resolved config";
  std::string old_dump = read_text(exp / "config.yaml");
  old_dump.erase(0, old_dump.find('\n') + 1);
  ASSERT_EQ(old_dump.find(header), std::string::npos);
  write_text(exp / "config.yaml", old_dump);
  EXPECT_EQ(run_program({"train", (exp / "config.yaml").string(), "--no-sample", "--set",
                         "out.overwrite=true"},
                        tmp_ / "old_dump.log", &output),
            0)
      << output;
}

}  // namespace
}  // namespace lt::train::testing
