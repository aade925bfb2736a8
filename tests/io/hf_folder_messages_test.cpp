// What a new user is told of a model folder that is not one to read: its
// config.json named for the folder (the message said "no config.json
// there" of config.json itself), and a folder with config.json but no
// weights (convert, eval and generate said only which files it lacks).
// The messages are written out by hand as a user should read them.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "io/hf_folder.h"
#include "io_test_util.h"

namespace lt::io {
namespace {

using testing::TempDir;

std::string error_of_reading(const std::filesystem::path& folder) {
  try {
    HfWeights{folder};
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << folder;
  return "";
}

TEST(HfFolderMessages, AConfigJsonGivenForItsFolderIsSaidToBeAFile) {
  TempDir dir;
  std::ofstream(dir / "config.json") << "{}";
  EXPECT_EQ(not_a_model_folder(dir / "config.json"),
            "'" + (dir / "config.json").string() +
                "' is a file, not a model folder; give the folder that holds it (" +
                dir.path().string() + ")");
  EXPECT_EQ(not_a_model_folder(dir.path()), "");
}

TEST(HfFolderMessages, AFolderWithAConfigAndNoWeightsSaysHowToGetThem) {
  TempDir dir;
  std::ofstream(dir / "config.json") << "{}";
  std::ofstream(dir / "tokenizer.json") << "{}";
  const std::string d = dir.path().string();
  EXPECT_EQ(error_of_reading(dir.path()),
            "model folder '" + d +
                "' holds neither model.safetensors nor model.safetensors.index.json; for weights "
                "from its config.json, `lazytrain train` with model.path " +
                d +
                " starts from random weights (model.init auto, the default, does so for such a "
                "folder; model.init random for any) and saves each checkpoint, out.dir/step-N, "
                "as a model folder with its weights");
  // A checkpoint (trainer_state.json) missing its weights is damaged: no
  // training makes them.
  std::ofstream(dir / "trainer_state.json") << "{}";
  EXPECT_EQ(
      error_of_reading(dir.path()),
      "model folder '" + d + "' holds neither model.safetensors nor model.safetensors.index.json");
  // Weights in a form not read are named instead.
  TempDir bin;
  std::ofstream(bin / "config.json") << "{}";
  std::ofstream(bin / "pytorch_model.bin") << "x";
  const std::string m = error_of_reading(bin.path());
  EXPECT_NE(m.find("; it holds pytorch_model.bin (PyTorch's pickled weights"), std::string::npos)
      << m;
  EXPECT_EQ(m.find("lazytrain train"), std::string::npos) << m;
}

}  // namespace
}  // namespace lt::io
