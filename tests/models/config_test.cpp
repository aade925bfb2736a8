// ModelConfig from real-looking config.json files (tests/models/fixtures:
// the published Llama 3.x, Qwen2.5, Qwen3, Mistral 7B and GPT-2 configs, in
// the transformers 4.x style they were published in and the 5.x style
// transformers now saves). Expected values are the published ones, and the
// parameter counts are the published model sizes.
#include "models/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace lt::models {
namespace {

std::filesystem::path fixture(const std::string& name) {
  return std::filesystem::path(LT_SOURCE_DIR) / "tests" / "models" / "fixtures" / name;
}

nlohmann::json fixture_json(const std::string& name) {
  std::ifstream in(fixture(name));
  return nlohmann::json::parse(in);
}

void expect_llama32_1b(const ModelConfig& c) {
  EXPECT_EQ(c.family, ModelFamily::Llama);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.intermediate_size, 8192);
  EXPECT_EQ(c.num_hidden_layers, 16);
  EXPECT_EQ(c.num_attention_heads, 32);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeType::Llama3);
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_FALSE(c.mlp_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.hidden_act, Activation::Silu);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.weights_dtype(), DType::BF16);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001}));
  EXPECT_EQ(c.num_parameters(), 1'235'814'400);  // "1.24B"
}

TEST(ModelConfig, Llama32In4xAnd5xStyle) {
  ModelConfig v4 = ModelConfig::from_file(fixture("llama3.2-1b.v4.json"));
  ModelConfig v5 = ModelConfig::from_file(fixture("llama3.2-1b.v5.json"));
  expect_llama32_1b(v4);
  expect_llama32_1b(v5);
  EXPECT_EQ(v4, v5);
}

TEST(ModelConfig, Llama31With128HeadDimDefaultAndEosList) {
  ModelConfig c = ModelConfig::from_file(fixture("llama3.1-8b-instruct.v4.json"));
  EXPECT_EQ(c.head_dim, 128);  // absent: hidden / heads
  EXPECT_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(c.num_parameters(), 8'030'261'248);  // "8.03B"
}

void expect_qwen25_05b(const ModelConfig& c) {
  EXPECT_EQ(c.family, ModelFamily::Qwen2);
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.intermediate_size, 4864);
  EXPECT_EQ(c.num_hidden_layers, 24);
  EXPECT_EQ(c.num_attention_heads, 14);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.max_position_embeddings, 32768);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, RopeType::Default);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);  // qkv bias, always, in Qwen2
  EXPECT_FALSE(c.attention_out_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.num_parameters(), 494'032'768);  // "494M"
}

TEST(ModelConfig, Qwen25LoadsWithItsSlidingWindowOff) {
  ModelConfig v4 = ModelConfig::from_file(fixture("qwen2.5-0.5b.v4.json"));
  ModelConfig v5 = ModelConfig::from_file(fixture("qwen2.5-0.5b.v5.json"));
  expect_qwen25_05b(v4);
  expect_qwen25_05b(v5);
  EXPECT_EQ(v4, v5);
}

void expect_qwen3_06b(const ModelConfig& c) {
  EXPECT_EQ(c.family, ModelFamily::Qwen3);
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);  // not hidden / heads (64)
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_EQ(c.rope_theta, 1e6);  // an integer in the file
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{151645}));
  // 0.44B non-embedding + 151936 * 1024 embedding (tied).
  EXPECT_EQ(c.num_parameters(), 596'049'920);
}

TEST(ModelConfig, Qwen3In4xAnd5xStyle) {
  ModelConfig v4 = ModelConfig::from_file(fixture("qwen3-0.6b.v4.json"));
  ModelConfig v5 = ModelConfig::from_file(fixture("qwen3-0.6b.v5.json"));
  expect_qwen3_06b(v4);
  expect_qwen3_06b(v5);
  EXPECT_EQ(v4, v5);
}

void expect_mistral_v03(const ModelConfig& c) {
  EXPECT_EQ(c.family, ModelFamily::Mistral);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.intermediate_size, 14336);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 32768);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.num_parameters(), 7'248'023'552);  // "7.25B"
}

