// What a run does to an out.dir an earlier run wrote: a fresh run refuses
// to replace that run's checkpoints and metrics unless out.overwrite says
// to start over, and a run that fails while loading leaves the folder as it
// found it (it writes config.yaml only once it is set up).
#include <gtest/gtest.h>

#include <map>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

// Every folder and file under `dir`, with the files' contents.
std::map<std::string, std::string> contents_of(const fs::path& dir) {
  std::map<std::string, std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = fs::relative(entry.path(), dir).string();
    found[name] = entry.is_directory() ? "(folder)" : read_text(entry.path());
  }
  return found;
}

class EarlierRun : public ::testing::Test {
 protected:
  EarlierRun() : tmp_("earlier_run") { write_random_tokens(tmp_ / "data.jsonl", 8, 97, 5); }
  TrainConfig config(const std::vector<std::string>& overrides, const fs::path& out) {
    return fixture_config(fixture("llama"), tmp_ / "data.jsonl", out, overrides);
  }
  // The earlier run: two steps, saved at each (step-1, step-2).
  void run_earlier() {
    train_quietly(config({"train.steps=2", "train.save_every=1", "train.keep_last=5"}, out()));
    ASSERT_TRUE(fs::exists(out() / "step-1" / "trainer_state.json"));
    ASSERT_TRUE(fs::exists(out() / "step-2" / "trainer_state.json"));
    ASSERT_EQ(count_lines(out() / "metrics.jsonl"), 2u);
  }
  std::string error_of(const TrainConfig& c, const std::string& resume = "") {
    return training_error(c, resume);
  }
  fs::path out() const { return tmp_ / "out"; }
  TempDir tmp_;
};

// A fresh run into the earlier run's out.dir stops before it writes
// anything, naming the folder, the newest checkpoint and the ways on;
// out.overwrite: true starts over there.
TEST_F(EarlierRun, AFreshRunIsRefusedUnlessOutOverwriteIsSet) {
  run_earlier();
  const auto before = contents_of(out());
  const std::string m = error_of(config({"train.steps=3"}, out()));
  EXPECT_MENTIONS(m, "out.dir '" + out().string() + "'");
  EXPECT_MENTIONS(m, "2 checkpoint(s)");
  EXPECT_MENTIONS(m, "the newest is step-2");
  EXPECT_MENTIONS(m, "--resume latest");
  EXPECT_MENTIONS(m, "another out.dir");
  EXPECT_MENTIONS(m, "out.overwrite: true");
  EXPECT_EQ(contents_of(out()), before);

  train_quietly(config({"train.steps=3", "out.overwrite=true"}, out()));
  EXPECT_EQ(count_lines(out() / "metrics.jsonl"), 3u);
  EXPECT_TRUE(fs::exists(out() / "step-3" / "trainer_state.json"));
  // Started over: none of the earlier run's checkpoints stays beside this
  // run's (keep_last alone would have kept step-2).
  EXPECT_FALSE(fs::exists(out() / "step-1"));
  EXPECT_FALSE(fs::exists(out() / "step-2"));
  EXPECT_MENTIONS(read_text(out() / "config.yaml"), "steps: 3");
}

// A run that fails while loading (a --resume folder that is not there; a
// model folder without its weights) leaves the earlier run's config.yaml,
// metrics and checkpoints as they were.
TEST_F(EarlierRun, AFailedLoadLeavesTheEarlierRunsFilesAsTheyWere) {
  run_earlier();
  const auto before = contents_of(out());
  EXPECT_MENTIONS(read_text(out() / "config.yaml"), "steps: 2");
  error_of(config({"train.steps=5"}, out()), (tmp_ / "nonexistent").string());
  EXPECT_EQ(contents_of(out()), before);

  write_fixture_config(tmp_ / "no_weights", "llama", 2);
  error_of(config(
      {"train.steps=5", "out.overwrite=true", "model.path=" + (tmp_ / "no_weights").string()},
      out()));
  EXPECT_EQ(contents_of(out()), before);
}

