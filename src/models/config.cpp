#include "models/config.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/json_brief.h"
#include "core/regular_file.h"

namespace lt::models {

namespace {

using nlohmann::json;

// Typed access to one JSON object of a config file. Every failure names the
// file and the field (with its parent, e.g. "rope_parameters.rope_type").
class Fields {
 public:
  Fields(const json& obj, const std::string& file, std::string prefix = "")
      : obj_(obj), file_(file), prefix_(std::move(prefix)) {}

  template <typename... Args>
  [[noreturn]] void refuse(const std::string& key, const Args&... args) const {
    fail("config '", file_, "': field '", prefix_, key, "': ", args...);
  }

  // The value, or nullptr when the key is absent or null (transformers
  // treats an explicit null like an absent key for every field read here).
  const json* find(const std::string& key) const {
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }

  std::optional<int64_t> opt_int(const std::string& key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) refuse(key, "expected an integer, got ", brief_json(*v));
    // nlohmann keeps integers above INT64_MAX as unsigned; get<int64_t>
    // would wrap them to negative numbers.
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT64_MAX}) {
      refuse(key, brief_json(*v), " is too large");
    }
    return v->get<int64_t>();
  }
  int64_t positive_int(const std::string& key, std::optional<int64_t> fallback = {}) const {
    std::optional<int64_t> v = opt_int(key);
    if (!v) {
      if (!fallback) refuse(key, "missing (required)");
      return *fallback;
    }
    if (*v <= 0) refuse(key, "expected a positive integer, got ", *v);
    return *v;
  }
  double number(const std::string& key, std::optional<double> fallback = {}) const {
    const json* v = find(key);
    if (!v) {
      if (!fallback) refuse(key, "missing (required)");
      return *fallback;
    }
    if (!v->is_number()) refuse(key, "expected a number, got ", brief_json(*v));
    return v->get<double>();
  }
  // An epsilon under a square root: 0 or less gives NaN or inf.
  double positive_number(const std::string& key, double fallback) const {
    const double v = number(key, fallback);
    if (!(v > 0) || !std::isfinite(v)) refuse(key, "expected a positive number, got ", v);
    return v;
  }
  bool boolean(const std::string& key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) refuse(key, "expected true or false, got ", brief_json(*v));
    return v->get<bool>();
  }
  std::optional<std::string> opt_string(const std::string& key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) refuse(key, "expected a string, got ", brief_json(*v));
    return v->get<std::string>();
  }

 private:
  const json& obj_;
  const std::string& file_;
  std::string prefix_;
};

ModelFamily parse_family(const Fields& f) {
  std::optional<std::string> type = f.opt_string("model_type");
  if (!type) f.refuse("model_type", "missing (required)");
  for (ModelFamily fam : {ModelFamily::Llama, ModelFamily::Mistral, ModelFamily::Qwen2,
                          ModelFamily::Qwen3, ModelFamily::Gpt2}) {
    if (*type == model_type_name(fam)) return fam;
  }
  f.refuse("model_type", "'", *type, "' is not supported (lazytrain reads llama, mistral, qwen2, ",
           "qwen3, gpt2)");
}

// The activations a family's MLP is built for: GPT-2's ungated MLP takes
// the tanh GELU (under either name), the decoders' gated MLP SiLU (SwiGLU).
// Another was taken before and built the other family's MLP: GPT-2 with silu
// trained a gate its file has no weight for and never saved it; a Llama with
// gelu_new failed with "map::at".
Activation parse_activation(const Fields& f, const std::string& key, const char* fallback,
                            std::initializer_list<Activation> supported, const char* family) {
  std::string name = f.opt_string(key).value_or(fallback);
  if (name == "swish") name = "silu";  // transformers' ACT2FN maps both to SiLU
  std::string names;
  for (Activation a : supported) {
    if (name == activation_name(a)) return a;
    names += (names.empty() ? "" : ", ") + std::string(activation_name(a));
  }
  f.refuse(key, "activation '", name, "' is not supported for ", family, " models (", names, ")");
}

