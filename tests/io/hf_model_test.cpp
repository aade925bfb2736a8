// Every family against transformers: the loss and every parameter gradient
// on tiny random checkpoints made by tools/reference/make_model_fixtures.py.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>

#include <filesystem>
#include <functional>

#include "autograd/engine.h"
#include "io/hf_model.h"
#include "io/safetensors.h"
#include "models/causal_lm.h"
#include "models/hf_mapping.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

const std::filesystem::path kFixtures =
    std::filesystem::path(LT_SOURCE_DIR) / "tests/models/fixtures/families";

class FamilyVsTransformers : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyVsTransformers, LossAndEveryGradientMatch) {
  const auto folder = kFixtures / GetParam();
  auto ref = io::read_safetensors(folder / "reference.safetensors");
  models::CausalLM model = io::load_hf_model(folder, DType::F32);

  Tensor ids = ref.at("input_ids");
  Tensor targets = models::shift_targets(ref.at("labels"));
  const double count = static_cast<double>(models::count_targets(targets));
  Tensor loss = model.loss(ids, targets, count);
  const double expected = ref.at("loss").item();
  EXPECT_NEAR(loss.item(), expected, 1e-5 * std::abs(expected)) << GetParam();

  backward(loss);
  std::map<std::string, Tensor> grads;
  for (auto& [name, p] : model.parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name << " got no gradient";
    grads[name] = p.grad();
  }
  int checked = 0;
  for (auto& [hf_name, grad] : models::to_hf_layout(model.config(), grads, DType::F64)) {
    auto it = ref.find("grad." + hf_name);
    ASSERT_NE(it, ref.end()) << "reference lacks grad." << hf_name;
    double err = testing::relative_error_norm(grad.to_doubles(), it->second.to_doubles());
    EXPECT_LT(err, 1e-4) << GetParam() << " " << hf_name;
    ++checked;
  }
  // Every reference gradient was compared (nothing left unmatched).
  int references = 0;
  for (auto& [name, t] : ref) references += name.rfind("grad.", 0) == 0;
  EXPECT_EQ(checked, references);
}

TEST_P(FamilyVsTransformers, SaveLoadRoundTripIsExact) {
  const auto folder = kFixtures / GetParam();
  models::CausalLM model = io::load_hf_model(folder, DType::F32);
  auto out = std::filesystem::temp_directory_path() / ("lt_roundtrip_" + GetParam());
  std::filesystem::remove_all(out);
  io::HfWriteOptions options;
  options.max_shard_bytes = 20000;  // force several shards and an index
  io::save_hf_model(model, out, DType::F32, options);
  EXPECT_TRUE(std::filesystem::exists(out / "model.safetensors.index.json"));
  models::CausalLM again = io::load_hf_model(out, DType::F32);
  EXPECT_EQ(again.config(), model.config());
  auto a = model.parameters(), b = again.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_doubles(), b[i].second.to_doubles()) << a[i].first;
  }
  // The original files and ours hold the same tensors under the same names.
  auto original = io::read_hf_weights(folder);
  auto written = io::read_hf_weights(out);
  for (auto& [name, t] : written) {
    ASSERT_TRUE(original.count(name)) << name;
    EXPECT_EQ(t.to_doubles(), original.at(name).to_doubles()) << name;
  }
  std::filesystem::remove_all(out);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyVsTransformers,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gpt2"));

}  // namespace
}  // namespace lt

