// ModelConfig against transformers itself: for every fixture (and a few
// variants that lean on per-family defaults), the values transformers'
// AutoConfig resolves must be the values we read; and the config.json we
// write must load in transformers with the same values. Skipped when the
// project's .venv lacks transformers (pip install transformers; no PyTorch
// needed for configs).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/config.h"

namespace lt::models {
namespace {

namespace fs = std::filesystem;

constexpr const char* kResolve = R"PY(
import json, os, shutil, sys, tempfile
from transformers import AutoConfig
out = {}
for path in sys.argv[2:]:
    d = tempfile.mkdtemp()
    shutil.copy(path, os.path.join(d, "config.json"))
    c = AutoConfig.from_pretrained(d)
    shutil.rmtree(d)
    gpt2 = c.model_type == "gpt2"
    rp = dict(getattr(c, "rope_parameters", None) or {})
    heads = c.num_attention_heads
    out[path] = {
        "model_type": c.model_type,
        "hidden_size": c.hidden_size,
        "intermediate_size": (c.n_inner or 4 * c.n_embd) if gpt2 else c.intermediate_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": heads,
        "num_key_value_heads": heads if gpt2 else c.num_key_value_heads,
        "head_dim": (getattr(c, "head_dim", None) or c.hidden_size // heads) if not gpt2
                    else c.hidden_size // heads,
        "vocab_size": c.vocab_size,
        "max_position_embeddings": c.max_position_embeddings,
        "norm_eps": c.layer_norm_epsilon if gpt2 else c.rms_norm_eps,
        "tie_word_embeddings": bool(c.tie_word_embeddings),
        "hidden_act": c.activation_function if gpt2 else c.hidden_act,
        "rope_theta": None if gpt2 else rp.get("rope_theta"),
        "rope_type": rp.get("rope_type", "default"),
        "factor": rp.get("factor"),
        "low_freq_factor": rp.get("low_freq_factor"),
        "high_freq_factor": rp.get("high_freq_factor"),
        "original_max_position_embeddings": rp.get("original_max_position_embeddings"),
    }
json.dump(out, open(sys.argv[1], "w"))
)PY";

fs::path venv_python_with_transformers() {
  fs::path py = fs::path(LT_SOURCE_DIR) / ".venv" / "bin" / "python";
  if (!fs::exists(py)) return {};
  std::string cmd = py.string() + " -c 'import transformers' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0 ? py : fs::path{};
}

void compare(const ModelConfig& c, const nlohmann::json& t, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(t["model_type"], c.model_type());
  EXPECT_EQ(t["hidden_size"], c.hidden_size);
  EXPECT_EQ(t["intermediate_size"], c.intermediate_size);
  EXPECT_EQ(t["num_hidden_layers"], c.num_hidden_layers);
  EXPECT_EQ(t["num_attention_heads"], c.num_attention_heads);
  EXPECT_EQ(t["num_key_value_heads"], c.num_key_value_heads);
  EXPECT_EQ(t["head_dim"], c.head_dim);
  EXPECT_EQ(t["vocab_size"], c.vocab_size);
  EXPECT_EQ(t["max_position_embeddings"], c.max_position_embeddings);
  EXPECT_EQ(t["norm_eps"].get<double>(), c.norm_eps);
  EXPECT_EQ(t["tie_word_embeddings"], c.tie_word_embeddings);
  EXPECT_EQ(t["hidden_act"], activation_name(c.hidden_act));
  if (c.is_gpt2()) return;
  EXPECT_EQ(t["rope_theta"].get<double>(), c.rope_theta);
  const bool llama3 = c.rope_scaling.type == RopeType::Llama3;
  EXPECT_EQ(t["rope_type"], llama3 ? "llama3" : "default");
  if (llama3) {
    EXPECT_EQ(t["factor"].get<double>(), c.rope_scaling.factor);
    EXPECT_EQ(t["low_freq_factor"].get<double>(), c.rope_scaling.low_freq_factor);
    EXPECT_EQ(t["high_freq_factor"].get<double>(), c.rope_scaling.high_freq_factor);
    EXPECT_EQ(t["original_max_position_embeddings"],
              c.rope_scaling.original_max_position_embeddings);
  }
}

TEST(ModelConfigTransformers, SameValuesAsTransformersBothWays) {
  const fs::path python = venv_python_with_transformers();
  if (python.empty()) GTEST_SKIP() << "no .venv python with transformers";

  std::string tmpl = (fs::temp_directory_path() / "lt_config_XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  const fs::path fixtures = fs::path(LT_SOURCE_DIR) / "tests" / "models" / "fixtures";

  // Inputs: every loadable fixture, variants that rely on defaults, and the
  // config.json we write for each.
  std::vector<fs::path> inputs;
  for (const auto& e : fs::directory_iterator(fixtures)) {
    // Config fixtures are the .json files at the top; sub-folders hold other tests' models.
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    if (e.path().filename() != "mistral-7b-v0.1.v4.json") inputs.push_back(e.path());
  }
  auto variant = [&](const std::string& from, const std::string& name, auto edit) {
    std::ifstream in(fixtures / from);
    auto j = nlohmann::json::parse(in);
    edit(j);
    std::ofstream(dir / name) << j.dump(2);
    inputs.push_back(dir / name);
  };
  variant("mistral-7b-v0.3.v4.json", "mistral_no_kv.json", [](auto& j) {
    j.erase("num_key_value_heads");
    j["num_attention_heads"] = 16;
  });
  variant("qwen3-0.6b.v4.json", "qwen3_no_head_dim.json", [](auto& j) { j.erase("head_dim"); });
  variant("llama3.2-1b.v4.json", "llama_defaults.json", [](auto& j) {
    for (const char* k : {"num_key_value_heads", "rope_theta", "rope_scaling", "rms_norm_eps",
                          "head_dim", "max_position_embeddings", "tie_word_embeddings"}) {
      j.erase(k);
    }
  });
  variant("gpt2.v4.json", "gpt2_inner.json", [](auto& j) { j["n_inner"] = 1000; });

  std::vector<fs::path> ours;
  std::vector<ModelConfig> configs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    configs.push_back(ModelConfig::from_file(inputs[i]));
    ours.push_back(dir / ("ours_" + std::to_string(i) + ".json"));
    std::ofstream(ours.back()) << configs.back().to_json();
  }

  std::ofstream(dir / "resolve.py") << kResolve;
  std::string cmd =
      python.string() + " " + (dir / "resolve.py").string() + " " + (dir / "out.json").string();
  for (const auto& p : inputs) cmd += " " + p.string();
  for (const auto& p : ours) cmd += " " + p.string();
  cmd += " 2>" + (dir / "stderr.txt").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "transformers failed: see " << dir / "stderr.txt";

  std::ifstream in(dir / "out.json");
  const auto resolved = nlohmann::json::parse(in);
  for (size_t i = 0; i < inputs.size(); ++i) {
    compare(configs[i], resolved.at(inputs[i].string()), inputs[i].filename().string());
    compare(configs[i], resolved.at(ours[i].string()),
            "written from " + inputs[i].filename().string());
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lt::models
