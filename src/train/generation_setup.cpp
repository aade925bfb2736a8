#include "train/generation_setup.h"

#include "core/error.h"
#include "data/dataset.h"
#include "io/hf_model.h"
#include "train/generation.h"

#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#endif

namespace lt::train {

namespace fs = std::filesystem;

namespace {

Device resolve_device(const std::string& name) {
#ifdef LT_WITH_CUDA
  const int gpus = cuda::device_count();
  const char* missing = "no CUDA device is visible";
#else
  const int gpus = 0;
  const char* missing = "this build has no CUDA backend (configure with -DLT_CUDA=ON)";
#endif
  LT_CHECK(name == "auto" || name == "cpu" || name == "cuda",
           "--device must be auto, cpu or cuda; got \"", name, "\"");
  if (name == "cpu" || (name == "auto" && gpus == 0)) return Device::cpu();
  LT_CHECK(gpus > 0, "--device cuda, but ", missing, "; use cpu or auto");
  return Device::cuda(0);
}

bool has_tokenizer_files(const fs::path& path) {
  if (!fs::is_directory(path)) return fs::exists(path);
  return fs::exists(path / "tokenizer.json") || fs::exists(path / "encoder.json");
}

}  // namespace

GenerationModel load_generation_model(const std::string& model_dir, const std::string& tokenizer,
                                      const std::string& device_name, bool tokenizer_required,
                                      const std::string& needed_by) {
  const Device device = resolve_device(device_name);
  GenerationModel g{io::load_hf_model(model_dir, DType::F32), std::nullopt, {}, {}};
  // The GPU computes in bf16, as training does there; the CPU in f32.
  if (device.is_cuda()) {
#ifdef LT_WITH_CUDA
    // Generation keeps the whole model on the GPU (it does not stream
    // blocks as training can): refuse one that cannot fit, before the
    // copy fails halfway with the allocator's message.
    int64_t params = 0;
    for (const auto& [name, p] : g.model.parameters()) params += p.numel();
    const double need = static_cast<double>(params) * dtype_size(DType::BF16);
    const double free = static_cast<double>(cuda::device_free_memory(device.index));
    LT_CHECK(need < free, model_dir, ": the model's bf16 weights take ", need / 1e9,
             " GB and the GPU has ", free / 1e9,
             " GB free; generation does not stream blocks from host memory: use --device cpu");
#endif
    g.model.to(device, DType::BF16);
  }
  g.tokenizer_path = tokenizer.empty() ? fs::path(model_dir) : fs::path(tokenizer);
  if (tokenizer_required || has_tokenizer_files(g.tokenizer_path)) {
    g.tokenizer = data::load_tokenizer_for(
        g.tokenizer_path, needed_by,
        tokenizer.empty() ? "--model (--tokenizer is unset)" : "--tokenizer");
  }
  g.eos_ids = eos_ids_for(model_dir, g.model.config());
  return g;
}

void check_prompts_fit(const data::PromptSet& prompts, const std::string& source,
                       const models::ModelConfig& config, const std::string& model_dir) {
  const int64_t context = config.max_position_embeddings;
  for (const data::PromptRow& row : prompts.rows) {
    const std::string where = row.line > 0 ? source + ":" + std::to_string(row.line) : source;
    const auto len = static_cast<int64_t>(row.ids.size());
    LT_CHECK(len < context, where, ": the prompt has ", len,
             " tokens, which leaves no room for an answer in the model's context of ", context,
             " (max_position_embeddings in ", model_dir,
             "/config.json); prompts are not cut: shorten the row or leave it out");
    for (int32_t id : row.ids) {
      LT_CHECK(id >= 0 && id < config.vocab_size, where, ": token id ", id,
               " is outside the model's vocabulary [0, ", config.vocab_size, ")");
    }
  }
}

}  // namespace lt::train
