// A resume on data edited in place (the same data.path, other samples) is
// noticed by the checkpoint's fingerprints and read from its beginning, as
// a new data.path is, saying how it changed; before, the sampler went on
// at its position in the new rows without a word, and a file cut below
// that position stopped the run naming no file. A checkpoint saved before
// the fingerprints still resumes.
//
// 12 rows, batch 2: 3 steps leave the sampler at position 6 of epoch 0,
// and 2 more steps take 4 samples: to position 10 going on, to 4 reading
// from the beginning (to epoch 1, position 0 in a file cut to 4 rows).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "train/checkpoint.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class ResumeDataChanged : public ::testing::Test {
 protected:
  ResumeDataChanged() : tmp_("resume_data_changed") {
    write_random_tokens(data(), 12, 97, 11);
    train_quietly(config(3));
  }
  fs::path data() const { return tmp_ / "data.jsonl"; }
  fs::path out() const { return tmp_ / "out"; }
  TrainConfig config(int64_t steps) const {
    return fixture_config(fixture("llama"), data(), out(),
                          {"train.steps=" + std::to_string(steps), "train.keep_last=5"});
  }
  // The lines of data.jsonl, for editing it in place.
  std::vector<std::string> rows() const {
    std::vector<std::string> lines;
    std::istringstream in(read_text(data()));
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }
  void write_rows(const std::vector<std::string>& lines) const {
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    write_text(data(), text);
  }
  // Resumes to step 5 from the latest; what the run printed.
  std::string resume_to_5() const {
    ::testing::internal::CaptureStderr();
    try {
      train_quietly(config(5), "latest");
    } catch (...) {
      std::string said = ::testing::internal::GetCapturedStderr();
      ADD_FAILURE() << "the resume failed after printing:\n" << said;
      throw;
    }
    return ::testing::internal::GetCapturedStderr();
  }
  data::SamplerState sampler_at_5() const {
    return read_checkpoint(out() / "step-5").state.sampler;
  }
  std::string starts_over(const std::string& where) const {
    return "resume: the checkpoint's sampler (" + where +
           ") counts into the samples it was saved with, so reading starts at the data's "
           "beginning, as for new data (to go on where the checkpoint stopped, restore the data "
           "it was trained on)";
  }
  TempDir tmp_;
};

TEST_F(ResumeDataChanged, TheCheckpointRecordsTheDataItsSamplerWalks) {
  const nlohmann::json state =
      nlohmann::json::parse(read_text(out() / "step-3" / "trainer_state.json"));
  ASSERT_EQ(state.at("data").size(), 1u);
  EXPECT_EQ(state["data"][0].at("source"), data().string());
  EXPECT_EQ(state["data"][0].at("samples"), 12);
  // The same data goes on where the checkpoint stopped, saying nothing of it.
  const std::string said = resume_to_5();
  EXPECT_THAT(said, Not(HasSubstr("resume: data.path")));
  EXPECT_THAT(said, Not(HasSubstr("reading starts")));
  EXPECT_EQ(sampler_at_5(), (data::SamplerState{0, 10, 0, 0}));
}

TEST_F(ResumeDataChanged, ReorderedRowsAreReadFromTheBeginning) {
  std::vector<std::string> lines = rows();
  std::reverse(lines.begin(), lines.end());
  write_rows(lines);
  const std::string said = resume_to_5();
  EXPECT_THAT(said, HasSubstr("resume: data.path " + data().string() +
                              ": the same 12 samples as when the checkpoint was saved, in "
                              "another order"));
  EXPECT_THAT(said, HasSubstr(starts_over("position 6 of epoch 0")));
  EXPECT_EQ(sampler_at_5(), (data::SamplerState{0, 4, 0, 0}));
}

TEST_F(ResumeDataChanged, AnEditedRowIsNamedAsAChangeOfTheSameCount) {
  std::vector<std::string> lines = rows();
  nlohmann::json row = nlohmann::json::parse(lines[7]);
  ASSERT_NE(row["labels"][0], -100);
  row["labels"][0] = -100;  // its first token no longer trained on
  lines[7] = row.dump();
  write_rows(lines);
  EXPECT_THAT(resume_to_5(),
              HasSubstr("resume: data.path " + data().string() +
                        ": its samples changed since the checkpoint (the same count, 12): its "
                        "rows, or how they are tokenized"));
  EXPECT_EQ(sampler_at_5(), (data::SamplerState{0, 4, 0, 0}));
}

