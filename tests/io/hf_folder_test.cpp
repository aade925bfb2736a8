// Hugging Face model folders: sharding as huggingface_hub splits (the
// expected shards and index text are worked out by hand from its algorithm),
// reading a folder the Python package wrote, and clear errors for a missing
// shard or a tensor the index misplaces.
#include "io/hf_folder.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "io/hf_model.h"
#include "io_test_util.h"

namespace lt::io {
namespace {

using testing::fixtures_dir;
using testing::TempDir;

Tensor filled(const Shape& shape, DType dtype, double start) {
  std::vector<double> v(static_cast<size_t>(lt::numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<double>(i);
  return Tensor::from_doubles(v, shape, dtype);
}

std::set<std::string> files_in(const std::filesystem::path& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.insert(e.path().filename().string());
  }
  return out;
}

// Five tensors against a 40-byte limit, in this order:
//   a 16 B, b 16 B, c 48 B (above the limit), d 24 B, e 8 B.
// huggingface_hub: a, b fill shard [a b] (32 B); c is larger than the limit
// and becomes a shard of its own at once; d would bring [a b] to 56 B, so
// [a b] closes and d starts a new one; e joins it (32 B). Shards, in order
// of creation: [c], [a b], [d e].
NamedTensors five_tensors() {
  return {{"a", filled({4}, DType::F32, 0)},
          {"b", filled({2, 2}, DType::I32, 10)},
          {"c", filled({6}, DType::F64, 20)},
          {"d", filled({12}, DType::BF16, 30)},
          {"e", filled({8}, DType::U8, 40)}};
}

constexpr const char* kExpectedIndex = R"({
  "metadata": {
    "total_size": 112
  },
  "weight_map": {
    "a": "model-00002-of-00003.safetensors",
    "b": "model-00002-of-00003.safetensors",
    "c": "model-00001-of-00003.safetensors",
    "d": "model-00003-of-00003.safetensors",
    "e": "model-00003-of-00003.safetensors"
  }
}
)";

TEST(HfFolder, ShardsAsHuggingFaceHubDoes) {
  TempDir dir;
  const NamedTensors tensors = five_tensors();
  auto written = write_hf_weights(dir.path(), tensors, {.max_shard_bytes = 40});
  EXPECT_EQ(written, (std::vector<std::string>{
                         "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                         "model-00003-of-00003.safetensors", "model.safetensors.index.json"}));
  EXPECT_EQ(testing::read_text(dir / "model.safetensors.index.json"), kExpectedIndex);
  EXPECT_EQ(files_in(dir.path()), std::set<std::string>(written.begin(), written.end()));

  // Each shard carries the metadata transformers requires.
  SafetensorsFile shard2(dir / "model-00002-of-00003.safetensors");
  EXPECT_EQ(shard2.metadata().at("format"), "pt");
  EXPECT_EQ(shard2.names(), (std::vector<std::string>{"a", "b"}));

  HfWeights weights(dir.path());
  EXPECT_TRUE(weights.sharded());
  EXPECT_EQ(weights.names(), (std::vector<std::string>{"a", "b", "c", "d", "e"}));
  weights.check_all();
  for (const auto& [name, t] : tensors) {
    Tensor back = weights.tensor(name);
    EXPECT_EQ(back.dtype(), t.dtype()) << name;
    EXPECT_EQ(back.shape(), t.shape()) << name;
    EXPECT_EQ(back.to_doubles(), t.to_doubles()) << name;
  }
}

TEST(HfFolder, ShardsOrderTensorsByElementSizeSoAllAreAligned) {
  TempDir dir;
  // In one shard: a u8, then an f32 and an f64 would sit misaligned if
  // written in the given order.
  NamedTensors tensors = {{"x.u8", filled({3}, DType::U8, 1)},
                          {"y.f32", filled({2}, DType::F32, 2)},
                          {"z.f64", filled({2}, DType::F64, 3)}};
  write_hf_weights(dir.path(), tensors);
  SafetensorsFile f(dir / "model.safetensors");
  EXPECT_EQ(f.names(), (std::vector<std::string>{"z.f64", "y.f32", "x.u8"}));
  for (const auto& name : f.names()) {
    const auto& e = f.entry(name);
    EXPECT_EQ(e.begin % dtype_size(*e.dtype), 0u) << name;
  }
}

TEST(HfFolder, SingleFileBelowTheLimitAndStaleFilesRemoved) {
  TempDir dir;
  write_hf_weights(dir.path(), five_tensors(), {.max_shard_bytes = 40});
  testing::write_text(dir / "config.json", "{}");                     // not ours: must survive
  testing::write_text(dir / "model-extra.safetensors", "");           // not a shard name: survives
  testing::write_text(dir / "model-00009-of-00012.safetensors", "");  // an older save's shard
  auto written = write_hf_weights(dir.path(), five_tensors());
  EXPECT_EQ(written, (std::vector<std::string>{"model.safetensors"}));
  EXPECT_EQ(files_in(dir.path()),
            (std::set<std::string>{"config.json", "model-extra.safetensors", "model.safetensors"}));
  HfWeights weights(dir.path());
  EXPECT_FALSE(weights.sharded());
  EXPECT_EQ(weights.tensor("d").to_doubles(), filled({12}, DType::BF16, 30).to_doubles());

  // And back to shards: the single file must go, or it would shadow them.
  write_hf_weights(dir.path(), five_tensors(), {.max_shard_bytes = 40});
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
  EXPECT_TRUE(HfWeights(dir.path()).sharded());
}

TEST(HfFolder, DefaultLimitIsFiveDecimalGigabytes) {
  EXPECT_EQ(HfWriteOptions{}.max_shard_bytes, 5'000'000'000u);
  EXPECT_EQ(HfWriteOptions{}.metadata.at("format"), "pt");
}

TEST(HfFolder, ReadsAShardedFolderThePythonPackageWrote) {
  HfWeights w(fixtures_dir() / "reference_sharded");
  EXPECT_TRUE(w.sharded());
  EXPECT_EQ(w.names(), (std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight",
                                                 "model.norm.weight"}));
  w.check_all();
  Tensor embed = w.tensor("model.embed_tokens.weight");
  EXPECT_EQ(embed.shape(), (Shape{4, 2}));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(embed.to_doubles()[i], i / 4.0);
  EXPECT_EQ(w.tensor("model.norm.weight").to_doubles(), (std::vector<double>{1.0, 2.0}));
  Tensor head = w.tensor("lm_head.weight");
  EXPECT_EQ(head.dtype(), DType::F16);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(head.to_doubles()[i], -i / 8.0);
  EXPECT_EQ(read_hf_weights(fixtures_dir() / "reference_sharded").size(), 3u);
}

// Copies the Python-made sharded folder so a test can damage it.
std::filesystem::path copy_reference(const TempDir& dir) {
  const auto dst = dir / "model";
  std::filesystem::copy(fixtures_dir() / "reference_sharded", dst);
  return dst;
}

::testing::AssertionResult error_names(const std::function<void()>& f,
                                       const std::vector<std::string>& parts) {
  try {
    f();
    return ::testing::AssertionFailure() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& part : parts) {
      if (msg.find(part) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks \"" << part << "\": " << msg;
      }
    }
    return ::testing::AssertionSuccess();
  }
}

TEST(HfFolder, MissingShardNamesFileAndTensor) {
  TempDir dir;
  const auto model = copy_reference(dir);
  std::filesystem::remove(model / "model-00002-of-00002.safetensors");
  HfWeights w(model);  // lazy: the first shard still reads
  EXPECT_EQ(w.tensor("model.norm.weight").to_doubles(), (std::vector<double>{1.0, 2.0}));
  EXPECT_TRUE(
      error_names([&] { w.tensor("lm_head.weight"); },
                  {"model-00002-of-00002.safetensors", "lm_head.weight", "does not exist"}));
  EXPECT_TRUE(error_names([&] { w.check_all(); }, {"model-00002-of-00002.safetensors"}));
}

TEST(HfFolder, IndexNameMissingFromItsShard) {
  TempDir dir;
  const auto model = copy_reference(dir);
  auto index = nlohmann::json::parse(testing::read_text(model / "model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
  testing::write_text(model / "model.safetensors.index.json", index.dump(2));
  HfWeights w(model);
  // Whichever tensor of that shard is asked first, the stale entry is named.
  EXPECT_TRUE(
      error_names([&] { w.tensor("lm_head.weight"); },
                  {"model.norm.weight", "model-00002-of-00002.safetensors", "does not hold it"}));
}

TEST(HfFolder, BadIndexFiles) {
  TempDir dir;
  const auto model = copy_reference(dir);
  const auto index_path = model / "model.safetensors.index.json";
  auto with_index = [&](const std::string& text) {
    testing::write_text(index_path, text);
    return [&] { HfWeights w(model); };
  };
  EXPECT_TRUE(error_names(with_index("{not json"), {index_path.string(), "not valid JSON"}));
  EXPECT_TRUE(error_names(with_index("[]"), {index_path.string(), "expected a JSON object"}));
  EXPECT_TRUE(error_names(with_index(R"({"metadata": {}})"), {"field 'weight_map'", "missing"}));
  EXPECT_TRUE(error_names(with_index(R"({"weight_map": {}})"), {"field 'weight_map'"}));
  EXPECT_TRUE(error_names(with_index(R"({"weight_map": {"w": 3}})"), {"tensor 'w'"}));
  EXPECT_TRUE(error_names(with_index(R"({"weight_map": {"w": "../../etc/passwd"}})"),
                          {"tensor 'w'", "not a file name inside the folder"}));
}

TEST(HfFolder, EmptyFolderAndUnknownTensor) {
  TempDir dir;
  EXPECT_TRUE(error_names([&] { HfWeights w(dir.path()); },
                          {dir.path().string(), "model.safetensors", "index.json"}));
  HfWeights w(fixtures_dir() / "reference_sharded");
  EXPECT_TRUE(error_names([&] { w.tensor("nope"); }, {"has no tensor 'nope'"}));
}

// Weights in another form are named, with what to do, rather than taken
// for no weights; a file given for the folder says so.
TEST(HfFolder, WeightsItDoesNotReadAreNamed) {
  TempDir dir;
  EXPECT_EQ(weights_not_read(dir.path()), "");
  testing::write_text(dir.path() / "tokenizer.model", "sentencepiece, not weights");
  EXPECT_EQ(weights_not_read(dir.path()), "");
  testing::write_text(dir.path() / "pytorch_model.bin", "pickle");
  EXPECT_TRUE(error_names(
      [&] { HfWeights w(dir.path()); },
      {"; it holds pytorch_model.bin", "PyTorch's pickled weights", "safe_serialization=True"}));
  std::filesystem::remove(dir.path() / "pytorch_model.bin");
  testing::write_text(dir.path() / "model-00001-of-00002.safetensors", "a shard");
  EXPECT_TRUE(error_names(
      [&] { HfWeights w(dir.path()); },
      {"model-00001-of-00002.safetensors", "no model.safetensors.index.json lists the shards"}));
  const auto file = fixtures_dir() / "reference_sharded" / "model.safetensors.index.json";
  EXPECT_TRUE(error_names([&] { load_hf_model(file); }, {"is a file; give the folder that holds it",
                                                         file.parent_path().string()}));
}

// A file given bare, as `--model config.json` or `--model train.jsonl` in
// the folder that holds it: the message names that folder, the working
// one, where it once printed empty parentheses.
TEST(HfFolder, AFileGivenBareNamesTheWorkingFolder) {
  TempDir dir;
  const std::filesystem::path before = std::filesystem::current_path();
  std::ofstream(dir / "train.jsonl") << "{}\n";
  std::filesystem::current_path(dir.path());
  std::string message;
  try {
    load_hf_model("train.jsonl");
  } catch (const Error& e) {
    message = e.what();
  }
  std::filesystem::current_path(before);
  EXPECT_NE(message.find("'train.jsonl' is a file; give the folder that holds it (., the working "
                         "folder)"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("()"), std::string::npos) << message;
}

// A training run's out.dir given as the model (it is what the run names
// as its outputs): the message points at its checkpoint of the highest
// step, 12 here, not 3 (an earlier save) nor 20 (no config.json: not a
// checkpoint) nor step-x.
TEST(HfFolder, ARunsFolderNamesItsCheckpoint) {
  TempDir dir;
  for (const char* step : {"step-3", "step-12", "step-x"}) {
    std::filesystem::create_directories(dir / step);
    std::ofstream(dir / step / "config.json") << "{}";
  }
  std::filesystem::create_directories(dir / "step-20");
  std::ofstream(dir / "metrics.jsonl") << "{}\n";
  EXPECT_EQ(not_a_model_folder(dir.path()),
            "'" + dir.path().string() +
                "' is not a model folder (no config.json there); it is a training run's folder: "
                "give one of its checkpoints, such as " +
                (dir / "step-12").string() + " (the highest step)");
  TempDir plain;
  EXPECT_EQ(not_a_model_folder(plain.path()),
            "'" + plain.path().string() + "' is not a model folder (no config.json there)");
  // A path that is not there is said to be missing (a mistyped path read
  // as a folder without a config), with the nearest folder of it that is.
  EXPECT_EQ(not_a_model_folder(plain.path() / "qwen"),
            "'" + (plain.path() / "qwen").string() + "' does not exist");
  EXPECT_EQ(not_a_model_folder(plain.path() / "models" / "qwen"),
            "'" + (plain.path() / "models" / "qwen").string() +
                "' does not exist (the nearest folder of it that exists is " +
                plain.path().string() + ")");
}

TEST(HfFolder, RefusesDuplicateNames) {
  TempDir dir;
  NamedTensors t = {{"w", Tensor::zeros({1})}, {"w", Tensor::zeros({1})}};
  EXPECT_THROW(write_hf_weights(dir.path(), t), Error);
}

}  // namespace
}  // namespace lt::io