namespace lt {
namespace {

// A copy of a fixture folder whose weights are rewritten by `edit`.
std::filesystem::path edited_copy(const std::string& family, const std::string& tag,
                                  const std::function<void(io::NamedTensors&)>& edit) {
  auto src = kFixtures / family;
  auto dst = std::filesystem::temp_directory_path() /
             ("lt_hf_bad_" + tag + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dst);
  std::filesystem::create_directories(dst);
  std::filesystem::copy_file(src / "config.json", dst / "config.json");
  io::NamedTensors tensors;
  for (auto& [name, t] : io::read_hf_weights(src)) tensors.emplace_back(name, t);
  edit(tensors);
  io::write_safetensors(dst / "model.safetensors", tensors, {{"format", "pt"}});
  return dst;
}

std::string load_error(const std::filesystem::path& folder) {
  try {
    io::load_hf_model(folder);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A checkpoint writes into the folder it made; when that folder is
// deleted mid-save (out.dir removed by the user) the write fails and the
// folder, and the folders above it, are not made again.
TEST(HfModelSave, WithoutMakeFolderAMissingFolderStaysMissing) {
  models::CausalLM model = io::load_hf_model(kFixtures / "llama", DType::F32);
  const auto above =
      std::filesystem::temp_directory_path() / ("lt_save_gone_" + std::to_string(getpid()));
  std::filesystem::remove_all(above);
  const auto folder = above / "step-1";
  EXPECT_ANY_THROW(io::save_hf_model(model, folder, DType::F32, {.make_folder = false}));
  EXPECT_FALSE(std::filesystem::exists(above));
  io::save_hf_model(model, folder, DType::F32);  // the default makes it
  EXPECT_TRUE(std::filesystem::exists(folder / "model.safetensors"));
  std::filesystem::remove_all(above);
}

TEST(HfModelLoad, MissingTensorIsNamed) {
  auto dir = edited_copy("llama", "missing", [](io::NamedTensors& t) {
    std::erase_if(t, [](auto& e) { return e.first == "model.layers.1.mlp.up_proj.weight"; });
  });
  std::string err = load_error(dir);
  EXPECT_NE(err.find("model.layers.1.mlp.up_proj.weight"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

TEST(HfModelLoad, UnexpectedTensorIsNamed) {
  auto dir = edited_copy("mistral", "extra", [](io::NamedTensors& t) {
    t.emplace_back("model.layers.0.mlp.extra.weight", Tensor::zeros({2, 2}));
  });
  std::string err = load_error(dir);
  EXPECT_NE(err.find("model.layers.0.mlp.extra.weight"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

TEST(HfModelLoad, WrongShapeNamesTheTensorAndBothShapes) {
  auto dir = edited_copy("qwen3", "shape", [](io::NamedTensors& t) {
    for (auto& [name, x] : t) {
      if (name == "model.norm.weight") x = Tensor::full({31}, 1.0);
    }
  });
  std::string err = load_error(dir);
  EXPECT_NE(err.find("model.norm.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("[31]"), std::string::npos) << err;
  EXPECT_NE(err.find("[32]"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

TEST(HfModelLoad, TiedModelAcceptsAnExplicitLmHead) {
  auto dir = edited_copy("qwen2", "tiedhead", [](io::NamedTensors& t) {
    Tensor emb;
    for (auto& [name, x] : t) {
      if (name == "model.embed_tokens.weight") emb = x;
    }
    t.emplace_back("lm_head.weight", emb.clone());
  });
  EXPECT_EQ(load_error(dir), "");
  EXPECT_EQ(io::HfModelReader(dir).tied_head_warning(), "");  // the embedding's copy
  std::filesystem::remove_all(dir);
}

// A tied model's file with an lm_head.weight of its own (a trained head):
// it is not read, and a warning names it (it was dropped silently, where
// transformers 5 loaded it as an untied head). A head differing in one
// element of its last row is caught by the sampled rows.
TEST(HfModelLoad, ATiedModelsOwnLmHeadIsNamedAsNotRead) {
  for (const bool last_row_only : {false, true}) {
    auto dir = edited_copy("qwen2", "tiedownhead", [&](io::NamedTensors& t) {
      Tensor emb;
      for (auto& [name, x] : t)
        if (name == "model.embed_tokens.weight") emb = x;
      Tensor head = emb.to(DType::F32).clone();
      if (last_row_only)
        head.data<float>()[head.numel() - 1] += 1.0f;
      else
        for (int64_t i = 0; i < head.numel(); ++i) head.data<float>()[i] *= -1.0f;
      t.emplace_back("lm_head.weight", head.to(emb.dtype()));
    });
    EXPECT_EQ(load_error(dir), "");
    const std::string warning = io::HfModelReader(dir).tied_head_warning();
    EXPECT_NE(warning.find("ties the output head to the embedding (tie_word_embeddings true), so "
                           "the weights' 'lm_head.weight', which differs from "
                           "'model.embed_tokens.weight', is not read"),
              std::string::npos)
        << warning;
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace lt