// Rope settings as transformers resolves them: an old-style rope_scaling
// object wins over rope_parameters; rope_theta comes from whichever of the
// two is used, else from the top level, else the family default.
void parse_rope(const Fields& top, const std::string& file, ModelConfig& c) {
  const json* params = nullptr;
  std::string where;
  if (const json* rs = top.find("rope_scaling")) {
    params = rs;
    where = "rope_scaling";
  } else if (const json* rp = top.find("rope_parameters")) {
    params = rp;
    where = "rope_parameters";
  }
  if (params && !params->is_object())
    top.refuse(where, "expected an object, got ", brief_json(*params));
  // transformers 5 may key rope parameters by layer type; with every layer
  // full attention (checked elsewhere) only that entry applies.
  if (params && !params->contains("rope_type") && !params->contains("type") &&
      params->contains("full_attention")) {
    params = &(*params)["full_attention"];
    where += ".full_attention";
    if (!params->is_object()) top.refuse(where, "expected an object, got ", brief_json(*params));
  }
  c.rope_theta = top.number("rope_theta", 10000.0);
  if (c.rope_theta <= 0) top.refuse("rope_theta", "expected a positive number, got ", c.rope_theta);
  if (!params) return;
  Fields p(*params, file, where + ".");
  c.rope_theta = p.number("rope_theta", c.rope_theta);
  if (c.rope_theta <= 0) p.refuse("rope_theta", "expected a positive number, got ", c.rope_theta);
  const std::string type_key = p.has("rope_type") ? "rope_type" : "type";
  const std::string type = p.opt_string(type_key).value_or("default");
  if (p.has("partial_rotary_factor") && p.number("partial_rotary_factor") != 1.0) {
    p.refuse("partial_rotary_factor", "partial rotary embeddings are not supported");
  }
  if (type == "default") return;
  if (type != "llama3") {
    p.refuse(type_key, "rope type '", type, "' is not supported (default, llama3)");
  }
  RopeScaling& r = c.rope_scaling;
  r.type = RopeType::Llama3;
  r.factor = p.number("factor");
  r.low_freq_factor = p.number("low_freq_factor");
  r.high_freq_factor = p.number("high_freq_factor");
  r.original_max_position_embeddings = p.positive_int("original_max_position_embeddings");
  if (r.factor < 1.0) p.refuse("factor", "expected >= 1, got ", r.factor);
  // The llama3 rule interpolates between the two by dividing by their
  // difference.
  if (!(r.high_freq_factor > r.low_freq_factor)) {
    p.refuse("high_freq_factor", r.high_freq_factor, " must exceed low_freq_factor ",
             r.low_freq_factor);
  }
}

// Sliding-window attention differs from full causal attention only for
// sequences longer than the window; lazytrain computes full attention, so
// Mistral's window bounds the sequences it takes (ModelConfig::
// attention_window). Qwen's, which applies to some layers only, is refused.
void check_attention_kinds(const json& root, const Fields& f, ModelConfig& c) {
  if (c.family == ModelFamily::Mistral) {
    // MistralConfig's default window is 4096, so an absent key means on;
    // an explicit null means off.
    std::optional<int64_t> window = root.contains("sliding_window") ? f.opt_int("sliding_window")
                                                                    : std::optional<int64_t>(4096);
    if (window && *window <= 0) f.refuse("sliding_window", "must be positive, got ", *window);
    if (window && *window < c.max_position_embeddings) c.attention_window = *window;
  }
  // Qwen's window applies to the layers from max_window_layers on (28 when
  // absent), and only with a window: transformers' Qwen2Config and
  // Qwen3Config derive layer_types so when the file lists none. With
  // max_window_layers past the last layer every layer attends in full.
  if ((c.family == ModelFamily::Qwen2 || c.family == ModelFamily::Qwen3) &&
      f.boolean("use_sliding_window", false) && !f.has("layer_types")) {
    const bool window = root.contains("sliding_window") ? f.has("sliding_window") : true;
    const int64_t first = f.opt_int("max_window_layers").value_or(28);
    if (window && first < c.num_hidden_layers) {
      f.refuse("use_sliding_window", "true makes layers ", std::max<int64_t>(first, 0), "-",
               c.num_hidden_layers - 1, " (from max_window_layers ", first,
               ") attend in a sliding window, which is not supported; lazytrain computes full "
               "causal attention");
    }
  }
  if (const json* lt = f.find("layer_types")) {
    if (!lt->is_array()) f.refuse("layer_types", "expected a list, got ", brief_json(*lt));
    if (static_cast<int64_t>(lt->size()) != c.num_hidden_layers) {
      f.refuse("layer_types", "lists ", lt->size(), " layers, num_hidden_layers is ",
               c.num_hidden_layers);
    }
    for (size_t i = 0; i < lt->size(); ++i) {
      const json& t = (*lt)[i];
      if (!t.is_string() || t.get<std::string>() != "full_attention") {
        f.refuse("layer_types", "layer ", i, " is ", brief_json(t),
                 "; only \"full_attention\" is supported");
      }
    }
  }
}