// A failed run leaves no out.dir behind where there was none, and an empty
// one empty.
TEST_F(EarlierRun, AFailedLoadLeavesNoNewFolderBehind) {
  const fs::path nested = tmp_ / "new" / "a" / "b";
  error_of(config({"out.dir=" + nested.string()}, out()), (tmp_ / "nonexistent").string());
  EXPECT_FALSE(fs::exists(tmp_ / "new"));

  const fs::path empty = tmp_ / "empty";
  fs::create_directories(empty);
  error_of(config({}, empty), (tmp_ / "nonexistent").string());
  EXPECT_TRUE(fs::is_directory(empty));
  EXPECT_TRUE(fs::is_empty(empty));
}

// A resume from an earlier checkpoint into a folder where the run went on
// past it would prune the later checkpoints and cut metrics.jsonl: refused,
// naming them and the ways on; out.overwrite removes them once set up.
TEST_F(EarlierRun, AResumeFromBeforeLaterCheckpointsIsRefusedUnlessOutOverwriteIsSet) {
  run_earlier();
  const auto before = contents_of(out());
  const std::string from = (out() / "step-1").string();
  const std::string m = error_of(config({"train.steps=4", "train.save_every=1"}, out()), from);
  EXPECT_MENTIONS(m, "--resume " + from + " is at step 1");
  EXPECT_MENTIONS(m, "holds checkpoints of later steps (step-2)");
  EXPECT_MENTIONS(m, "cut metrics.jsonl to step 1");
  EXPECT_MENTIONS(m, "another out.dir");
  EXPECT_MENTIONS(m, "--resume " + (out() / "step-2").string());
  EXPECT_MENTIONS(m, "out.overwrite: true");
  EXPECT_EQ(contents_of(out()), before);
  // The newest resumes as before.
  train_quietly(config({"train.steps=3", "train.save_every=1", "train.keep_last=5"}, out()),
                "latest");
  EXPECT_EQ(count_lines(out() / "metrics.jsonl"), 3u);
  // Branching in place, asked for: the later ones go, step-1 stays.
  ::testing::internal::CaptureStdout();
  train_quietly(
      config({"train.steps=2", "train.save_every=0", "train.keep_last=5", "out.overwrite=true"},
             out()),
      from);
  const std::string said = ::testing::internal::GetCapturedStdout();
  EXPECT_MENTIONS(said, "removed the checkpoints of steps after the resumed 1 (step-");
  EXPECT_TRUE(fs::exists(out() / "step-1" / "trainer_state.json"));
  EXPECT_TRUE(fs::exists(out() / "step-2" / "trainer_state.json"));  // this run's
  EXPECT_FALSE(fs::exists(out() / "step-3"));
  EXPECT_EQ(count_lines(out() / "metrics.jsonl"), 2u);
}

// Branching from one's own checkpoint into the same out.dir with
// out.overwrite removed the model it starts from as the run set up,
// silently: refused before anything goes, naming the key and the
// checkpoint. A resume's later checkpoints likewise; earlier ones stay.
TEST_F(EarlierRun, OutOverwriteRefusesToRemoveACheckpointTheRunReads) {
  run_earlier();
  fs::copy_file(tmp_ / "data.jsonl", out() / "step-1" / "rows.jsonl");
  const auto before = contents_of(out());
  const fs::path base = out() / "step-2";
  std::string m = error_of(
      config({"train.steps=3", "out.overwrite=true", "model.path=" + base.string()}, out()));
  EXPECT_EQ(m, "model.path '" + base.string() + "' lies in " + base.string() +
                   ", a checkpoint of out.dir '" + out().string() +
                   "' that out.overwrite removes as the run starts: the run would delete what it "
                   "reads. Copy that checkpoint out of out.dir and point model.path at the copy, "
                   "or set another out.dir");
  EXPECT_EQ(contents_of(out()), before);
  // A file inside one is named the same way.
  const fs::path rows = out() / "step-1" / "rows.jsonl";
  m = error_of(
      config({"train.steps=3", "out.overwrite=true", "data.path=" + rows.string()}, out()));
  EXPECT_MENTIONS(m, "data.path '" + rows.string() + "' lies in " + (out() / "step-1").string());
  EXPECT_EQ(contents_of(out()), before);
  // Resuming from step-1 in place removes step-2 only.
  m = error_of(
      config({"train.steps=3", "out.overwrite=true", "model.path=" + base.string()}, out()),
      (out() / "step-1").string());
  EXPECT_MENTIONS(m, "model.path '" + base.string() + "' lies in " + base.string() +
                         ", a checkpoint of out.dir '" + out().string() +
                         "' that out.overwrite removes as the run starts (a step after the "
                         "resumed 1)");
  EXPECT_EQ(contents_of(out()), before);
  // A folder whose name only starts like a checkpoint's is no checkpoint:
  // the run reads from it and starts over.
  fs::create_directories(out() / "step-1-data");
  fs::copy_file(tmp_ / "data.jsonl", out() / "step-1-data" / "rows.jsonl");
  train_quietly(config({"train.steps=1", "out.overwrite=true",
                        "data.path=" + (out() / "step-1-data" / "rows.jsonl").string()},
                       out()));
  EXPECT_FALSE(fs::exists(out() / "step-2"));
  EXPECT_TRUE(fs::exists(out() / "step-1-data" / "rows.jsonl"));
}