TEST_F(ResumeDataChanged, RowsCutBelowThePositionAreReadFromTheBeginning) {
  std::vector<std::string> lines = rows();
  lines.resize(4);
  write_rows(lines);
  EXPECT_THAT(resume_to_5(), HasSubstr("resume: data.path " + data().string() +
                                       ": 4 samples now, 12 when the checkpoint was saved"));
  EXPECT_EQ(sampler_at_5(), (data::SamplerState{1, 0, 0, 0}));
}

// A checkpoint saved before the fingerprints: the same data goes on where
// it stopped, saying the rows cannot be checked; data cut below its
// position is read from the beginning, naming the file and the counts.
TEST_F(ResumeDataChanged, ACheckpointWithoutFingerprintsStillResumes) {
  const fs::path state_file = out() / "step-3" / "trainer_state.json";
  nlohmann::json state = nlohmann::json::parse(read_text(state_file));
  state.erase("data");
  write_text(state_file, state.dump(1));
  fs::copy(out(), tmp_ / "old", fs::copy_options::recursive);

  const std::string same = resume_to_5();
  EXPECT_THAT(same, HasSubstr("resume: " + state_file.string() +
                              " records no fingerprint of its data (saved by an earlier version), "
                              "so a change to the data's rows since is noticed only when the "
                              "sampler's position lies past them"));
  EXPECT_EQ(sampler_at_5(), (data::SamplerState{0, 10, 0, 0}));

  fs::remove_all(out());
  fs::rename(tmp_ / "old", out());
  std::vector<std::string> lines = rows();
  lines.resize(4);
  write_rows(lines);
  EXPECT_THAT(resume_to_5(),
              HasSubstr("resume: " + data().string() +
                        ": the sampler's position 6 of epoch 0 is beyond the 4 samples it holds "
                        "now: the data changed since the checkpoint; reading starts at the data's "
                        "beginning"));
  EXPECT_EQ(sampler_at_5(), (data::SamplerState{1, 0, 0, 0}));
}

// data.sources: each source has its fingerprint, and the one edited is
// named by its entry; the mixture's draws start over.
TEST(ResumeMixtureChanged, TheEditedSourceIsNamedByItsEntry) {
  TempDir tmp("resume_mixture_changed");
  write_random_tokens(tmp / "a.jsonl", 12, 97, 1);
  write_random_tokens(tmp / "b.jsonl", 5, 97, 2, 6);
  auto config = [&](int64_t steps) {
    return fixture_config(
        fixture("llama"), tmp / "a.jsonl", tmp / "out",
        {"data.path=",
         "data.sources=[{path: \"" + (tmp / "a.jsonl").string() + "\", weight: 1}, {path: \"" +
             (tmp / "b.jsonl").string() + "\", weight: 3}]",
         "train.steps=" + std::to_string(steps)});
  };
  train_quietly(config(3));
  EXPECT_EQ(read_checkpoint(tmp / "out" / "step-3").state.data.size(), 2u);
  std::string b = read_text(tmp / "b.jsonl");
  b.erase(b.find('\n') + 1);  // b keeps its first row
  write_text(tmp / "b.jsonl", b);
  ::testing::internal::CaptureStderr();
  train_quietly(config(5), "latest");
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("resume: data.sources[1] " + (tmp / "b.jsonl").string() +
                              ": 1 sample now, 5 when the checkpoint was saved"));
  EXPECT_THAT(said, Not(HasSubstr("data.sources[0]")));
  EXPECT_THAT(said, HasSubstr("resume: the checkpoint's sampler (draw 6) counts into the samples "
                              "it was saved with, so reading starts at the data's beginning"));
  EXPECT_EQ(read_checkpoint(tmp / "out" / "step-5").state.sampler,
            (data::SamplerState{0, 0, 0, 4}));
}

}  // namespace
}  // namespace lt::train::testing