void parse_token_ids(const Fields& f, ModelConfig& c) {
  c.bos_token_id = f.opt_int("bos_token_id");
  c.pad_token_id = f.opt_int("pad_token_id");
  if (const json* eos = f.find("eos_token_id")) {
    if (eos->is_number_integer()) {
      c.eos_token_ids = {eos->get<int64_t>()};
    } else if (eos->is_array()) {
      for (const json& id : *eos) {
        if (!id.is_number_integer())
          f.refuse("eos_token_id", "expected integers, got ", brief_json(id));
        c.eos_token_ids.push_back(id.get<int64_t>());
      }
    } else {
      f.refuse("eos_token_id", "expected an integer or a list, got ", brief_json(*eos));
    }
  }
}

void parse_gpt2(const Fields& f, ModelConfig& c) {
  // GPT2Config's own names; its attribute_map also accepts the common ones.
  auto pick = [&](const char* own, const char* common) {
    return f.has(own) || !f.has(common) ? std::string(own) : std::string(common);
  };
  c.hidden_size = f.positive_int(pick("n_embd", "hidden_size"));
  c.num_hidden_layers = f.positive_int(pick("n_layer", "num_hidden_layers"));
  c.num_attention_heads = f.positive_int(pick("n_head", "num_attention_heads"));
  c.num_key_value_heads = c.num_attention_heads;
  if (c.hidden_size % c.num_attention_heads != 0) {
    f.refuse(pick("n_head", "num_attention_heads"), "n_embd ", c.hidden_size,
             " is not divisible by ", c.num_attention_heads, " heads");
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  // 4 * n_embd must not overflow (a malformed config can hold any size);
  // parameter_count() refuses sizes this large anyway, after this line.
  if (c.hidden_size > INT64_MAX / 4) {
    f.refuse(pick("n_embd", "hidden_size"), c.hidden_size, " is too large");
  }
  c.intermediate_size = f.positive_int("n_inner", 4 * c.hidden_size);
  c.max_position_embeddings = f.positive_int(pick("n_positions", "max_position_embeddings"), 1024);
  c.vocab_size = f.positive_int("vocab_size");
  c.norm_eps = f.positive_number("layer_norm_epsilon", 1e-5);
  c.hidden_act = parse_activation(f, "activation_function", "gelu_new",
                                  {Activation::GeluNew, Activation::GeluPytorchTanh}, "gpt2");
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", true);
  c.attention_bias = c.attention_out_bias = c.mlp_bias = true;
  if (!f.boolean("scale_attn_weights", true)) {
    f.refuse("scale_attn_weights", "unscaled attention is not supported");
  }
  if (f.boolean("scale_attn_by_inverse_layer_idx", false)) {
    f.refuse("scale_attn_by_inverse_layer_idx", "per-layer attention scaling is not supported");
  }
}

void parse_decoder(const Fields& f, const json& root, const std::string& file, ModelConfig& c) {
  c.hidden_size = f.positive_int("hidden_size");
  c.intermediate_size = f.positive_int("intermediate_size");
  c.num_hidden_layers = f.positive_int("num_hidden_layers");
  c.num_attention_heads = f.positive_int("num_attention_heads");
  c.vocab_size = f.positive_int("vocab_size");
  // transformers' per-class defaults for an absent key; an explicit null
  // means "same as the query heads" in every class.
  int64_t kv_default = c.num_attention_heads;
  if (!root.contains("num_key_value_heads")) {
    if (c.family == ModelFamily::Mistral) kv_default = 8;
    if (c.family == ModelFamily::Qwen2 || c.family == ModelFamily::Qwen3) kv_default = 32;
  }
  c.num_key_value_heads = f.positive_int("num_key_value_heads", kv_default);
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    f.refuse("num_key_value_heads", c.num_attention_heads,
             " attention heads are not a multiple of ", c.num_key_value_heads, " key/value heads",
             root.contains("num_key_value_heads")
                 ? std::string()
                 : std::string(" (the key is absent, so ") + c.model_type() +
                       "'s default as transformers reads it; set it in config.json)");
  }
  int64_t head_dim_default = c.hidden_size / c.num_attention_heads;
  if (c.family == ModelFamily::Qwen3 && !root.contains("head_dim")) head_dim_default = 128;
  // Without head_dim the default divides hidden_size among the heads; fewer
  // dimensions than heads would give 0.
  if (head_dim_default <= 0 && !root.contains("head_dim"))
    f.refuse("num_attention_heads", c.num_attention_heads,
             " heads leave no dimension of hidden_size ", c.hidden_size, " to each; set head_dim");
  c.head_dim = f.positive_int("head_dim", head_dim_default);
  if (c.head_dim % 2 != 0)
    f.refuse("head_dim", "rotary embeddings need an even head_dim, got ", c.head_dim);
  int64_t max_pos_default = 2048;
  if (c.family == ModelFamily::Mistral) max_pos_default = 4096 * 32;
  if (c.family == ModelFamily::Qwen2 || c.family == ModelFamily::Qwen3) max_pos_default = 32768;
  c.max_position_embeddings = f.positive_int("max_position_embeddings", max_pos_default);
  c.norm_eps = f.positive_number("rms_norm_eps", 1e-6);
  c.hidden_act = parse_activation(f, "hidden_act", "silu", {Activation::Silu}, c.model_type());
  c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  switch (c.family) {
    case ModelFamily::Llama:
      c.attention_bias = c.attention_out_bias = f.boolean("attention_bias", false);
      c.mlp_bias = f.boolean("mlp_bias", false);
      break;
    case ModelFamily::Mistral:
      // MistralAttention and MistralMLP build every projection with
      // bias=False whatever the config says, so attention_bias is ignored.
      break;
    case ModelFamily::Qwen2:
      // Qwen2Attention always has q/k/v biases and no o bias.
      c.attention_bias = true;
      break;
    case ModelFamily::Qwen3:
      c.attention_bias = c.attention_out_bias = f.boolean("attention_bias", false);
      c.qk_norm = true;
      break;
    case ModelFamily::Gpt2:
      break;
  }
  parse_rope(f, file, c);
  check_attention_kinds(root, f, c);
}

