// Config errors: every bad key or value is an lt::Error that names the key.
#include <gtest/gtest.h>

#include "config_errors.h"

namespace lt::train::testing {
namespace {

TEST_F(ConfigErrors, TheValidBaseLoads) {
  TrainConfig c;
  write_text(tmp_ / "ok.yaml", yaml());
  ASSERT_NO_THROW(c = load_train_config((tmp_ / "ok.yaml").string(), {"train.steps=7"}));
  EXPECT_EQ(c.train.steps, 7);  // --set after the file
  EXPECT_EQ(c.data.format, "tokens");
}

// train.dtype defaults to auto: bf16 compute on cuda (streaming needs it;
// half the activations), f32 on the CPU (no bf16 kernels there).
TEST_F(ConfigErrors, ComputeDtypeAutoResolvesPerDevice) {
  write_text(tmp_ / "ok.yaml", yaml());
  const TrainConfig c = load_train_config((tmp_ / "ok.yaml").string(), {});
  EXPECT_EQ(c.train.dtype, "auto");
  EXPECT_EQ(resolve_compute_dtype(c.train.dtype, /*on_cuda=*/true), "bf16");
  EXPECT_EQ(resolve_compute_dtype(c.train.dtype, /*on_cuda=*/false), "f32");
  EXPECT_EQ(resolve_compute_dtype("f32", /*on_cuda=*/true), "f32");
  EXPECT_EQ(resolve_compute_dtype("bf16", /*on_cuda=*/false), "bf16");
  const std::string m = error_of(yaml(), {"train.dtype=fp16"});
  EXPECT_MENTIONS(m, "train.dtype");
  EXPECT_MENTIONS(m, "auto");
}

TEST_F(ConfigErrors, UnknownKey) {
  std::string m = error_of(yaml("  stepz: 10\n"));
  EXPECT_MENTIONS(m, "train.stepz");
  EXPECT_MENTIONS(m, "steps");  // the known keys are listed
}

// A data path that is there but is no file is called what it is (it said
// "no file" of a folder that exists); one that is not there, "no file".
TEST_F(ConfigErrors, ADataPathThatIsAFolderIsCalledAFolder) {
  fs::create_directories(tmp_ / "rows");
  EXPECT_MENTIONS(
      error_of(yaml(), {"data.path=" + (tmp_ / "rows").string()}),
      "config key 'data.path': '" + (tmp_ / "rows").string() + "' is a folder, not a file");
  EXPECT_MENTIONS(
      error_of(yaml(), {"data.eval_path=" + (tmp_ / "rows").string()}),
      "config key 'data.eval_path': '" + (tmp_ / "rows").string() + "' is a folder, not a file");
  EXPECT_MENTIONS(error_of(yaml(), {"data.path=" + (tmp_ / "gone.jsonl").string()}),
                  "config key 'data.path': no file '" + (tmp_ / "gone.jsonl").string() + "'");
  // A schedule file likewise, named with the key (it said only "cannot
  // open the file", once the model had loaded).
  EXPECT_MENTIONS(error_of(yaml(), {"exec.schedule=" + (tmp_ / "gone.json").string()}),
                  "config key 'exec.schedule': no file '" + (tmp_ / "gone.json").string() +
                      "' (all_gpu, every_k, auto, or a schedule JSON path)");
}

TEST_F(ConfigErrors, UnknownSection) {
  const std::string m = error_of(yaml("", "trian:\n  steps: 3\n"));
  EXPECT_MENTIONS(m, "'trian'");
  // Every section the parser takes is listed (dist was left out once).
  EXPECT_MENTIONS(m, "(known: data, dist, exec, model, optim, out, sched, train)");
}

// A value the parser takes but the checks refuse names where it was set:
// the file and its line, or the --set override.
TEST_F(ConfigErrors, ARefusedValueNamesTheFileAndLineOrTheOverride) {
  // yaml(): model, path, data, path, format, train, steps (line 7).
  std::string text = yaml();
  text.replace(text.find("steps: 2"), 8, "steps: -3");
  std::string m = error_of(text);
  EXPECT_MENTIONS(m, (tmp_ / "run.yaml").string() + " (line 7): config key 'train.steps'");
  m = error_of(yaml("  batch_size: 8\n  grad_accum: 3\n"));
  EXPECT_MENTIONS(m, (tmp_ / "run.yaml").string() + " (line 9): config key 'train.grad_accum'");
  m = error_of(yaml(), {"train.steps=0"});
  EXPECT_MENTIONS(m, "--set train.steps=0: config key 'train.steps'");
}

// sched.name defaults to constant, which never decays: a floor set without
// naming a decaying schedule (the README's example names cosine) did
// nothing, without a word. Said, naming the key; not for cosine or linear.
TEST_F(ConfigErrors, AFloorForTheConstantScheduleIsSaid) {
  const std::string never =
      " is set, but sched.name is constant (the default), which never "
      "decays: the rate stays at optim.lr after the warmup";
  EXPECT_MENTIONS(notes({"sched.min_lr=1e-6"}), "sched.min_lr" + never);
  EXPECT_MENTIONS(notes({"sched.min_lr_ratio=0.1"}), "sched.min_lr_ratio" + never);
  EXPECT_EQ(notes({"sched.min_lr_ratio=0.1", "sched.name=cosine"}), "");
  EXPECT_EQ(notes({"sched.min_lr=1e-6", "sched.name=linear"}), "");
  EXPECT_EQ(notes({"sched.warmup_steps=1"}), "");  // constant warms up; nothing unused
}

// Held-out rows with train.eval_every 0 are never evaluated: said, and for
// data.eval_split, that its share still leaves training; train.eval_every
// with no held-out rows is said too.
TEST_F(ConfigErrors, HeldOutRowsWithoutEvaluationAreSaid) {
  EXPECT_EQ(notes({}), "");
  EXPECT_MENTIONS(notes({"data.eval_split=0.2"}),
                  "train.eval_every is 0: they are never evaluated, "
                  "and data.eval_split still keeps its share out");
  EXPECT_MENTIONS(notes({"data.eval_path=" + (tmp_ / "data.jsonl").string()}),
                  "never evaluated (set train.eval_every)");
  EXPECT_EQ(notes({"data.eval_split=0.2", "train.eval_every=2"}), "");
  // The other way round: an evaluation with nothing held out did nothing, silently.
  EXPECT_MENTIONS(notes({"train.eval_every=2"}),
                  "train.eval_every is 2 but no held-out rows are set: nothing is evaluated");
}

// Input paths are kept absolute, so that the config a run saves names the
// same files from any folder (a resume started elsewhere).
TEST_F(ConfigErrors, RelativeInputPathsAreSavedAbsolute) {
  write_text(tmp_ / "ok.yaml", yaml());
  const fs::path here = fs::current_path();
  fs::current_path(tmp_.path());
  TrainConfig c;
  try {
    c = load_train_config((tmp_ / "ok.yaml").string(), {"data.path=data.jsonl"});
  } catch (...) {
    fs::current_path(here);
    throw;
  }
  fs::current_path(here);
  EXPECT_EQ(c.data.path, (tmp_ / "data.jsonl").string());
  EXPECT_MENTIONS(c.to_yaml(), (tmp_ / "data.jsonl").string());
}

TEST_F(ConfigErrors, WrongType) {
  std::string text = yaml();
  text.replace(text.find("steps: 2"), 8, "steps: \"ten\"");
  std::string m = error_of(text);
  EXPECT_MENTIONS(m, "train.steps");
  EXPECT_MENTIONS(m, "ten");
  EXPECT_MENTIONS(error_of(yaml("  grad_clip: [1]\n")), "train.grad_clip");
  EXPECT_MENTIONS(error_of(yaml("", "optim:\n  betas: 0.9\n")), "optim.betas");
  EXPECT_MENTIONS(error_of(yaml(), {"data.pack=maybe"}), "data.pack");
}

// yaml-cpp reads YAML 1.1's octal: `steps: 010` trained 8 steps, and
// `--set train.seq_len=064` cut at 52, while `08` was "expected an
// integer". YAML 1.2's core schema reads digits with a leading zero as
// decimal ([-+]?[0-9]+), as a user does; hexadecimal stays.
TEST_F(ConfigErrors, IntegersWithALeadingZeroAreDecimal) {
  std::string text = yaml("  batch_size: 08\n");
  text.replace(text.find("steps: 2"), 8, "steps: 010");
  write_text(tmp_ / "zeros.yaml", text);
  const TrainConfig c =
      load_train_config((tmp_ / "zeros.yaml").string(), {"train.seq_len=064", "train.seed=+007"});
  EXPECT_EQ(c.train.steps, 10);
  EXPECT_EQ(c.train.batch_size, 8);
  EXPECT_EQ(c.train.seq_len, 64);
  EXPECT_EQ(c.train.seed, 7u);
  EXPECT_EQ(load_train_config((tmp_ / "zeros.yaml").string(), {"train.seq_len=0x40"}).train.seq_len,
            64);
  EXPECT_MENTIONS(error_of(yaml(), {"train.steps=-010"}), "train.steps");
  EXPECT_MENTIONS(error_of(yaml(), {"train.steps=0a"}), "expected an integer, got '0a'");
}

TEST_F(ConfigErrors, ImpossibleValues) {
  EXPECT_MENTIONS(error_of(yaml("  batch_size: 0\n")), "train.batch_size");
  std::string m = error_of(yaml("  batch_size: 8\n  grad_accum: 3\n"));
  EXPECT_MENTIONS(m, "train.grad_accum");
  EXPECT_MENTIONS(m, "train.batch_size");
  EXPECT_MENTIONS(error_of(yaml(), {"train.steps=0"}), "train.steps");
  EXPECT_MENTIONS(error_of(yaml(), {"sched.name=step"}), "sched.name");
  EXPECT_MENTIONS(error_of(yaml(), {"optim.lr=-1"}), "optim.lr");
}

TEST_F(ConfigErrors, MissingModelFolder) {
  std::string m = error_of(yaml("", "", (tmp_ / "no_such_model").string()));
  EXPECT_MENTIONS(m, "model.path");
  EXPECT_MENTIONS(m, "no_such_model");
  EXPECT_MENTIONS(error_of(yaml(), {"data.path=" + (tmp_ / "none.jsonl").string()}), "data.path");
}

TEST_F(ConfigErrors, BadSetSyntax) {
  EXPECT_MENTIONS(error_of(yaml(), {"train.steps"}), "key=value");
  EXPECT_MENTIONS(error_of(yaml(), {"steps=3"}), "'steps'");
  EXPECT_MENTIONS(error_of(yaml(), {"train.steps.x=3"}), "train.steps.x");
  EXPECT_MENTIONS(error_of(yaml(), {"train.steps=[1"}), "train.steps");
  EXPECT_MENTIONS(error_of(yaml(), {"train.stepz=3"}), "train.stepz");
}

TEST_F(ConfigErrors, TheProgramReportsThemAndFails) {
  write_text(tmp_ / "run.yaml", yaml());
  std::string output;
  const int code = run_program(
      {"train", "--config", (tmp_ / "run.yaml").string(), "--set", "train.batch_size=zero"},
      tmp_ / "cli.log", &output);
  EXPECT_NE(code, 0) << output;
  EXPECT_GT(code, 0) << output;
  EXPECT_MENTIONS(output, "train.batch_size");
  EXPECT_MENTIONS(output, "error");
  EXPECT_FALSE(fs::exists(tmp_ / "out" / "metrics.jsonl"));  // nothing ran
}

// A text format with no tokenizer where one is looked for: the error names
// the key that chose the folder (model.path when data.tokenizer is unset,
// as here: the fixture has none) and the folder.
TEST_F(ConfigErrors, AMissingTokenizerNamesTheKeyThatChoseTheFolder) {
  write_text(tmp_ / "run.yaml", yaml());
  std::string output;
  EXPECT_NE(run_program({"train", (tmp_ / "run.yaml").string(), "--set", "data.format=alpaca"},
                        tmp_ / "tok.log", &output),
            0);
  EXPECT_MENTIONS(output, "data.format alpaca needs a tokenizer, read from model.path");
  EXPECT_MENTIONS(output, fixture("llama").string());
  EXPECT_NE(run_program({"train", (tmp_ / "run.yaml").string(), "--set", "data.format=alpaca",
                         "--set", "data.tokenizer=" + tmp_.path().string()},
                        tmp_ / "tok2.log", &output),
            0);
  EXPECT_MENTIONS(output, "read from data.tokenizer");
  EXPECT_FALSE(fs::exists(tmp_ / "out" / "metrics.jsonl"));  // nothing ran
}

// config.json is read before the data: a mistake in it was said only once
// a large dataset had been tokenized (minutes). Here every data row is bad
// too, and the config's error comes first; rope_theta -1 at the top level
// (no rope_parameters) is named by its field (it was "rope: theta must be
// positive", after the weights loaded).
TEST_F(ConfigErrors, AModelConfigMistakeIsSaidBeforeTheDataIsRead) {
  const fs::path model = tmp_ / "theta";
  fs::create_directories(model);
  auto config = nlohmann::json::parse(read_text(fixture("llama") / "config.json"));
  config["rope_theta"] = -1.0;
  config.erase("rope_parameters");
  config.erase("rope_scaling");
  write_text(model / "config.json", config.dump());
  write_text(tmp_ / "bad.jsonl", "not json\nnot json either\n");
  write_text(tmp_ / "run.yaml", yaml("", "", model.string()));
  const std::string message = training_error(load_train_config(
      (tmp_ / "run.yaml").string(), {"data.path=" + (tmp_ / "bad.jsonl").string()}));
  EXPECT_MENTIONS(message, (model / "config.json").string());
  EXPECT_MENTIONS(message, "field 'rope_theta': expected a positive number, got -1");
}

// A model whose f32 weights cannot fit in the host memory free stops before
// allocating them, naming its config.json: here 200 layers of hidden 65536
// (about 12 T parameters, 48 TB).
TEST_F(ConfigErrors, AModelLargerThanTheHostMemoryNamesItsConfig) {
  const fs::path model = tmp_ / "huge";
  fs::create_directories(model);
  auto config = nlohmann::json::parse(read_text(fixture("llama") / "config.json"));
  config["hidden_size"] = 65536;
  config["intermediate_size"] = 262144;
  config["num_hidden_layers"] = 200;
  config["num_attention_heads"] = 512;
  config["num_key_value_heads"] = 8;
  config["head_dim"] = 128;
  config["max_position_embeddings"] = 4096;  // holds train.seq_len's default, 512
  write_text(model / "config.json", config.dump());
  write_text(tmp_ / "run.yaml", yaml("", "", model.string()));
  std::string output;
  EXPECT_NE(run_program({"train", (tmp_ / "run.yaml").string(), "--set", "model.init=random"},
                        tmp_ / "huge.log", &output),
            0);
  EXPECT_MENTIONS(output, (model / "config.json").string());
  EXPECT_MENTIONS(output, "GB of host memory, more than the");
  EXPECT_FALSE(fs::exists(tmp_ / "out" / "metrics.jsonl"));  // nothing ran
}

// A batch whose plan needs more host memory than there is stops at the
// plan, naming the keys that size it, and leaves out.dir unmade: here 10^9
// sequences of 32 tokens, whose token ids and targets alone are 2 x 10^9 x
// 32 x 8 bytes = 512 GB, and whose activations are far more. (On the CPU
// it planned as "resident fits", then failed allocating its first batch.)
TEST_F(ConfigErrors, ABatchLargerThanTheHostMemoryIsRefusedAtThePlan) {
  write_text(tmp_ / "run.yaml", yaml("  seq_len: 32\n  batch_size: 1000000000\n"));
  std::string output;
  EXPECT_NE(run_program({"train", (tmp_ / "run.yaml").string(), "--set", "train.device=cpu",
                         "--set", "train.grad_accum=4"},
                        tmp_ / "batch.log", &output),
            0);
  EXPECT_MENTIONS(output, (tmp_ / "run.yaml").string() +
                              " (line 9): train.batch_size 1000000000 sequences of "
                              "train.seq_len 32 tokens: the run's plan (executor resident on cpu)");
  EXPECT_MENTIONS(output, "of host memory (on the CPU the device's memory is the host's;");
  EXPECT_MENTIONS(output, "or raise train.grad_accum (4 now)");
  EXPECT_MENTIONS(output, "250000000 sequences");  // a micro-batch
  EXPECT_EQ(output.find("allocation"), std::string::npos) << output;
  EXPECT_FALSE(fs::exists(tmp_ / "out")) << output;  // nothing written, not even the lock
}

// `lazytrain train run.yaml`: the config as the positional argument is
// read as --config is (the same error from the same file), and giving both
// is refused.
TEST_F(ConfigErrors, TheConfigMayBeThePositionalArgument) {
  write_text(tmp_ / "run.yaml", yaml());
  std::string output;
  EXPECT_NE(run_program({"train", (tmp_ / "run.yaml").string(), "--set", "train.batch_size=zero"},
                        tmp_ / "positional.log", &output),
            0);
  EXPECT_MENTIONS(output, "train.batch_size");
  EXPECT_NE(
      run_program({"train", (tmp_ / "run.yaml").string(), "--config", (tmp_ / "run.yaml").string()},
                  tmp_ / "both.log", &output),
      0);
  EXPECT_MENTIONS(output, "--config");
  // An override without its --set lands where the config would.
  EXPECT_NE(run_program({"train", "--set", "train.steps=1", "train.seq_len=8"}, tmp_ / "stray.log",
                        &output),
            0);
  EXPECT_MENTIONS(output, "each override needs its own --set (--set train.seq_len=8)");
  EXPECT_FALSE(fs::exists(tmp_ / "out" / "metrics.jsonl"));  // nothing ran
}

// A key given twice is refused, naming both lines (yaml-cpp would keep the
// last silently); so is a section given twice.
TEST_F(ConfigErrors, ADuplicateKeyNamesBothLines) {
  const std::string m = error_of(yaml("  seq_len: 16\n  seq_len: 32\n"));
  EXPECT_MENTIONS(m, "'train.seq_len' is given twice (lines 8 and 9)");
  EXPECT_MENTIONS(m, "run.yaml");
  const std::string s = error_of(yaml("", "train:\n  seed: 3\n"));
  EXPECT_MENTIONS(s, "'train' is given twice");
  // Inside a data.sources entry too (the last one won).
  const std::string d = (tmp_ / "data.jsonl").string();
  const std::string f = error_of(yaml(), {"data.sources=[{path: " + d + ", path: " + d + "}]"});
  EXPECT_MENTIONS(f, "config key 'data.sources[0]': field 'path' is given twice");
}

// A list or mapping used as a key is a config error naming the file, not an
// "unexpected error".
TEST_F(ConfigErrors, ANonScalarKeyNamesTheFile) {
  const std::string m = error_of(yaml("  [a, b]: 1\n"));
  EXPECT_MENTIONS(m, "run.yaml");
  EXPECT_MENTIONS(m, "a list or mapping as a key");
  const std::string section = error_of(yaml("", "? [x]\n: 1\n"));
  EXPECT_MENTIONS(section, "a section name");
}

// The demo's warmup and floor follow what the user sets: a rate below the
// demo's old floor and a run shorter than its warmup both load, and the
// schedule scales (a tenth of the rate, a tenth of the steps).
TEST_F(ConfigErrors, DemoDefaultsFollowTheUsersRateAndSteps) {
  TrainConfig c;
  ASSERT_NO_THROW(c = load_train_config("", {"optim.lr=1e-6", "train.steps=2"}));
  EXPECT_EQ(c.effective_warmup_steps(), 1);  // a tenth of 2, rounded up as transformers does
  EXPECT_DOUBLE_EQ(c.effective_min_lr(), 1e-7);
  c = load_train_config("", {"train.steps=200"});
  EXPECT_EQ(c.effective_warmup_steps(), 20);
  // A constant schedule never reads min_lr, so a floor above the rate is no
  // contradiction there; under cosine it is, naming both keys.
  ASSERT_NO_THROW(
      load_train_config("", {"sched.name=constant", "sched.min_lr=1e-3", "optim.lr=1e-6"}));
  const std::string m =
      error_of(yaml(), {"sched.name=cosine", "sched.min_lr=1e-3", "optim.lr=1e-6"});
  EXPECT_MENTIONS(m, "sched.min_lr");
  EXPECT_MENTIONS(m, "optim.lr");
  // An explicit warmup longer than the run is cut to it, with a note.
  c = load_train_config("", {"sched.warmup_steps=50", "train.steps=10"});
  EXPECT_EQ(c.effective_warmup_steps(), 10);
  ASSERT_EQ(c.adjustments().size(), 1u);
  EXPECT_MENTIONS(c.adjustments()[0], "sched.warmup_steps (50)");
}

// sched.warmup_ratio's steps as transformers' TrainingArguments computes
// them, math.ceil(train.steps * warmup_ratio) in doubles (Python's values:
// 4.5, 28.999999999999996, 7.000000000000001); truncating gave 4, 28, 7.
TEST_F(ConfigErrors, WarmupRatioRoundsUpAsTransformersDoes) {
  const auto warmup = [&](const std::string& ratio, const std::string& steps) {
    write_text(tmp_ / "run.yaml", yaml());
    return load_train_config((tmp_ / "run.yaml").string(),
                             {"sched.warmup_ratio=" + ratio, "train.steps=" + steps})
        .effective_warmup_steps();
  };
  EXPECT_EQ(warmup("0.15", "30"), 5);
  EXPECT_EQ(warmup("0.29", "100"), 29);
  EXPECT_EQ(warmup("0.07", "100"), 8);
  EXPECT_EQ(warmup("0.25", "100"), 25);
  EXPECT_EQ(warmup("0", "100"), 0);
}

// A user reads the message, not where the check sits in the source: the
// "[check ... at file:line]" suffix shows only with LT_DEBUG=1.
TEST_F(ConfigErrors, MessagesCarryNoSourceLocationUnlessDebugging) {
  write_text(tmp_ / "run.yaml", yaml());
  std::string output;
  EXPECT_NE(run_program({"train", (tmp_ / "run.yaml").string(), "--set", "train.steps=-3"},
                        tmp_ / "plain.log", &output),
            0);
  EXPECT_MENTIONS(output, "train.steps");
  EXPECT_EQ(output.find("[check"), std::string::npos) << output;
  EXPECT_EQ(output.find("unexpected error"), std::string::npos) << output;
}

// An out.dir the file system cannot create is an error naming out.dir.
TEST_F(ConfigErrors, AnOutDirThatCannotBeCreatedIsNamed) {
  write_text(tmp_ / "run.yaml", yaml());
  std::string output;
  const std::string too_long = (tmp_ / std::string(300, 'x')).string();
  EXPECT_NE(run_program({"train", (tmp_ / "run.yaml").string(), "--set", "out.dir=" + too_long},
                        tmp_ / "long.log", &output),
            0);
  EXPECT_MENTIONS(output, "out.dir");
  EXPECT_MENTIONS(output, "File name too long");
  EXPECT_EQ(output.find("unexpected error"), std::string::npos) << output;
}

}  // namespace
}  // namespace lt::train::testing