TEST(ModelConfig, MistralV03In4xAnd5xStyle) {
  ModelConfig v4 = ModelConfig::from_file(fixture("mistral-7b-v0.3.v4.json"));
  ModelConfig v5 = ModelConfig::from_file(fixture("mistral-7b-v0.3.v5.json"));
  expect_mistral_v03(v4);
  expect_mistral_v03(v5);
  EXPECT_EQ(v4, v5);
}

void expect_gpt2(const ModelConfig& c) {
  EXPECT_EQ(c.family, ModelFamily::Gpt2);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_hidden_layers, 12);
  EXPECT_EQ(c.num_attention_heads, 12);
  EXPECT_EQ(c.num_key_value_heads, 12);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 3072);  // n_inner null: 4 * n_embd
  EXPECT_EQ(c.max_position_embeddings, 1024);
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.norm_eps, 1e-5);
  EXPECT_EQ(c.hidden_act, Activation::GeluNew);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.attention_out_bias);
  EXPECT_TRUE(c.mlp_bias);
  EXPECT_EQ(c.num_parameters(), 124'439'808);  // GPT-2 small, "124M"
}

TEST(ModelConfig, Gpt2In4xAnd5xStyle) {
  ModelConfig v4 = ModelConfig::from_file(fixture("gpt2.v4.json"));
  ModelConfig v5 = ModelConfig::from_file(fixture("gpt2.v5.json"));
  expect_gpt2(v4);
  expect_gpt2(v5);
  EXPECT_EQ(v4.torch_dtype, "");
  EXPECT_EQ(v5.torch_dtype, "float32");
}

TEST(ModelConfig, ToJsonRoundTripsEveryFixture) {
  for (const char* name :
       {"llama3.2-1b.v4.json", "llama3.2-1b.v5.json", "llama3.1-8b-instruct.v4.json",
        "qwen2.5-0.5b.v4.json", "qwen2.5-0.5b.v5.json", "qwen3-0.6b.v4.json", "qwen3-0.6b.v5.json",
        "mistral-7b-v0.3.v4.json", "mistral-7b-v0.3.v5.json", "gpt2.v4.json", "gpt2.v5.json"}) {
    ModelConfig c = ModelConfig::from_file(fixture(name));
    const std::string text = c.to_json();
    EXPECT_EQ(ModelConfig::from_json_text(text, "written"), c) << name << "\n" << text;
    auto j = nlohmann::json::parse(text);
    EXPECT_EQ(j["model_type"], c.model_type());
    EXPECT_FALSE(j.contains("rope_parameters")) << "4.x style";
    if (!c.torch_dtype.empty()) {
      EXPECT_EQ(j["torch_dtype"], c.torch_dtype);
    }
  }
}

TEST(ModelConfig, FamilyDefaultsForAbsentKeysFollowTransformers) {
  auto base = fixture_json("mistral-7b-v0.3.v4.json");
  base.erase("num_key_value_heads");  // MistralConfig defaults to 8
  base["num_attention_heads"] = 16;
  EXPECT_EQ(ModelConfig::from_json_text(base.dump(), "m").num_key_value_heads, 8);
  base["num_key_value_heads"] = nullptr;  // explicit null: same as the heads
  EXPECT_EQ(ModelConfig::from_json_text(base.dump(), "m").num_key_value_heads, 16);

  auto q3 = fixture_json("qwen3-0.6b.v4.json");
  q3.erase("head_dim");  // Qwen3Config defaults to 128, not hidden / heads
  EXPECT_EQ(ModelConfig::from_json_text(q3.dump(), "q").head_dim, 128);

  auto llama = fixture_json("llama3.2-1b.v4.json");
  llama.erase("num_key_value_heads");
  llama.erase("rope_theta");
  llama.erase("rope_scaling");
  llama.erase("rms_norm_eps");
  ModelConfig c = ModelConfig::from_json_text(llama.dump(), "l");
  EXPECT_EQ(c.num_key_value_heads, 32);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeType::Default);
  EXPECT_EQ(c.norm_eps, 1e-6);

  // An absent key whose default does not divide the heads says it was
  // absent (the message named a 32 the file does not hold).
  auto q2 = fixture_json("qwen3-0.6b.v4.json");
  q2.erase("num_key_value_heads");
  q2["num_attention_heads"] = 4;
  try {
    ModelConfig::from_json_text(q2.dump(), "q");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 attention heads are not a multiple of 32 key/value "
                                         "heads (the key is absent, so qwen3's default as "
                                         "transformers reads it; set it in config.json)"),
              std::string::npos)
        << e.what();
  }
}