// The parameters a config implies, counted in T: int64_t for
// num_parameters(), long double for the check in from_json_text that a
// config's sizes, each valid alone, do not multiply past int64.
template <typename T>
T parameter_count(const ModelConfig& c) {
  const T H = static_cast<T>(c.hidden_size), I = static_cast<T>(c.intermediate_size),
          V = static_cast<T>(c.vocab_size);
  const T layers = static_cast<T>(c.num_hidden_layers), head_dim = static_cast<T>(c.head_dim);
  const T lm_head = c.tie_word_embeddings ? 0 : V * H;
  if (c.is_gpt2()) {
    const T per_layer = 2 * H                     // ln_1
                        + H * 3 * H + 3 * H       // c_attn (q, k, v fused)
                        + H * H + H               // attn c_proj
                        + 2 * H                   // ln_2
                        + H * I + I + I * H + H;  // mlp c_fc, c_proj
    return V * H + static_cast<T>(c.max_position_embeddings) * H + layers * per_layer + 2 * H +
           lm_head;
  }
  const T q = static_cast<T>(c.num_attention_heads) * head_dim;
  const T kv = static_cast<T>(c.num_key_value_heads) * head_dim;
  T per_layer = H * q + 2 * H * kv + q * H  // q, k, v, o projections
                + 3 * H * I                 // gate, up, down
                + 2 * H;                    // input and post-attention norms
  if (c.attention_bias) per_layer += q + 2 * kv;
  if (c.attention_out_bias) per_layer += H;
  if (c.mlp_bias) per_layer += 2 * I + H;
  if (c.qk_norm) per_layer += 2 * head_dim;
  return V * H + layers * per_layer + H + lm_head;
}

}  // namespace

