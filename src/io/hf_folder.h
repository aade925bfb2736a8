#pragma once
// The weights of a Hugging Face model folder, as transformers saves them:
// either one `model.safetensors`, or shards `model-00001-of-0000N.safetensors`
// listed by `model.safetensors.index.json`:
//
//   {"metadata": {"total_size": <bytes>}, "weight_map": {"<tensor>": "<shard file>", ...}}
//
// When both exist, the single file wins, as it does in transformers.
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace lt::io {

inline constexpr const char* kHfWeightsFile = "model.safetensors";
inline constexpr const char* kHfIndexFile = "model.safetensors.index.json";
// What a folder carries besides the weights and config.json: what
// transformers' AutoTokenizer reads (byte-level BPE, sentencepiece, GPT-2's
// originals), the chat template (transformers 5 keeps it in
// chat_template.jinja, 4.4x in chat_template.json or
// tokenizer_config.json), and the generation defaults (EOS ids, sampling).
inline constexpr const char* kHfTokenizerFiles[] = {"tokenizer.json",
                                                    "tokenizer_config.json",
                                                    "special_tokens_map.json",
                                                    "added_tokens.json",
                                                    "vocab.json",
                                                    "merges.txt",
                                                    "tokenizer.model",
                                                    "encoder.json",
                                                    "vocab.bpe",
                                                    "chat_template.jinja",
                                                    "chat_template.json"};
inline constexpr const char* kHfGenerationFile = "generation_config.json";

// Where a folder has neither kHfWeightsFile nor kHfIndexFile: the first of
// its files that holds weights this program cannot read, and why
// ("pytorch_model.bin: PyTorch's pickled weights; ..."), or "" when it has
// none. So that such a folder is refused rather than taken for one with
// config.json alone (a random start).
std::string weights_not_read(const std::filesystem::path& folder);
// Why `folder` is not a Hugging Face model folder: "'DIR' is not a model
// folder (no config.json there)", and where it holds no safetensors
// weights either, the weights it holds that this program cannot read
// (weights_not_read: a GGUF file, PyTorch's .bin); "" when it has a
// config.json. The caller puts the setting that named the folder before
// it ("config key 'model.path': ", "--model "), so that every command
// taking a model says the same.
std::string not_a_model_folder(const std::filesystem::path& folder);
// transformers' default max_shard_size, "5GB", which huggingface_hub reads
// as decimal: 5 * 10^9 bytes.
inline constexpr uint64_t kHfDefaultMaxShardBytes = 5'000'000'000;

// Read side. Shards are opened (mapped) on first use; tensors are views of
// the mapping as SafetensorsFile gives them.
class HfWeights {
 public:
  explicit HfWeights(const std::filesystem::path& folder);
  HfWeights(const HfWeights&) = delete;
  HfWeights& operator=(const HfWeights&) = delete;

  const std::filesystem::path& folder() const { return folder_; }
  bool sharded() const { return sharded_; }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return weight_map_.count(name) != 0; }
  // tensor name -> file name inside the folder
  const std::map<std::string, std::string>& weight_map() const { return weight_map_; }

  const SafetensorsEntry& entry(const std::string& name) const;
  Tensor tensor(const std::string& name) const;
  NamedTensors tensors() const;  // every tensor, sorted by name
  // Opens every shard now, so that a missing shard or a tensor missing from
  // its shard is reported before any work starts.
  void check_all() const;

 private:
  const SafetensorsFile& shard(const std::string& file, const std::string& for_tensor) const;

  std::filesystem::path folder_;
  bool sharded_ = false;
  std::map<std::string, std::string> weight_map_;
  std::map<std::string, std::vector<std::string>>
      shard_names_;           // file -> tensors the index puts there
  mutable std::mutex mutex_;  // guards open_
  mutable std::map<std::string, std::shared_ptr<const SafetensorsFile>> open_;
};

struct HfWriteOptions {
  uint64_t max_shard_bytes = kHfDefaultMaxShardBytes;
  // transformers refuses a safetensors file whose metadata lacks a known
  // "format" ("pt", "tf", "flax", "mlx").
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
  // False where the folder was made by the caller and must not be made
  // again: a checkpoint's folder deleted mid-save stays deleted (Note
  // [out.dir taken away], train/trainer.cpp).
  bool make_folder = true;
};

// How write_hf_weights lays `tensors` out: per file (model.safetensors, or
// the shards), its name and the tensors it holds, as indices into
// `tensors` in file order; and the index's text (empty for one file).
struct HfWeightsLayout {
  std::vector<std::pair<std::string, std::vector<size_t>>> files;
  std::string index_json;
};
HfWeightsLayout plan_hf_weights(const std::vector<TensorSpec>& tensors,
                                const HfWriteOptions& options = {});

// Writes the weights into `folder` (created if missing): one
// model.safetensors when everything fits in one shard, else shards plus the
// index, split as huggingface_hub splits them (in the given order; a tensor
// above the limit gets a shard of its own). Each file is written atomically,
// the index last; files of an earlier save that this one does not replace
// are removed afterwards. Returns the file names written, index last.
std::vector<std::string> write_hf_weights(const std::filesystem::path& folder,
                                          const NamedTensors& tensors,
                                          const HfWriteOptions& options = {});

// Makes `jinja` the chat template of `folder`: chat_template.jinja, which
// transformers (4.43 on) and this program read first, holds it, and where
// tokenizer_config.json or chat_template.json (an older transformers' and
// a processor's place for it) hold a "chat_template", it is replaced by
// `jinja` too, so that no loader finds another. Each file is written
// atomically; a malformed JSON file is an lt::Error naming it.
void write_chat_template(const std::filesystem::path& folder, const std::string& jinja);

// Every tensor of a folder, by name.
std::map<std::string, Tensor> read_hf_weights(const std::filesystem::path& folder);

}  // namespace lt::io