TEST(ModelConfig, OptionsThatChangeTheModel) {
  auto llama = fixture_json("llama3.2-1b.v4.json");
  llama["attention_bias"] = true;
  llama["mlp_bias"] = true;
  ModelConfig c = ModelConfig::from_json_text(llama.dump(), "l");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.attention_out_bias);
  EXPECT_TRUE(c.mlp_bias);
  // q/k/v/o biases and gate/up/down biases over 16 layers.
  EXPECT_EQ(c.num_parameters() - 1'235'814'400, 16 * ((2048 + 2 * 512) + 2048 + (2 * 8192 + 2048)));

  auto q3 = fixture_json("qwen3-0.6b.v4.json");
  q3["attention_bias"] = true;
  EXPECT_TRUE(ModelConfig::from_json_text(q3.dump(), "q").attention_out_bias);

  // Older rope_scaling spelled the type as "type".
  llama["rope_scaling"].erase("rope_type");
  llama["rope_scaling"]["type"] = "llama3";
  EXPECT_EQ(ModelConfig::from_json_text(llama.dump(), "l").rope_scaling.type, RopeType::Llama3);
  llama["rope_scaling"] = {{"type", "default"}};
  EXPECT_EQ(ModelConfig::from_json_text(llama.dump(), "l").rope_scaling.type, RopeType::Default);
}

// The error names the file and the field, and says what is wrong.
::testing::AssertionResult refused(const nlohmann::json& config, const std::string& field,
                                   const std::string& what = "") {
  const std::string label = "/models/test/config.json";
  try {
    ModelConfig::from_json_text(config.dump(), label);
    return ::testing::AssertionFailure() << "accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find(label) == std::string::npos ||
        msg.find("field '" + field + "'") == std::string::npos ||
        msg.find(what) == std::string::npos) {
      return ::testing::AssertionFailure() << "message: " << msg;
    }
    return ::testing::AssertionSuccess();
  }
}

TEST(ModelConfigRefusal, UnknownOrMissingModelType) {
  auto j = fixture_json("llama3.2-1b.v4.json");
  j["model_type"] = "phi3";
  EXPECT_TRUE(refused(j, "model_type", "'phi3' is not supported"));
  j.erase("model_type");
  EXPECT_TRUE(refused(j, "model_type", "missing"));
}

// Mistral's window bounds the sequences lazytrain takes (full causal
// attention is the window's up to that length); Qwen's is refused.
TEST(ModelConfigRefusal, SlidingWindowOn) {
  const ModelConfig v01 =
      ModelConfig::from_json_text(fixture_json("mistral-7b-v0.1.v4.json").dump(), "v0.1");
  EXPECT_EQ(v01.max_position_embeddings, 32768);
  EXPECT_EQ(v01.attention_window, 4096);
  EXPECT_EQ(v01.exact_context(), 4096);
  EXPECT_EQ(std::string(v01.exact_context_key()), "sliding_window");
  EXPECT_EQ(nlohmann::json::parse(v01.to_json()).at("sliding_window"), 4096);
  auto m = fixture_json("mistral-7b-v0.3.v4.json");
  EXPECT_EQ(ModelConfig::from_json_text(m.dump(), "m").exact_context(), 32768);  // null: off
  m.erase("sliding_window");  // absent: MistralConfig's 4096 applies
  EXPECT_EQ(ModelConfig::from_json_text(m.dump(), "m").attention_window, 4096);
  m["sliding_window"] = 32768;  // a window as long as any sequence never acts
  const ModelConfig whole = ModelConfig::from_json_text(m.dump(), "m");
  EXPECT_EQ(whole.attention_window, 0);
  EXPECT_EQ(std::string(whole.exact_context_key()), "max_position_embeddings");
  m["sliding_window"] = 0;
  EXPECT_TRUE(refused(m, "sliding_window", "must be positive"));

  // Qwen's window acts from layer max_window_layers on, as transformers
  // derives layer_types: past the last layer, or with no window, none does.
  auto q = fixture_json("qwen2.5-0.5b.v4.json");  // 24 layers, max_window_layers 24
  q["use_sliding_window"] = true;
  EXPECT_EQ(ModelConfig::from_json_text(q.dump(), "q").exact_context(), 32768);
  q["max_window_layers"] = 21;
  EXPECT_TRUE(refused(q, "use_sliding_window", "layers 21-23 (from max_window_layers 21)"));
  q["sliding_window"] = nullptr;
  EXPECT_EQ(ModelConfig::from_json_text(q.dump(), "q").exact_context(), 32768);
  q.erase("sliding_window");     // absent: Qwen2Config's 4096 applies
  q.erase("max_window_layers");  // absent: 28, past this model's 24 layers
  EXPECT_EQ(ModelConfig::from_json_text(q.dump(), "q").num_hidden_layers, 24);
  q["num_hidden_layers"] = 30;
  EXPECT_TRUE(refused(q, "use_sliding_window", "layers 28-29"));
  auto q3 = fixture_json("qwen3-0.6b.v5.json");
  q3["layer_types"][5] = "sliding_attention";
  EXPECT_TRUE(refused(q3, "layer_types", "layer 5"));
  q3["layer_types"] = {"full_attention"};
  EXPECT_TRUE(refused(q3, "layer_types", "lists 1 layers"));
}

