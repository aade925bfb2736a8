// A model folder whose files are named pipes: opening one for reading waits
// for a writer that never comes, so `lazytrain eval` on a folder with a
// FIFO as model.safetensors hung forever. Each file a model load opens
// (model.safetensors, a shard, the index, config.json) is refused by name
// before it is opened.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "io/hf_folder.h"
#include "io/hf_model.h"
#include "io/safetensors.h"
#include "io_test_util.h"
#include "support/fifo.h"

namespace lt::io {
namespace {

namespace fs = std::filesystem;

const fs::path kLlama = fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/llama";
const fs::path kSharded = fs::path(LT_SOURCE_DIR) / "tests/io/fixtures/reference_sharded";

// A copy of `from` in which `fifo_name` is a named pipe.
fs::path copy_with_fifo(const fs::path& from, const fs::path& to, const std::string& fifo_name) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(from)) {
    if (entry.path().filename() != fifo_name)
      fs::copy_file(entry.path(), to / entry.path().filename());
  }
  lt::testing::make_fifo(to / fifo_name);
  return to / fifo_name;
}

void expect_refused(const fs::path& fifo, const std::function<void()>& load) {
  const auto result = lt::testing::error_of_fifo_load(fifo, load);
  EXPECT_FALSE(result.blocked) << fifo << ": the load waited on the named pipe";
  EXPECT_NE(result.error.find(fifo.string()), std::string::npos) << result.error;
  EXPECT_NE(result.error.find("named pipe"), std::string::npos) << result.error;
}

TEST(NonRegularFiles, ModelFilesAreRefusedBeforeOpening) {
  testing::TempDir tmp;
  for (const char* name : {"model.safetensors", "config.json"}) {
    const fs::path fifo = copy_with_fifo(kLlama, tmp / (std::string("llama_") + name), name);
    expect_refused(fifo, [&] { load_hf_model(fifo.parent_path()); });
  }
  const fs::path weights = copy_with_fifo(kLlama, tmp / "alone", "model.safetensors");
  expect_refused(weights, [&] { SafetensorsFile file(weights); });
}

TEST(NonRegularFiles, ShardsAndTheIndexAreRefusedBeforeOpening) {
  testing::TempDir tmp;
  for (const char* name : {"model-00002-of-00002.safetensors", "model.safetensors.index.json"}) {
    const fs::path fifo = copy_with_fifo(kSharded, tmp / name, name);
    expect_refused(fifo, [&] { HfWeights(fifo.parent_path()).check_all(); });
  }
}

}  // namespace
}  // namespace lt::io
