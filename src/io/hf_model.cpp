#include "io/hf_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "autograd/grad_mode.h"
#include "core/host_memory.h"
#include "core/regular_file.h"
#include "io/atomic_file.h"
#include "models/hf_mapping.h"

namespace lt::io {

using models::CausalLM;
using models::HfLayout;
using models::HfRule;
using models::ModelConfig;

namespace {

std::map<std::string, Tensor> parameters_by_name(const CausalLM& model) {
  std::map<std::string, Tensor> out;
  for (auto& [name, p] : model.parameters()) out[name] = p.detach();
  return out;
}

// GPT-2 checkpoints come both with and without the "transformer." prefix.
std::string resolve_name(const HfWeights& w, const std::string& name) {
  if (w.contains(name)) return name;
  const std::string prefix = "transformer.";
  if (name.rfind(prefix, 0) == 0 && w.contains(name.substr(prefix.size()))) {
    return name.substr(prefix.size());
  }
  return "";
}

void copy_checked(const Tensor& dst, const Tensor& src, const std::string& hf_name,
                  const std::filesystem::path& folder) {
  LT_CHECK(dst.shape() == src.shape(), folder.string(), ": tensor '", hf_name, "' has shape ",
           shape_str(src.shape()), ", the config implies ", shape_str(dst.shape()));
  dst.copy_(src);
}

// `source` (a config.json) with the weights' dtype set to saved's, in its
// own key order; nothing when it does not parse as `saved`'s model.
std::optional<std::string> source_with_dtype(const std::filesystem::path& source,
                                             const ModelConfig& saved) {
  nlohmann::ordered_json j;
  try {
    std::ifstream in(source, std::ios::binary);
    j = nlohmann::ordered_json::parse(in);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (!j.is_object()) return std::nullopt;
  // transformers 5 reads "dtype" before "torch_dtype" (so does
  // ModelConfig): whichever the file has is set; a file with neither gets
  // the 4.x key, which 5 also reads.
  bool set = false;
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (j.contains(key)) {
      j[key] = saved.torch_dtype;
      set = true;
    }
  }
  if (!set) j["torch_dtype"] = saved.torch_dtype;
  std::string text = j.dump(2) + "\n";
  try {
    if (ModelConfig::from_json_text(text, source.string()) != saved) return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
  return text;
}

}  // namespace

void check_model_fits_host(const ModelConfig& config, const std::filesystem::path& config_path,
                           DType dtype, int64_t in_memory) {
  const int64_t all = config.num_parameters();
  const std::string which =
      in_memory < 0 ? ""
                    : " of which " + std::to_string(in_memory) +
                          " in host memory at once, the rest streamed to disk a stage at a time";
  check_host_memory_for((in_memory < 0 ? all : in_memory) * static_cast<int64_t>(dtype_size(dtype)),
                        "the model of '" + config_path.string() + "' (" + std::to_string(all) +
                            " parameters in " + dtype_name(dtype) + which + ")");
}

namespace {

ModelConfig read_config(const std::filesystem::path& folder) {
  // A file named bare ("model.safetensors", "train.jsonl") has no parent in
  // its path: the folder that holds it is the working one.
  const std::string holder =
      folder.has_parent_path() ? folder.parent_path().string() : "., the working folder";
  LT_CHECK(!std::filesystem::exists(folder) || std::filesystem::is_directory(folder),
           "model folder '", folder.string(), "' is a file; give the folder that holds it (",
           holder, ")");
  LT_CHECK(std::filesystem::is_directory(folder), "model folder '", folder.string(),
           "' does not exist");
  require_regular_file(folder / "config.json");
  if (const std::string why = not_a_model_folder(folder); !why.empty()) fail(why);
  return ModelConfig::from_file(folder / "config.json");
}

}  // namespace

HfModelReader::HfModelReader(const std::filesystem::path& folder)
    : config_(read_config(folder)), weights_(folder) {
  weights_.check_all();
  // The model is allocated from config.json's sizes before any tensor is
  // compared with them, so a malformed config (vocab_size 2^31) ended in a
  // failed allocation of hundreds of GB that named no file. Every parameter
  // is filled from its own values of the weight files, so a config needing
  // far more values than the files hold is refused first, and what is
  // allocated stays within a small multiple of the files. The slack (2x and
  // 2^20 values) leaves ordinary mismatches, a tensor missing or of the
  // wrong shape, to the messages below that name the tensor.
  int64_t stored = 0;
  for (const auto& name : weights_.names()) stored += numel(weights_.entry(name).shape);
  LT_CHECK(config_.num_parameters() <= 2 * stored + (int64_t{1} << 20), "config '",
           config_path().string(), "' implies ", config_.num_parameters(),
           " parameters, but the weights in '", folder.string(), "' hold only ", stored, " values");
}

void HfModelReader::check_against(const CausalLM& model) const {
  const std::filesystem::path& folder = weights_.folder();
  const auto params = parameters_by_name(model);
  std::set<std::string> used;
  for (const HfRule& rule : models::hf_rules(config_)) {
    const std::string name = resolve_name(weights_, rule.hf_name);
    LT_CHECK(!name.empty(), folder.string(), ": the weights lack tensor '", rule.hf_name,
             "', which a ", config_.model_type(), " model with this config.json needs");
    used.insert(name);
    const Tensor src = weights_.tensor(name);  // a view of the mapping: nothing read
    LT_CHECK(src.dtype() != DType::I64 && is_floating(src.dtype()), folder.string(), ": tensor '",
             name, "' has dtype ", dtype_name(src.dtype()), ", expected a floating type");
    const Shape want =
        models::hf_shape(rule, [&](const std::string& p) { return params.at(p).shape(); });
    LT_CHECK(src.shape() == want, folder.string(), ": tensor '", name, "' has shape ",
             shape_str(src.shape()), ", the config implies ", shape_str(want));
  }
  std::vector<std::string> unexpected;
  for (const auto& name : weights_.names()) {
    if (used.count(name) || models::is_ignorable_hf_buffer(name)) continue;
    if (config_.tie_word_embeddings && name == "lm_head.weight") continue;  // a tied copy
    unexpected.push_back(name);
  }
  if (!unexpected.empty()) {
    std::string list;
    for (size_t i = 0; i < unexpected.size() && i < 5; ++i) list += (i ? ", " : "") + unexpected[i];
    fail(folder.string(), ": ", unexpected.size(), " tensor(s) that a ", config_.model_type(),
         " model with this config.json does not have: ", list,
         unexpected.size() > 5 ? ", ..." : "");
  }
}

std::string HfModelReader::tied_head_warning() const {
  if (!config_.tie_word_embeddings || !weights_.contains("lm_head.weight")) return "";
  std::string embed_name;
  for (const HfRule& rule : models::hf_rules(config_))
    if (rule.internal[0] == "embed.tokens.weight")
      embed_name = resolve_name(weights_, rule.hf_name);
  if (embed_name.empty()) return "";
  const Tensor head = weights_.tensor("lm_head.weight");
  const Tensor embed = weights_.tensor(embed_name);
  bool same = head.shape() == embed.shape();
  // Sixteen rows spread over the vocabulary: a copy matches in all of
  // them, a trained head in none.
  const int64_t rows = same ? head.shape()[0] : 0;
  for (int64_t k = 0; same && k < std::min<int64_t>(rows, 16); ++k) {
    const int64_t row = k * (rows - 1) / std::max<int64_t>(std::min<int64_t>(rows, 16) - 1, 1);
    const Tensor a = head.select(0, row).to(DType::F32).contiguous();
    const Tensor b = embed.select(0, row).to(DType::F32).contiguous();
    same = std::equal(a.data<float>(), a.data<float>() + a.numel(), b.data<float>());
  }
  if (same) return "";
  return fmt::format(
      "warning: {}: config.json ties the output head to the embedding (tie_word_embeddings "
      "true), so the weights' 'lm_head.weight', which differs from '{}', is not read (transformers "
      "may load it as an untied head); to train with that head, set tie_word_embeddings false in "
      "config.json",
      weights_.folder().string(), embed_name);
}

void HfModelReader::read_stage(const CausalLM& model, size_t stage) const {
  const std::filesystem::path& folder = weights_.folder();
  LT_CHECK(stage < model.stages().size(), "read_stage: stage ", stage, " of ",
           model.stages().size());
  nn::NamedParameters own;
  model.stages()[stage]->collect(own);
  std::map<std::string, Tensor> params;
  for (const auto& [name, p] : own) params[name] = p.detach();
  NoGradGuard no_grad;
  for (const HfRule& rule : models::hf_rules(config_)) {
    if (!params.count(rule.internal[0])) continue;
    const std::string name = resolve_name(weights_, rule.hf_name);
    LT_CHECK(!name.empty(), folder.string(), ": the weights lack tensor '", rule.hf_name, "'");
    const Tensor src = weights_.tensor(name).to(params.at(rule.internal[0]).dtype());
    switch (rule.layout) {
      case HfLayout::Same:
        copy_checked(params.at(rule.internal[0]), src, name, folder);
        break;
      case HfLayout::Transposed:
        LT_CHECK(src.dim() == 2, folder.string(), ": tensor '", name, "' must be 2-D");
        copy_checked(params.at(rule.internal[0]), src.transpose(0, 1), name, folder);
        break;
      case HfLayout::FusedQkvConv1D:
      case HfLayout::FusedQkvBias: {
        const bool weight = rule.layout == HfLayout::FusedQkvConv1D;
        const int64_t dim = weight ? 1 : 0;
        LT_CHECK(src.dim() == (weight ? 2 : 1) && src.size(dim) % 3 == 0, folder.string(),
                 ": tensor '", name, "' has shape ", shape_str(src.shape()),
                 ", expected q, k and v fused");
        const int64_t part = src.size(dim) / 3;
        for (int k = 0; k < 3; ++k) {
          Tensor piece = src.slice(dim, k * part, (k + 1) * part);
          copy_checked(params.at(rule.internal[k]), weight ? piece.transpose(0, 1) : piece, name,
                       folder);
        }
        break;
      }
    }
  }
}

CausalLM load_hf_model(const std::filesystem::path& folder, DType dtype) {
  const HfModelReader reader(folder);
  check_model_fits_host(reader.config(), reader.config_path(), dtype);
  CausalLM model = CausalLM::uninitialized(reader.config(), dtype);
  reader.check_against(model);
  if (const std::string warning = reader.tied_head_warning(); !warning.empty())
    std::fprintf(stderr, "%s\n", warning.c_str());
  for (size_t s = 0; s < model.stages().size(); ++s) reader.read_stage(model, s);
  return model;
}

void save_hf_model(const CausalLM& model, const std::filesystem::path& folder, DType dtype,
                   const HfWriteOptions& options, const std::filesystem::path& source_config) {
  LT_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16,
           "save: weights dtype must be f32, bf16 or f16, got ", dtype_name(dtype));
  NamedTensors out = models::to_hf_layout(model.config(), parameters_by_name(model), dtype);
  if (options.make_folder) std::filesystem::create_directories(folder);
  save_hf_config(model, folder, dtype, source_config);
  write_hf_weights(folder, out, options);
}

void save_hf_config(const CausalLM& model, const std::filesystem::path& folder, DType dtype,
                    const std::filesystem::path& source_config) {
  ModelConfig saved = model.config();
  saved.torch_dtype = dtype == DType::F32    ? "float32"
                      : dtype == DType::BF16 ? "bfloat16"
                                             : "float16";
  std::optional<std::string> kept;
  if (!source_config.empty() && std::filesystem::is_regular_file(source_config))
    kept = source_with_dtype(source_config, saved);
  AtomicFileWriter config_file(folder / "config.json");
  config_file.write(kept ? *kept : saved.to_json());
  config_file.commit();
}

}  // namespace lt::io
