#include "train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "io/hf_model.h"

namespace lt::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kOptimizerFile = "optimizer.safetensors";

// Files copied from the tokenizer folder so a checkpoint is a complete
// Hugging Face folder.
constexpr const char* kTokenizerFiles[] = {"tokenizer.json",
                                           "tokenizer_config.json",
                                           "special_tokens_map.json",
                                           "vocab.json",
                                           "merges.txt",
                                           "encoder.json",
                                           "vocab.bpe"};

// step-N folders in out_dir that hold a finished checkpoint, oldest first.
std::vector<std::pair<int64_t, fs::path>> complete_checkpoints(const fs::path& out_dir) {
  std::vector<std::pair<int64_t, fs::path>> found;
  if (!fs::is_directory(out_dir)) return found;
  for (const auto& entry : fs::directory_iterator(out_dir)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("step-", 0) != 0) continue;
    char* end = nullptr;
    const long long n = std::strtoll(name.c_str() + 5, &end, 10);
    if (*end != '\0' || !fs::exists(entry.path() / kStateFile)) continue;
    found.emplace_back(n, entry.path());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// Deletes a checkpoint folder so that a crash midway never leaves a step-N
// that still has trainer_state.json but lacks its weights: the folder is
// first renamed out of the step-N namespace (one atomic rename), then
// removed. A ".step-" leftover is cleared when the next run starts.
void remove_checkpoint_dir(const fs::path& dir) {
  if (!fs::exists(dir)) return;
  const fs::path doomed =
      dir.parent_path() / ("." + dir.filename().string() + ".old-" + std::to_string(getpid()));
  fs::remove_all(doomed);
  fs::rename(dir, doomed);
  fs::remove_all(doomed);
}

void write_text(const fs::path& path, const std::string& text) {
  io::AtomicFileWriter w(path);
  w.write(text);
  w.commit();
}

}  // namespace

fs::path save_checkpoint(const fs::path& out_dir, const models::CausalLM& model,
                         const std::vector<std::pair<std::string, Tensor>>& optimizer_state,
                         const TrainerState& state, const fs::path& tokenizer_dir,
                         const std::string& config_yaml, int64_t keep_last) {
  fs::create_directories(out_dir);
  const fs::path final_dir = out_dir / ("step-" + std::to_string(state.step));
  const fs::path tmp =
      out_dir / (".step-" + std::to_string(state.step) + ".tmp-" + std::to_string(getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  io::save_hf_model(model, tmp, DType::F32);
  if (!tokenizer_dir.empty() && fs::is_directory(tokenizer_dir)) {
    for (const char* name : kTokenizerFiles) {
      if (fs::exists(tokenizer_dir / name)) fs::copy_file(tokenizer_dir / name, tmp / name);
    }
  }
  io::write_safetensors(tmp / kOptimizerFile, optimizer_state);
  write_text(tmp / "train_config.yaml", config_yaml);
  nlohmann::json j = {{"step", state.step},
                      {"sampler",
                       {{"epoch", state.sampler.epoch},
                        {"position", state.sampler.position},
                        {"offset", state.sampler.offset}}},
                      {"consecutive_bad_steps", state.consecutive_bad_steps}};
  write_text(tmp / kStateFile, j.dump(1) + "\n");
  // Replace an earlier save of the same step (a resumed run re-saving it).
  remove_checkpoint_dir(final_dir);
  fs::rename(tmp, final_dir);

  auto all = complete_checkpoints(out_dir);
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < all.size(); ++i) {
    remove_checkpoint_dir(all[i].second);
  }
  return final_dir;
}

fs::path resolve_checkpoint(const std::string& resume, const fs::path& out_dir) {
  if (resume == "latest") {
    auto all = complete_checkpoints(out_dir);
    LT_CHECK(!all.empty(), "--resume latest: no complete checkpoint (step-N/ with ", kStateFile,
             ") in '", out_dir.string(), "'");
    return all.back().second;
  }
  LT_CHECK(fs::exists(fs::path(resume) / kStateFile), "--resume: '", resume,
           "' is not a checkpoint folder (no ", kStateFile, ")");
  return resume;
}

CheckpointContents read_checkpoint(const fs::path& dir) {
  CheckpointContents c;
  c.dir = dir;
  std::ifstream in(dir / kStateFile);
  LT_CHECK(in.good(), (dir / kStateFile).string(), ": cannot open");
  nlohmann::json j;
  try {
    in >> j;
    c.state.step = j.at("step").get<int64_t>();
    c.state.sampler.epoch = j.at("sampler").at("epoch").get<uint64_t>();
    c.state.sampler.position = j.at("sampler").at("position").get<uint64_t>();
    c.state.sampler.offset = j.at("sampler").at("offset").get<uint64_t>();
    c.state.consecutive_bad_steps = j.value("consecutive_bad_steps", int64_t{0});
  } catch (const nlohmann::json::exception& e) {
    fail((dir / kStateFile).string(), ": malformed training state (", e.what(), ")");
  }
  c.optimizer_state = io::read_safetensors(dir / kOptimizerFile);
  return c;
}

}  // namespace lt::train