const char* model_type_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::Llama:
      return "llama";
    case ModelFamily::Mistral:
      return "mistral";
    case ModelFamily::Qwen2:
      return "qwen2";
    case ModelFamily::Qwen3:
      return "qwen3";
    case ModelFamily::Gpt2:
      return "gpt2";
  }
  return "?";
}

const char* activation_name(Activation act) {
  switch (act) {
    case Activation::Silu:
      return "silu";
    case Activation::GeluNew:
      return "gelu_new";
    case Activation::GeluPytorchTanh:
      return "gelu_pytorch_tanh";
  }
  return "?";
}

ModelConfig ModelConfig::from_json_text(const std::string& text, const std::string& label) {
  // A config nests three levels (rope_parameters.full_attention.x); error
  // messages print offending values with json::dump, which recurses, so a
  // value nested 100,000 deep overflowed the stack. Anything deeper than
  // this bound is discarded unbuilt while parsing, and the file refused.
  constexpr int kMaxDepth = 64;
  bool too_deep = false;
  const json::parser_callback_t depth_guard = [&](int depth, json::parse_event_t, json&) {
    too_deep = too_deep || depth > kMaxDepth;
    return depth <= kMaxDepth;
  };
  json root;
  try {
    root = json::parse(text, depth_guard);
  } catch (const json::exception& err) {
    fail("config '", label, "': not valid JSON: ", err.what());
  }
  if (too_deep) fail("config '", label, "': nests deeper than ", kMaxDepth, " levels");
  if (!root.is_object()) fail("config '", label, "': expected a JSON object");
  Fields f(root, label);
  ModelConfig c;
  c.family = parse_family(f);
  if (f.has("quantization_config")) {
    f.refuse("quantization_config", "quantized checkpoints are not supported");
  }
  if (c.family == ModelFamily::Gpt2) {
    parse_gpt2(f, c);
  } else {
    parse_decoder(f, root, label, c);
  }
  // transformers 5 writes "dtype"; 4.x wrote "torch_dtype".
  const std::string dtype_key = f.has("dtype") ? "dtype" : "torch_dtype";
  c.torch_dtype = f.opt_string(dtype_key).value_or("");
  if (!c.torch_dtype.empty() && c.torch_dtype != "float32" && c.torch_dtype != "bfloat16" &&
      c.torch_dtype != "float16") {
    f.refuse(dtype_key, "'", c.torch_dtype, "' is not supported (float32, bfloat16, float16)");
  }
  parse_token_ids(f, c);
  // Each size above is a positive int64, but their products (vocab x
  // hidden, layers x hidden x intermediate) can still overflow: a
  // malformed config (hidden_size 1e18) must be refused here, not become
  // undefined arithmetic in num_parameters() or an absurd allocation. The
  // bound is the weights' bytes at 8 per parameter (F64) fitting int64.
  const long double count = parameter_count<long double>(c);
  if (count > static_cast<long double>(INT64_MAX / 8)) {
    fail("config '", label, "': the sizes (hidden ", c.hidden_size, ", intermediate ",
         c.intermediate_size, ", layers ", c.num_hidden_layers, ", vocab ", c.vocab_size,
         ", heads ", c.num_attention_heads, " x head_dim ", c.head_dim, ") imply ",
         static_cast<double>(count), " parameters, more than any model can hold");
  }
  return c;
}

