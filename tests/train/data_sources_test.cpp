// data.sources and data.eval_split: the keys' parsing and errors, and
// training on a mixture: 3 steps + a resume to 6 give bitwise the losses of
// 6 steps in one go, the held-out rows are evaluated and never trained on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "data/mixture.h"
#include "train/checkpoint.h"
#include "train/run_setup.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

class DataSources : public ::testing::Test {
 protected:
  DataSources() : tmp_("data_sources") {
    write_random_tokens(tmp_ / "a.jsonl", 12, 97, 1);
    write_random_tokens(tmp_ / "b.jsonl", 5, 97, 2, 6);
  }
  // A config whose data section is `data` (indented lines).
  fs::path config_file(const std::string& data) {
    const fs::path file = tmp_ / "run.yaml";
    write_text(file, "model:\n  path: \"" + fixture("llama").string() +
                         "\"\n  init: pretrained\ndata:\n" + data +
                         "train:\n  steps: 2\n  batch_size: 2\n  seq_len: 32\n  device: cpu\n"
                         "out:\n  dir: \"" +
                         (tmp_ / "out").string() + "\"\n");
    return file;
  }
  std::string a() const { return (tmp_ / "a.jsonl").string(); }
  std::string b() const { return (tmp_ / "b.jsonl").string(); }
  std::string two_sources(const std::string& weight_b = "3", const std::string& extra = "") {
    return "  format: tokens\n  sources:\n    - path: \"" + a() +
           "\"\n      weight: 1\n    - {path: \"" + b() + "\", weight: " + weight_b + extra + "}\n";
  }
  std::string error_of(const std::string& data, const std::vector<std::string>& overrides = {}) {
    try {
      load_train_config(config_file(data).string(), overrides);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for:\n" << data;
    return "";
  }
  TempDir tmp_;
};

TEST_F(DataSources, AListOfSourcesLoadsWithDefaultsFromTheDataKeys) {
  const TrainConfig c =
      load_train_config(config_file(two_sources("3", ", split: train, template: chatml")).string(),
                        {"data.eval_split=0.25"});
  ASSERT_EQ(c.data.sources.size(), 2u);
  EXPECT_EQ(c.data.sources[0].path, a());
  EXPECT_EQ(c.data.sources[0].weight, 1.0);
  EXPECT_EQ(c.data.sources[0].format, "");
  EXPECT_EQ(c.data.sources[1].weight, 3.0);
  EXPECT_EQ(c.data.sources[1].template_name, "chatml");
  EXPECT_EQ(c.data.eval_split, 0.25);
  const auto sources = data_sources(c);
  EXPECT_EQ(sources[0].format, "tokens");         // data.format's
  EXPECT_EQ(sources[0].template_name, "auto");    // data.template's
  EXPECT_EQ(sources[1].template_name, "chatml");  // its own
  // The resolved config names them and reads back the same.
  const fs::path saved = tmp_ / "saved.yaml";
  write_text(saved, c.to_yaml());
  EXPECT_EQ(read_train_config_unchecked(saved).data.sources, c.data.sources);
}

TEST_F(DataSources, DataPathIsTheOneSourceShorthand) {
  const TrainConfig c =
      load_train_config(config_file("  path: \"" + a() + "\"\n  format: tokens\n").string(), {});
  const auto sources = data_sources(c);
  ASSERT_EQ(sources.size(), 1u);
  EXPECT_EQ(sources[0].path, a());
  EXPECT_EQ(sources[0].weight, 1.0);
  EXPECT_EQ(sources[0].split, "train");
}

TEST_F(DataSources, SetTakesAListToo) {
  const TrainConfig c = load_train_config(
      config_file("  path: \"" + a() + "\"\n").string(),
      {"data.path=", "data.sources=[{path: \"" + a() + "\", weight: 0.5}, {path: \"" + b() +
                         "\", format: tokens}]"});
  ASSERT_EQ(c.data.sources.size(), 2u);
  EXPECT_EQ(c.data.sources[0].weight, 0.5);
  EXPECT_EQ(c.data.sources[1].format, "tokens");
}

TEST_F(DataSources, BadSourcesNameTheEntryAndField) {
  std::string m = error_of(two_sources("0"));
  EXPECT_MENTIONS(m, "data.sources[1].weight");
  EXPECT_MENTIONS(m, "b.jsonl");
  EXPECT_MENTIONS(m, "positive");
  EXPECT_MENTIONS(error_of(two_sources("-2")), "data.sources[1].weight");
  EXPECT_MENTIONS(error_of(two_sources(".nan")), "data.sources[1].weight");
  m = error_of(two_sources("1", ", format: parquet"));
  EXPECT_MENTIONS(m, "data.sources[1].format");
  EXPECT_MENTIONS(m, "parquet");
  m = error_of(two_sources("1", ", template: vicuna"));
  EXPECT_MENTIONS(m, "data.sources[1].template");
  m = error_of(two_sources("1", ", split: test"));
  EXPECT_MENTIONS(m, "data.sources[1].split");
  m = error_of(two_sources("1", ", wieght: 2"));
  EXPECT_MENTIONS(m, "data.sources[1]");
  EXPECT_MENTIONS(m, "unknown field 'wieght'");
  m = error_of("  sources:\n    - path: \"" + (tmp_ / "missing.jsonl").string() + "\"\n");
  EXPECT_MENTIONS(m, "data.sources[0].path");
  EXPECT_MENTIONS(m, "missing.jsonl");
  EXPECT_MENTIONS(error_of("  sources:\n    - weight: 2\n"), "data.sources[0].path' is required");
  EXPECT_MENTIONS(error_of("  sources: [a.jsonl]\n"), "data.sources[0]");
  m = error_of("  path: \"" + a() + "\"\n" + two_sources());
  EXPECT_MENTIONS(m, "config key 'data.sources' is set, and 'data.path' too");
  EXPECT_MENTIONS(m, "run.yaml (line ");  // where the sources begin
  // A mapping where the list goes, and a --set's value error (one line of
  // YAML: no line named).
  EXPECT_MENTIONS(error_of("  sources: {path: a.jsonl}\n"),
                  "'data.sources' takes a list of sources, each '- path: FILE', not a mapping");
  m = error_of(two_sources(), {"train.steps=abc"});
  EXPECT_MENTIONS(m, "--set train.steps=abc: config key 'train.steps': expected an integer");
  EXPECT_MENTIONS(error_of("  sources: []\n"), "data.path' is required");
  m = error_of("  sources:\n    - {path: \"" + a() + "\", split: eval}\n");
  EXPECT_MENTIONS(m, "at least one must be split train");
  m = error_of(two_sources(), {"data.eval_split=1"});
  EXPECT_MENTIONS(m, "data.eval_split");
  EXPECT_MENTIONS(error_of(two_sources(), {"data.eval_split=-0.1"}), "data.eval_split");
}

// A refused value inside an entry names the config file and the line of
// its field (of the entry, for a field left out), or the --set it came
// from, as the other keys' errors do. two_sources(): the data section
// starts at line 5; entry 1 is the flow mapping on line 9.
TEST_F(DataSources, BadSourcesNameTheFileAndLine) {
  const std::string file = (tmp_ / "run.yaml").string();
  std::string m = error_of(two_sources("0"));
  EXPECT_MENTIONS(m, file + " (line 9): config key 'data.sources[1].weight'");
  m = error_of(two_sources("1", ", format: parquet"));
  EXPECT_MENTIONS(m, file + " (line 9): config key 'data.sources[1].format'");
  m = error_of(two_sources("1", ", split: test"));
  EXPECT_MENTIONS(m, file + " (line 9): config key 'data.sources[1].split'");
  // An eval source's weight would do nothing (it is scored whole): refused,
  // save the 1 a saved config writes.
  m = error_of(two_sources("5", ", split: eval"));
  EXPECT_MENTIONS(m, file + " (line 9): config key 'data.sources[1].weight' (" + b() +
                         "): an eval source is scored whole, each row once, so its weight 5 "
                         "would do nothing; drop it");
  EXPECT_NO_THROW(load_train_config(config_file(two_sources("1", ", split: eval")).string(), {}));
  // Block mappings: each field on its own line.
  m = error_of("  sources:\n    - path: \"" + a() + "\"\n      template: vicuna\n    - path: \"" +
               (tmp_ / "missing.jsonl").string() + "\"\n");
  EXPECT_MENTIONS(m, file + " (line 7): config key 'data.sources[0].template'");
  m = error_of("  sources:\n    - path: \"" + a() + "\"\n    - path: \"" +
               (tmp_ / "missing.jsonl").string() + "\"\n");
  EXPECT_MENTIONS(m, file + " (line 7): config key 'data.sources[1].path': no file");
  m = error_of("  sources:\n    - path: \"" + a() + "\"\n    - weight: 2\n      split: eval\n");
  EXPECT_MENTIONS(m, file + " (line 7): config key 'data.sources[1].path' is required");
  // A value that is not of the field's type is refused as it is read.
  m = error_of(two_sources("heavy"));
  EXPECT_MENTIONS(m, file + ": config key 'data.sources[1].weight' (line 9): expected a number");
  // An override names itself, and the file's entries it replaced are gone.
  const std::string set = "data.sources=[{path: \"" + a() + "\", weight: -1}]";
  m = error_of(two_sources(), {set});
  EXPECT_MENTIONS(m, "--set " + set + ": config key 'data.sources[0].weight'");
}

// A chat file in a list of sources under data.format query_response: the
// format to set is the entry's (it named data.format, or only its fields).
TEST_F(DataSources, ASourceOfAnotherFormatNamesItsOwnFormatKey) {
  write_text(tmp_ / "chat.jsonl",
             "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}, "
             "{\"role\": \"assistant\", \"content\": \"hello\"}]}\n");
  const std::string data = "  format: query_response\n  sources:\n    - path: \"" +
                           (tmp_ / "chat.jsonl").string() + "\"\n";
  const TrainConfig c = load_train_config(config_file(data).string(), {});
  ProgressBar log(0, 1);
  std::string m;
  try {
    load_training_data(c, nullptr, &log);
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_MENTIONS(m,
                  "its fields are those of format sharegpt: set data.sources[0].format to "
                  "sharegpt (or auto)");
}

std::vector<std::string> mixture_overrides(int64_t steps) {
  return {"train.steps=" + std::to_string(steps), "train.batch_size=3", "optim.lr=5e-3",
          "data.pack=true", "train.seq_len=9"};
}

uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

TEST_F(DataSources, AMixedRunResumesBitwise) {
  const std::string data_keys = two_sources("2.5");
  auto with = [&](int64_t steps, const std::string& out) {
    auto overrides = mixture_overrides(steps);
    overrides.push_back("out.dir=" + (tmp_ / out).string());
    return load_train_config(config_file(data_keys).string(), overrides);
  };
  train_quietly(with(6, "a"));
  train_quietly(with(3, "b"));
  const auto saved = read_checkpoint(tmp_ / "b" / "step-3").state.sampler;
  EXPECT_GT(saved.draws, 0u);  // the mixture's state was saved
  train_quietly(with(6, "b"), "latest");
  const auto a_lines = read_metrics(tmp_ / "a"), b_lines = read_metrics(tmp_ / "b");
  ASSERT_EQ(a_lines.size(), 6u);
  ASSERT_EQ(b_lines.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    for (const char* key : {"loss", "grad_norm"}) {
      EXPECT_EQ(bits(a_lines[i].at(key).get<double>()), bits(b_lines[i].at(key).get<double>()))
          << key << " of step " << i;
    }
  }
  EXPECT_EQ(read_checkpoint(tmp_ / "a" / "step-6").state.sampler,
            read_checkpoint(tmp_ / "b" / "step-6").state.sampler);
  // The weights matter: another weight is another stream.
  auto other = mixture_overrides(6);
  other.push_back("out.dir=" + (tmp_ / "c").string());
  train_quietly(load_train_config(config_file(two_sources("0.2")).string(), other));
  const auto c_lines = read_metrics(tmp_ / "c");
  bool differ = false;
  for (size_t i = 0; i < 6; ++i) differ |= a_lines[i].at("loss") != c_lines[i].at("loss");
  EXPECT_TRUE(differ);
}

TEST_F(DataSources, HeldOutRowsAreEvaluatedAndNotTrainedOn) {
  write_random_tokens(tmp_ / "big.jsonl", 200, 97, 5);
  const TrainConfig c = load_train_config(
      config_file("  path: \"" + (tmp_ / "big.jsonl").string() + "\"\n  format: tokens\n").string(),
      {"data.eval_split=0.1", "train.eval_every=1"});
  ProgressBar log(0, 1);  // lines to stderr
  const TrainingData d = load_training_data(c, nullptr, &log);
  ASSERT_EQ(d.train.size(), 1u);
  ASSERT_EQ(d.eval.size(), 1u);
  // The rule of data/mixture.h, row by row, as the reference.
  data::DatasetOptions tokens;
  tokens.format = "tokens";
  std::vector<data::Sample> all = data::load_dataset(tmp_ / "big.jsonl", nullptr, tokens, nullptr);
  size_t held = 0;
  for (const auto& s : all) held += data::is_held_out(s, 0.1, c.train.seed);
  EXPECT_EQ(d.eval[0].samples.size(), held);
  EXPECT_EQ(d.train[0].samples.size() + held, all.size());
  for (const auto& s : d.train[0].samples) EXPECT_FALSE(data::is_held_out(s, 0.1, 0));
  EXPECT_GT(held, 5u);  // Binomial(200, 0.1): 20 expected
  train_quietly(c);
  for (const auto& line : read_metrics(tmp_ / "out")) EXPECT_TRUE(line.contains("eval_loss"));
}

// data.eval_split holds out each sample by a seeded hash: on a small file a
// small share can hold out none. train.eval_every then evaluated nothing
// and no step logged an eval_loss, the run saying only "holds out 0 of 5".
// It says so as a warning, naming both keys; with a sample held out, not.
TEST_F(DataSources, AnEvalSplitHoldingOutNothingIsSaid) {
  const std::string data = "  path: \"" + b() + "\"\n  format: tokens\n";
  const auto setup_lines = [&](const std::string& split) {
    const TrainConfig c = load_train_config(config_file(data).string(),
                                            {"data.eval_split=" + split, "train.eval_every=1"});
    ::testing::internal::CaptureStderr();
    {
      ProgressBar log(0, 1);
      load_training_data(c, nullptr, &log);
    }
    return ::testing::internal::GetCapturedStderr();
  };
  // The rule of data/mixture.h, row by row, says what each share holds out.
  data::DatasetOptions tokens;
  tokens.format = "tokens";
  const std::vector<data::Sample> all = data::load_dataset(b(), nullptr, tokens, nullptr);
  const auto held = [&](double split) {
    return std::count_if(all.begin(), all.end(),
                         [&](const data::Sample& s) { return data::is_held_out(s, split, 0); });
  };
  ASSERT_EQ(held(0.001), 0);
  const std::string none = setup_lines("0.001");
  EXPECT_MENTIONS(none,
                  "data: warning: data.eval_split 0.001 held out no sample, so "
                  "train.eval_every 1 evaluates nothing");
  ASSERT_GT(held(0.5), 0);
  ASSERT_LT(held(0.5), static_cast<int64_t>(all.size()));  // some left to train on
  EXPECT_EQ(setup_lines("0.5").find("evaluates nothing"), std::string::npos);
}

// data.eval_path's line is marked "data (eval)": the same file as data.path
// printed two lines alike. When it is the training file (here through
// a link to it) a warning says, once, that the evaluation
// measures trained rows; another file, none. A file of one row says
// "1 sample from 1 row".
TEST_F(DataSources, AnEvalPathThatIsTheTrainingFileIsMarkedAndWarned) {
  const std::string data = "  path: \"" + a() + "\"\n  format: tokens\n";
  const auto setup_lines = [&](const std::string& eval_path) {
    const TrainConfig c = load_train_config(config_file(data).string(),
                                            {"data.eval_path=" + eval_path, "train.eval_every=1"});
    ::testing::internal::CaptureStderr();
    {
      ProgressBar log(0, 1);
      load_training_data(c, nullptr, &log);
    }
    return ::testing::internal::GetCapturedStderr();
  };
  fs::create_symlink(tmp_ / "a.jsonl", tmp_ / "link.jsonl");
  const std::string same_path = (tmp_ / "link.jsonl").string();
  const std::string same = setup_lines(same_path);
  EXPECT_MENTIONS(same,
                  "data (eval): 12 samples from 12 rows of " + same_path + " (format tokens)");
  EXPECT_MENTIONS(same, "data: 12 samples from 12 rows of " + a() + " (format tokens)");
  const std::string warning = "data: warning: data.eval_path " + same_path +
                              " is the same file as data.path " + a() +
                              ": the evaluation then measures rows the run trains on, not "
                              "held-out ones (hold rows out with data.eval_split, or evaluate "
                              "another file)";
  EXPECT_MENTIONS(same, warning);
  EXPECT_EQ(same.find(warning), same.rfind(warning)) << same;  // once
  const std::string other = setup_lines(b());
  EXPECT_EQ(other.find("is the same file as"), std::string::npos) << other;
  EXPECT_MENTIONS(other, "data (eval): 5 samples from 5 rows of " + b());

  write_random_tokens(tmp_ / "one.jsonl", 1, 97, 3);
  EXPECT_MENTIONS(setup_lines((tmp_ / "one.jsonl").string()),
                  "data (eval): 1 sample from 1 row of " + (tmp_ / "one.jsonl").string() + " (");
}

}  // namespace
}  // namespace lt::train::testing
