// What the commands say of a mistake common to all of them: a model folder
// without config.json.
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
  // The command, and the setting its message begins with ("" where the
  // command's loader is shared, io::load_hf_model: eval and generate).
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"train --no-sample --set model.path=" + dir, "config key 'model.path': "},
      {"plan --model " + dir, "--model "},
      {"profile --model " + dir + " --out " + (tmp.path() / "hw.yaml").string(), "--model "},
      {"convert --model " + dir + " --out " + (tmp.path() / "out").string(), "--model "},
      {"eval --model " + dir + " --data " + (tmp.path() / "rows.jsonl").string(), ""},
      {"generate --model " + dir + " --prompt hi", ""},
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

}  // namespace
}  // namespace lt::train::testing