TEST(ModelConfigRefusal, UnsupportedRopeTypes) {
  auto v4 = fixture_json("llama3.2-1b.v4.json");
  v4["rope_scaling"] = {
      {"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  EXPECT_TRUE(refused(v4, "rope_scaling.type", "rope type 'yarn' is not supported"));
  v4["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  EXPECT_TRUE(refused(v4, "rope_scaling.rope_type", "'linear'"));

  auto v5 = fixture_json("qwen2.5-0.5b.v5.json");
  v5["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 1e6}, {"factor", 2.0}};
  EXPECT_TRUE(refused(v5, "rope_parameters.rope_type", "'dynamic'"));

  auto llama3 = fixture_json("llama3.2-1b.v5.json");
  llama3["rope_parameters"].erase("factor");
  EXPECT_TRUE(refused(llama3, "rope_parameters.factor", "missing"));
  llama3["rope_parameters"]["factor"] = 8.0;
  llama3["rope_parameters"]["high_freq_factor"] = 1.0;
  EXPECT_TRUE(refused(llama3, "rope_parameters.high_freq_factor"));
  llama3["rope_parameters"]["high_freq_factor"] = 4.0;
  llama3["rope_parameters"]["partial_rotary_factor"] = 0.5;
  EXPECT_TRUE(refused(llama3, "rope_parameters.partial_rotary_factor"));
}

TEST(ModelConfigRefusal, MissingOrBadSizes) {
  auto j = fixture_json("llama3.2-1b.v4.json");
  j.erase("hidden_size");
  EXPECT_TRUE(refused(j, "hidden_size", "missing"));
  j["hidden_size"] = "2048";
  EXPECT_TRUE(refused(j, "hidden_size", "expected an integer"));
  j["hidden_size"] = 2048.0;
  EXPECT_TRUE(refused(j, "hidden_size", "expected an integer"));
  j["hidden_size"] = -1;
  EXPECT_TRUE(refused(j, "hidden_size", "positive"));
  j["hidden_size"] = 2048;
  // A norm's epsilon under a square root: 0 or less is refused.
  for (const double eps : {-1.0, 0.0}) {
    j["rms_norm_eps"] = eps;
    EXPECT_TRUE(refused(j, "rms_norm_eps", "expected a positive number"));
  }
  j["rms_norm_eps"] = 1e-5;
  j["num_key_value_heads"] = 5;
  EXPECT_TRUE(refused(j, "num_key_value_heads", "multiple"));
  // More heads than hidden dimensions and no head_dim: 16 / 32 gives 0.
  j["num_key_value_heads"] = 8;
  j["hidden_size"] = 16;
  j.erase("head_dim");
  EXPECT_TRUE(refused(j, "num_attention_heads", "set head_dim"));
  j["head_dim"] = 64;  // given, it stands
  EXPECT_NO_THROW(ModelConfig::from_json_text(j.dump(), "c"));

  auto g = fixture_json("gpt2.v4.json");
  g.erase("n_embd");
  EXPECT_TRUE(refused(g, "n_embd", "missing"));
  g["n_embd"] = 100;  // not divisible by 12 heads
  EXPECT_TRUE(refused(g, "n_head"));
}

TEST(ModelConfigRefusal, ActivationsDtypesAndOtherOptions) {
  auto j = fixture_json("llama3.2-1b.v4.json");
  j["hidden_act"] = "swish";  // SiLU by another name in transformers
  EXPECT_EQ(ModelConfig::from_json_text(j.dump(), "j").hidden_act, Activation::Silu);
  j["hidden_act"] = "gelu";
  EXPECT_TRUE(refused(j, "hidden_act", "'gelu' is not supported"));
  // Each family's MLP takes its own activation only: a Llama's gated MLP
  // with a GELU built GPT-2's ungated one and failed on gate_proj
  // ("map::at"); GPT-2 with silu built a gate its file has no weight for.
  j["hidden_act"] = "gelu_pytorch_tanh";
  EXPECT_TRUE(refused(j, "hidden_act",
                      "activation 'gelu_pytorch_tanh' is not supported for llama models (silu)"));

  auto g = fixture_json("gpt2.v4.json");
  g["activation_function"] = "relu";
  EXPECT_TRUE(refused(g, "activation_function", "'relu'"));
  g["activation_function"] = "silu";
  EXPECT_TRUE(refused(g, "activation_function",
                      "activation 'silu' is not supported for gpt2 models (gelu_new, "
                      "gelu_pytorch_tanh)"));
  g["activation_function"] = "gelu_pytorch_tanh";
  EXPECT_EQ(ModelConfig::from_json_text(g.dump(), "g").hidden_act, Activation::GeluPytorchTanh);
  g["activation_function"] = "gelu_new";
  g["scale_attn_by_inverse_layer_idx"] = true;
  EXPECT_TRUE(refused(g, "scale_attn_by_inverse_layer_idx"));

  auto d = fixture_json("qwen3-0.6b.v5.json");
  d["dtype"] = "float8_e4m3fn";
  EXPECT_TRUE(refused(d, "dtype", "float8_e4m3fn"));
  auto t = fixture_json("qwen3-0.6b.v4.json");
  t["torch_dtype"] = "int8";
  EXPECT_TRUE(refused(t, "torch_dtype"));
  t["torch_dtype"] = "float16";
  t["quantization_config"] = {{"quant_method", "gptq"}};
  EXPECT_TRUE(refused(t, "quantization_config"));
  t.erase("quantization_config");
  t["eos_token_id"] = "</s>";
  EXPECT_TRUE(refused(t, "eos_token_id"));
}

// A malformed file's huge value is quoted briefly: its first
// characters and its length, not a megabyte of message.
TEST(ModelConfigRefusal, AHugeBadValueIsQuotedBriefly) {
  auto j = fixture_json("llama3.2-1b.v4.json");
  j["hidden_size"] = std::string(1 << 20, 'x');
  try {
    ModelConfig::from_json_text(j.dump(), "c");
    ADD_FAILURE() << "a string hidden_size was accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_LT(message.size(), 1000u);
    EXPECT_NE(message.find("hidden_size"), std::string::npos) << message;
    EXPECT_NE(message.find("... (1048578 characters)"), std::string::npos) << message;
  }
  // Cut at a character's start: "é" is two bytes, and byte 120 of the
  // quoted text ('"' then 119 more) falls inside one.
  std::string accents;
  for (int k = 0; k < 100; ++k) accents += "\xc3\xa9";
  j["hidden_size"] = accents;
  try {
    ModelConfig::from_json_text(j.dump(), "c");
  } catch (const Error& e) {
    const std::string message = e.what();
    const size_t end = message.find("... (");
    ASSERT_NE(end, std::string::npos) << message;
    EXPECT_EQ(message.substr(end - 2, 2), "\xc3\xa9") << message;
  }
}

TEST(ModelConfigRefusal, NotJsonOrNotAFile) {
  try {
    ModelConfig::from_json_text("{\"model_type\": ", "/x/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/x/config.json"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos);
  }
  EXPECT_THROW(ModelConfig::from_json_text("[1]", "c"), Error);
  EXPECT_THROW(ModelConfig::from_file("/nonexistent/config.json"), Error);
}

}  // namespace
}  // namespace lt::models