ModelConfig ModelConfig::from_file(const std::filesystem::path& config_json) {
  require_regular_file(config_json);
  std::ifstream in(config_json, std::ios::binary);
  if (!in) fail("config '", config_json.string(), "': cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return from_json_text(ss.str(), config_json.string());
}

std::optional<DType> ModelConfig::weights_dtype() const {
  if (torch_dtype == "float32") return DType::F32;
  if (torch_dtype == "bfloat16") return DType::BF16;
  if (torch_dtype == "float16") return DType::F16;
  return std::nullopt;
}

std::string ModelConfig::to_json() const {
  json j;
  switch (family) {
    case ModelFamily::Llama:
      j["architectures"] = {"LlamaForCausalLM"};
      break;
    case ModelFamily::Mistral:
      j["architectures"] = {"MistralForCausalLM"};
      break;
    case ModelFamily::Qwen2:
      j["architectures"] = {"Qwen2ForCausalLM"};
      break;
    case ModelFamily::Qwen3:
      j["architectures"] = {"Qwen3ForCausalLM"};
      break;
    case ModelFamily::Gpt2:
      j["architectures"] = {"GPT2LMHeadModel"};
      break;
  }
  j["model_type"] = model_type();
  j["vocab_size"] = vocab_size;
  j["tie_word_embeddings"] = tie_word_embeddings;
  if (!torch_dtype.empty()) j["torch_dtype"] = torch_dtype;
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  if (pad_token_id) j["pad_token_id"] = *pad_token_id;
  if (eos_token_ids.size() == 1) j["eos_token_id"] = eos_token_ids[0];
  if (eos_token_ids.size() > 1) j["eos_token_id"] = eos_token_ids;
  if (is_gpt2()) {
    j["n_embd"] = hidden_size;
    j["n_layer"] = num_hidden_layers;
    j["n_head"] = num_attention_heads;
    j["n_inner"] = intermediate_size;
    j["n_positions"] = max_position_embeddings;
    j["n_ctx"] = max_position_embeddings;
    j["layer_norm_epsilon"] = norm_eps;
    j["activation_function"] = activation_name(hidden_act);
    j["scale_attn_weights"] = true;
    return j.dump(2) + "\n";
  }
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["head_dim"] = head_dim;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = norm_eps;
  j["hidden_act"] = activation_name(hidden_act);
  j["rope_theta"] = rope_theta;
  if (rope_scaling.type == RopeType::Llama3) {
    j["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", rope_scaling.factor},
        {"low_freq_factor", rope_scaling.low_freq_factor},
        {"high_freq_factor", rope_scaling.high_freq_factor},
        {"original_max_position_embeddings", rope_scaling.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (family == ModelFamily::Llama) {
    j["attention_bias"] = attention_bias;
    j["mlp_bias"] = mlp_bias;
  }
  if (family == ModelFamily::Qwen3) j["attention_bias"] = attention_bias;
  // Written explicitly: for Mistral an absent key means a 4096 window.
  if (family == ModelFamily::Mistral)
    j["sliding_window"] = attention_window > 0 ? json(attention_window) : json(nullptr);
  if (family == ModelFamily::Qwen2 || family == ModelFamily::Qwen3) {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = num_hidden_layers;
  }
  return j.dump(2) + "\n";
}

int64_t ModelConfig::num_parameters() const {
  return parameter_count<int64_t>(*this);
}

}  // namespace lt::models
