// A model folder as a new user first names it: the config.json in it given
// for the folder (model.path=qwen/config.json was said to have "no
// config.json there"), and a folder with config.json but no weights given
// to convert. The messages are written out by hand.
#include <gtest/gtest.h>

#include "config_errors.h"
#include "support/cli_run.h"

namespace lt::train::testing {
namespace {

using ModelFolderMessages = ConfigErrors;

TEST_F(ModelFolderMessages, AConfigJsonGivenForItsFolderIsSaidToBeAFile) {
  const std::string file = (fixture("llama") / "config.json").string();
  EXPECT_EQ(error_of(yaml(), {"model.path=" + file}),
            "--set model.path=" + file + ": config key 'model.path': '" + file +
                "' is a file, not a model folder; give the folder that holds it (" +
                fixture("llama").string() + ")");
  // In the file, the line that names it leads.
  EXPECT_EQ(error_of(yaml("", "", file)),
            (tmp_ / "run.yaml").string() + " (line 2): config key 'model.path': '" + file +
                "' is a file, not a model folder; give the folder that holds it (" +
                fixture("llama").string() + ")");
}

// convert reads weights, and a folder of config.json alone has none: the
// way to get them is a run from random weights, whose checkpoints are
// whole model folders (README: model.init).
TEST_F(ModelFolderMessages, ConvertOfAConfigAloneSaysHowToGetWeights) {
  const fs::path model = tmp_ / "qwen";
  fs::create_directories(model);
  fs::copy_file(fixture("llama") / "config.json", model / "config.json");
  const lt::testing::CliResult r = lt::testing::run_lazytrain(
      "convert --model " + model.string() + " --out " + (tmp_ / "converted").string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_MENTIONS(r.out, "lazytrain: error: model folder '" + model.string() +
                             "' holds neither model.safetensors nor "
                             "model.safetensors.index.json; for weights from its config.json, "
                             "`lazytrain train` with model.path " +
                             model.string() +
                             " starts from random weights (model.init auto, the default, does so "
                             "for such a folder; model.init random for any) and saves each "
                             "checkpoint, out.dir/step-N, as a model folder with its weights\n");
  EXPECT_FALSE(fs::exists(tmp_ / "converted"));
}

}  // namespace
}  // namespace lt::train::testing
