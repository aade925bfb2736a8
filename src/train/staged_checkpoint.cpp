#include "train/staged_checkpoint.h"

#include <map>

#include "io/atomic_file.h"
#include "io/hf_folder.h"
#include "io/hf_model.h"
#include "io/staged_safetensors.h"
#include "models/hf_mapping.h"

namespace lt::train {

void write_staged_checkpoint_tensors(const std::filesystem::path& dir,
                                     const models::CausalLM& model,
                                     const optim::NamedTensors& optimizer_state,
                                     exec::StagedStates& staged, const std::string& optimizer_file,
                                     const std::filesystem::path& source_config) {
  // Which stage's read holds each name (absent: in host memory).
  std::map<std::string, int> group_of;
  const std::vector<bool> on_disk = staged.on_disk();
  for (size_t s = 0; s < on_disk.size(); ++s)
    if (on_disk[s])
      for (const std::string& name : staged.names(s)) group_of[name] = static_cast<int>(s);
  auto group = [&](const std::string& name) {
    const auto it = group_of.find(name);
    return it == group_of.end() ? -1 : it->second;
  };
  // The stage read now, and the tensors by name: from it, else the live ones.
  std::map<std::string, Tensor> loaded;
  std::map<std::string, Tensor> params;
  for (const auto& [name, p] : model.parameters()) params.emplace(name, p.detach());
  auto param = [&](const std::string& name) -> Tensor {
    const auto it = loaded.find(name);
    return it != loaded.end() ? it->second : params.at(name);
  };

  // The weights, as save_hf_model lays them out (io/hf_folder.h).
  std::vector<io::StagedTensor> weights;
  std::vector<io::TensorSpec> specs;
  for (const models::HfRule& rule : models::hf_rules(model.config())) {
    const int g = group(rule.internal[0]);
    for (const std::string& name : rule.internal)
      LT_CHECK(group(name) == g, "checkpoint: '", rule.hf_name, "' is made of parameters of ",
               "two stages ('", rule.internal[0], "', '", name, "')");
    specs.push_back({rule.hf_name, DType::F32, models::hf_shape(rule, [&](const std::string& n) {
                       return params.at(n).shape();
                     })});
    weights.push_back(
        {specs.back(), g, [&param, rule] { return models::hf_tensor(rule, param, DType::F32); }});
  }
  const io::HfWriteOptions hf;
  const io::HfWeightsLayout layout = io::plan_hf_weights(specs, hf);
  std::vector<io::StagedFile> files;
  for (const auto& [file, order] : layout.files) {
    io::StagedFile f{dir / file, {}, hf.metadata};
    for (size_t i : order) f.tensors.push_back(weights[i]);
    files.push_back(std::move(f));
  }
  io::StagedFile optimizer{dir / optimizer_file, {}, {}};
  for (const auto& [name, t] : optimizer_state) {
    LT_CHECK(t.defined(), "tensor '", name, "' is undefined");
    optimizer.tensors.push_back({{name, t.dtype(), t.shape()}, group(name), [&loaded, name, t] {
                                   const auto it = loaded.find(name);
                                   return it != loaded.end() ? it->second : t;
                                 }});
  }
  files.push_back(std::move(optimizer));

  io::save_hf_config(model, dir, DType::F32, source_config);
  io::write_staged_safetensors(
      files, [&](int stage) { loaded = staged.read(static_cast<size_t>(stage)); },
      [&](int) { loaded.clear(); });
  if (!layout.index_json.empty()) io::write_file_atomic(dir / io::kHfIndexFile, layout.index_json);
}

}  // namespace lt::train