// A run that saved nothing (killed, save_every 0) leaves only its
// metrics.jsonl: a fresh run does not replace it unasked.
TEST_F(EarlierRun, AFreshRunOverMetricsWithoutACheckpointIsRefused) {
  fs::create_directories(out());
  write_text(out() / "metrics.jsonl", "{\"step\": 0, \"loss\": 4.5}\n{\"step\": 1}\n");
  const std::string m = error_of(config({"train.steps=1"}, out()));
  EXPECT_MENTIONS(m, "holds an earlier run's metrics.jsonl (2 steps) and no checkpoint");
  EXPECT_MENTIONS(m, "out.overwrite: true");
  EXPECT_EQ(count_lines(out() / "metrics.jsonl"), 2u);
  train_quietly(config({"train.steps=1", "out.overwrite=true"}, out()));
  EXPECT_EQ(count_lines(out() / "metrics.jsonl"), 1u);
  // An empty one (a run that failed at its first step) is no record.
  fs::create_directories(tmp_ / "empty_out");
  write_text(tmp_ / "empty_out" / "metrics.jsonl", "");
  train_quietly(config({"train.steps=1"}, tmp_ / "empty_out"));
}

// A resume without a config reads the checkpoint's train_config.yaml, whose
// out.dir may be relative to where that run started: the run goes on in
// the checkpoint's own folder unless --set out.dir names another.
TEST_F(EarlierRun, AResumeWithoutAConfigGoesOnInTheCheckpointsFolder) {
  run_earlier();
  // As a run started in another folder with `out.dir: out` would save it.
  const fs::path saved = out() / "step-2" / "train_config.yaml";
  std::string text = read_text(saved);
  const std::string absolute = "dir: " + out().string();
  ASSERT_NE(text.find(absolute), std::string::npos) << text;
  text.replace(text.find(absolute), absolute.size(), "dir: out");
  write_text(saved, text);
  const std::string from = (out() / "step-2").string();
  EXPECT_EQ(fs::path(load_train_config_for("", {"train.steps=3"}, &from).out.dir), out());
  EXPECT_EQ(
      fs::path(load_train_config_for("", {"out.dir=" + (tmp_ / "b").string()}, &from).out.dir),
      tmp_ / "b");
  // A config's relative out.dir is saved absolute.
  EXPECT_TRUE(fs::path(load_train_config("", {"out.dir=rel"}).out.dir).is_absolute());
}

// `make demo` runs the embedded demo, which starts over in runs/demo each
// time; the demo config on another model or other data is a run of the
// user's, refused as any other unless it sets out.overwrite.
TEST_F(EarlierRun, TheDemoStartsOverButAnotherRunOnItsConfigDoesNot) {
  const std::string data = (tmp_ / "data.jsonl").string();
  EXPECT_TRUE(load_train_config("", {}).out.overwrite);
  EXPECT_TRUE(load_train_config("", {"out.dir=" + out().string()}).out.overwrite);
  EXPECT_FALSE(load_train_config("", {"data.path=" + data}).out.overwrite);
  EXPECT_FALSE(load_train_config("", {"model.path=" + fixture("llama").string()}).out.overwrite);
  EXPECT_TRUE(load_train_config("", {"data.path=" + data, "out.overwrite=true"}).out.overwrite);
  EXPECT_FALSE(TrainConfig{}.out.overwrite);
}

}  // namespace
}  // namespace lt::train::testing
