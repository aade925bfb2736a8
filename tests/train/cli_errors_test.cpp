// What the commands say of a mistake common to all of them: a model folder
// without config.json, a command line CLI11 cannot parse.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "support/cli_run.h"
#include "train_helpers.h"

namespace lt::train::testing {
namespace {

using lt::testing::CliResult;
using lt::testing::run_lazytrain;

// Every command that reads a model folder refuses one without config.json
// as train does (io::not_a_model_folder): "'DIR' is not a model folder (no
// config.json there)", after the setting that named it, and naming the
// weights it holds that this program does not read. convert, plan,
// profile, eval and generate said only "config 'DIR/config.json': cannot
// open".
TEST(CliErrors, AFolderWithoutConfigJsonIsRefusedAsTrainRefusesIt) {
  TempDir tmp("model_folder_cli");
  const fs::path gguf = tmp.path() / "gguf2";
  fs::create_directories(gguf);
  std::ofstream(gguf / "model-q4.gguf") << "GGUF";
  std::ofstream(tmp.path() / "rows.jsonl") << "{\"input_ids\": [1, 2, 3]}\n";
  const std::string dir = gguf.string();
  const std::string why =
      "'" + dir +
      "' is not a model folder (no config.json there); it holds model-q4.gguf (weights in a "
      "format this program does not read: it reads safetensors)";
  // The command, and the setting its message begins with.
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"train --no-sample --set model.path=" + dir, "config key 'model.path': "},
      {"plan --model " + dir, "--model "},
      {"profile --model " + dir + " --out " + (tmp.path() / "hw.yaml").string(), "--model "},
      {"convert --model " + dir + " --out " + (tmp.path() / "out").string(), "--model "},
      {"eval --model " + dir + " --data " + (tmp.path() / "rows.jsonl").string(), "--model "},
      {"eval --task math --model " + dir + " --data " + (tmp.path() / "rows.jsonl").string(),
       "--model "},
      {"generate --model " + dir + " --prompt hi", "--model "},
  };
  for (const auto& [command, named_by] : commands) {
    const CliResult r = run_lazytrain(command);
    EXPECT_EQ(r.status, 1) << command << ": " << r.out;
    EXPECT_NE(r.out.find(named_by + why), std::string::npos) << command << ": " << r.out;
  }
  EXPECT_FALSE(fs::exists(tmp.path() / "hw.yaml"));
  EXPECT_FALSE(fs::exists(tmp.path() / "out"));

  // Safetensors weights without config.json: the weights are not the fault.
  const fs::path st = tmp.path() / "st";
  fs::create_directories(st);
  std::ofstream(st / "model.safetensors") << "x";
  const CliResult r = run_lazytrain("plan --model " + st.string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("lazytrain: error: --model '" + st.string() +
                       "' is not a model folder (no config.json there)\n"),
            std::string::npos)
      << r.out;
}

// A flag CLI11 does not know (or a value it cannot convert) is an error as
// any other: "lazytrain: error: ..." and status 1, naming the command's
// --help. It was CLI11's bare message with status 109 (105 for a value).
// --help and --version still exit 0.
TEST(CliErrors, ACommandLineThatDoesNotParseIsAnErrorWithTheUsualPrefix) {
  CliResult r = run_lazytrain("train --sett x");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(r.out.rfind("lazytrain: error: The following argument was not expected: --sett (see "
                        "lazytrain train --help)\n",
                        0),
            0u)
      << r.out;
  r = run_lazytrain("plan --model m --batch-size many");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(r.out.rfind("lazytrain: error: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("--batch-size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(see lazytrain plan --help)"), std::string::npos) << r.out;
  r = run_lazytrain("--bogus");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(r.out.rfind("lazytrain: error: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("(see lazytrain --help)"), std::string::npos) << r.out;
  for (const char* ok : {"--help", "train --help", "--version"}) {
    r = run_lazytrain(ok);
    EXPECT_EQ(r.status, 0) << ok << ": " << r.out;
    EXPECT_EQ(r.out.find("error"), std::string::npos) << ok << ": " << r.out;
  }
  // --seed's value is named once (it read "UINT:UINT", its check's name
  // after the type's).
  r = run_lazytrain("generate --help");
  EXPECT_MENTIONS(r.out, "--seed UINT=0 ");
}

// A config given as the first argument and with --config (one option to
// CLI11) said "--config: At Most 1 required but received 2".
TEST(CliErrors, AConfigGivenTwiceSaysSo) {
  const CliResult r = run_lazytrain("train a.yaml --config b.yaml");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(r.out,
            "lazytrain: error: --config: given 2 times; give it once (the first argument is the "
            "config too: give it there or with --config) (see lazytrain train --help)\n");
}

// A flag's value the command cannot take is refused naming the flag: the
// data loader's "unknown dataset format" named no flag (and, for generate,
// the data file's first line), profile's missing folder only the path.
TEST(CliErrors, AFlagsValueIsRefusedNamingTheFlag) {
  const std::string model = fixture("llama").string();
  CliResult r = run_lazytrain("eval --model " + model + " --data rows.jsonl --format foo");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("lazytrain: error: --format: foo not in {auto,tokens,alpaca,query_response,"
                       "sharegpt,text}"),
            std::string::npos)
      << r.out;
  r = run_lazytrain("generate --model " + model + " --prompt hi --template foo");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--template: foo not in {auto,chatml,qwen3,llama3,plain}"),
            std::string::npos)
      << r.out;
  r = run_lazytrain("profile --disk-path /nonexistent-lazytrain-folder");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--disk-path: Directory does not exist: /nonexistent-lazytrain-folder"),
            std::string::npos)
      << r.out;
}

// --seq-len and --batch-sizes shape profile's stage times, which only
// --model makes: without it they were taken, ignored, and a profile
// without stage times written, exit 0. Refused before anything is measured.
TEST(CliErrors, ProfileRefusesStageTimingFlagsWithoutAModel) {
  for (const std::string flag : {"--seq-len 64", "--batch-sizes 1,2"}) {
    const CliResult r = run_lazytrain("profile --disk-mb 1 --repeats 1 " + flag);
    EXPECT_EQ(r.status, 1) << flag << ": " << r.out;
    EXPECT_EQ(
        r.out.rfind("lazytrain: error: " + flag.substr(0, flag.find(' ')) + " requires --model", 0),
        0u)
        << flag << ": " << r.out;
    EXPECT_EQ(r.out.find("measured:"), std::string::npos) << flag << ": " << r.out;
  }
}

}  // namespace
}  // namespace lt::train::testing
