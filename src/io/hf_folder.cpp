#include "io/hf_folder.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/regular_file.h"
#include "io/atomic_file.h"

namespace lt::io {

namespace {

using nlohmann::json;

std::string read_text(const std::filesystem::path& path) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '", path.string(), "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read '", path.string(), "'");
  return ss.str();
}

// A shard must be a plain file name inside the folder: an index naming
// "../x" or "/etc/x" must not make us open files elsewhere.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

bool file_exists(const std::filesystem::path& p) {
  std::error_code ec;  // an unreadable folder reads as "absent", reported by the caller
  return std::filesystem::exists(p, ec);
}

// "model-NNNNN-of-NNNNN.safetensors": the names transformers gives shards.
bool is_shard_file_name(const std::string& name) {
  static const std::string pattern = "model-#####-of-#####.safetensors";
  if (name.size() != pattern.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const bool ok = pattern[i] == '#' ? std::isdigit(static_cast<unsigned char>(name[i])) != 0
                                      : name[i] == pattern[i];
    if (!ok) return false;
  }
  return true;
}

std::string shard_file_name(size_t index, size_t count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buf;
}

}  // namespace

std::string weights_not_read(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end;
       it.increment(error))
    if (it->is_regular_file()) files.push_back(it->path());
  std::sort(files.begin(), files.end());  // the same file named each time
  for (const auto& file : files) {
    const std::string name = file.filename().string(), ext = file.extension().string();
    if (ext == ".safetensors")
      return name + " (safetensors, but no " + kHfIndexFile + " lists the shards: " +
             "an unfinished download? fetch the index, or name a single file " + kHfWeightsFile +
             ")";
    if (ext == ".bin" || ext == ".pt" || ext == ".pth" || ext == ".ckpt")
      return name +
             " (PyTorch's pickled weights, which this program does not read: save the model "
             "with safetensors, e.g. transformers' save_pretrained(DIR, "
             "safe_serialization=True))";
    if (ext == ".gguf" || ext == ".h5" || ext == ".msgpack")
      return name + " (weights in a format this program does not read: it reads safetensors)";
  }
  return "";
}

namespace {

// The checkpoint of `folder` with the highest step, when `folder` is a
// training run's out.dir (step-N/ folders holding a config.json); empty
// otherwise. A run's out.dir is what a new user gives generate or eval
// first, the run having said where its outputs went.
std::filesystem::path highest_checkpoint_in(const std::filesystem::path& folder) {
  std::filesystem::path found;
  uint64_t highest = 0;
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end;
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    const std::string digits = name.starts_with("step-") ? name.substr(5) : "";
    if (digits.empty() || digits.size() > 18 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    std::error_code not_there;
    if (!std::filesystem::is_regular_file(it->path() / "config.json", not_there)) continue;
    const uint64_t step = std::stoull(digits);
    if (found.empty() || step > highest) {
      found = it->path();
      highest = step;
    }
  }
  return found;
}

}  // namespace

std::string not_a_model_folder(const std::filesystem::path& folder) {
  std::error_code error;  // an unreadable folder reads as one without config.json
  if (std::filesystem::is_regular_file(folder / "config.json", error)) return "";
  // model.path=qwen/config.json: "no config.json there" contradicted the
  // name. A file named bare has the working folder for its holder.
  if (std::filesystem::is_regular_file(folder, error))
    return "'" + folder.string() +
           "' is a file, not a model folder; give the folder that holds it (" +
           (folder.has_parent_path() ? folder.parent_path().string() : "., the working folder") +
           ")";
  // A path mistyped reads as a missing folder, not as one without a config.
  if (!std::filesystem::exists(folder, error) && !error) {
    const std::filesystem::path above = nearest_existing_folder(folder, error);
    const bool parent_exists = above == std::filesystem::absolute(folder, error).parent_path();
    return "'" + folder.string() + "' does not exist" +
           (error || parent_exists
                ? std::string()
                : " (the nearest folder of it that exists is " + above.string() + ")");
  }
  const bool safetensors =
      file_exists(folder / kHfWeightsFile) || file_exists(folder / kHfIndexFile);
  const std::string other = safetensors ? "" : weights_not_read(folder);
  std::string why = "'" + folder.string() + "' is not a model folder (no config.json there)" +
                    (other.empty() ? "" : "; it holds " + other);
  if (const std::filesystem::path checkpoint = highest_checkpoint_in(folder); !checkpoint.empty())
    why += "; it is a training run's folder: give one of its checkpoints, such as " +
           checkpoint.string() + " (the highest step)";
  return why;
}

HfWeights::HfWeights(const std::filesystem::path& folder) : folder_(folder) {
  const auto single = folder_ / kHfWeightsFile;
  const auto index = folder_ / kHfIndexFile;
  if (file_exists(single)) {
    auto file = std::make_shared<const SafetensorsFile>(single);
    for (const auto& name : file->names()) weight_map_[name] = kHfWeightsFile;
    open_[kHfWeightsFile] = std::move(file);
    return;
  }
  if (!file_exists(index)) {
    const std::string other = weights_not_read(folder_);
    // A folder with a config.json and no weights at all (not a checkpoint,
    // whose weights are missing by damage) gets them by training from it.
    const bool config_alone = other.empty() && file_exists(folder_ / "config.json") &&
                              !file_exists(folder_ / "trainer_state.json");
    fail("model folder '", folder_.string(), "' holds neither ", kHfWeightsFile, " nor ",
         kHfIndexFile, other.empty() ? "" : "; it holds " + other,
         config_alone ? "; for weights from its config.json, `lazytrain train` with model.path " +
                            folder_.string() +
                            " starts from random weights (model.init auto, the default, does so "
                            "for such a folder; model.init random for any) and saves each "
                            "checkpoint, out.dir/step-N, as a model folder with its weights"
                      : "");
  }
  sharded_ = true;
  const std::string label = index.string();
  json root;
  try {
    root = json::parse(read_text(index));
  } catch (const json::exception& err) {
    fail("index '", label, "': not valid JSON: ", err.what());
  }
  if (!root.is_object()) fail("index '", label, "': expected a JSON object");
  auto wm = root.find("weight_map");
  if (wm == root.end()) fail("index '", label, "': field 'weight_map': missing");
  if (!wm->is_object()) {
    fail("index '", label, "': field 'weight_map': expected an object, got ", wm->type_name());
  }
  if (wm->empty()) fail("index '", label, "': field 'weight_map': lists no tensors");
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string()) {
      fail("index '", label, "': field 'weight_map': tensor '", name, "' maps to a ",
           file.type_name(), ", expected a shard file name");
    }
    const auto& f = file.get_ref<const std::string&>();
    if (!is_plain_file_name(f)) {
      fail("index '", label, "': field 'weight_map': tensor '", name, "' maps to '", f,
           "', which is not a file name inside the folder");
    }
    weight_map_[name] = f;
    shard_names_[f].push_back(name);
  }
}

std::vector<std::string> HfWeights::names() const {
  std::vector<std::string> out;
  out.reserve(weight_map_.size());
  for (const auto& [name, file] : weight_map_) out.push_back(name);
  return out;
}

const SafetensorsFile& HfWeights::shard(const std::string& file,
                                        const std::string& for_tensor) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = open_.find(file);
  if (it != open_.end()) return *it->second;
  const auto path = folder_ / file;
  if (!file_exists(path)) {
    fail("model folder '", folder_.string(), "': shard '", file, "' (listed in ", kHfIndexFile,
         " for tensor '", for_tensor, "') does not exist");
  }
  auto opened = std::make_shared<const SafetensorsFile>(path);
  // Every name the index puts in this shard must be there; checked once per
  // shard so that a stale index is caught whichever tensor is asked first.
  for (const auto& name : shard_names_.at(file)) {
    if (!opened->contains(name)) {
      fail("model folder '", folder_.string(), "': ", kHfIndexFile, " maps tensor '", name,
           "' to shard '", file, "', which does not hold it");
    }
  }
  return *open_.emplace(file, std::move(opened)).first->second;
}

const SafetensorsEntry& HfWeights::entry(const std::string& name) const {
  auto it = weight_map_.find(name);
  if (it == weight_map_.end()) {
    fail("model folder '", folder_.string(), "' has no tensor '", name, "'");
  }
  return shard(it->second, name).entry(name);
}

Tensor HfWeights::tensor(const std::string& name) const {
  auto it = weight_map_.find(name);
  if (it == weight_map_.end()) {
    fail("model folder '", folder_.string(), "' has no tensor '", name, "'");
  }
  return shard(it->second, name).tensor(name);
}

NamedTensors HfWeights::tensors() const {
  NamedTensors out;
  out.reserve(weight_map_.size());
  for (const auto& [name, file] : weight_map_) out.emplace_back(name, tensor(name));
  return out;
}

void HfWeights::check_all() const {
  for (const auto& [file, names] : shard_names_) shard(file, names.front());
}

std::map<std::string, Tensor> read_hf_weights(const std::filesystem::path& folder) {
  HfWeights weights(folder);
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : weights.tensors()) out.emplace(name, std::move(t));
  return out;
}

HfWeightsLayout plan_hf_weights(const std::vector<TensorSpec>& tensors,
                                const HfWriteOptions& options) {
  LT_CHECK(options.max_shard_bytes > 0, "max shard size must be positive");
  std::set<std::string> seen;
  for (const TensorSpec& t : tensors) {
    LT_CHECK(seen.insert(t.name).second, "tensor name '", t.name, "' appears twice");
  }

  // huggingface_hub's split_state_dict_into_shards: fill shards in order;
  // a tensor bigger than the limit is put in a shard of its own at once,
  // while the shard being filled stays open.
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  uint64_t current_bytes = 0;
  uint64_t total_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t nbytes = tensors[i].nbytes();
    total_bytes += nbytes;
    if (nbytes > options.max_shard_bytes) {
      shards.push_back({i});
      continue;
    }
    if (current_bytes + nbytes > options.max_shard_bytes) {
      shards.push_back(std::move(current));
      current = {};
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += nbytes;
  }
  if (!current.empty()) shards.push_back(std::move(current));

  HfWeightsLayout layout;
  json weight_map = json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file =
        shards.size() == 1 ? kHfWeightsFile : shard_file_name(s, shards.size());
    // Largest element size first (then by name), as the safetensors library
    // orders them: every tensor then starts aligned to its element size,
    // so readers can map it without copying.
    std::vector<size_t> order = shards[s];
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      size_t sa = dtype_size(tensors[a].dtype);
      size_t sb = dtype_size(tensors[b].dtype);
      return sa != sb ? sa > sb : tensors[a].name < tensors[b].name;
    });
    for (size_t i : order) weight_map[tensors[i].name] = file;
    layout.files.emplace_back(file, std::move(order));
  }
  if (shards.size() > 1) {
    json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    // nlohmann's objects are sorted by key, and dump(2) matches the
    // json.dumps(indent=2, sort_keys=True) that transformers writes.
    layout.index_json = index.dump(2) + "\n";
  }
  return layout;
}

std::vector<std::string> write_hf_weights(const std::filesystem::path& folder,
                                          const NamedTensors& tensors,
                                          const HfWriteOptions& options) {
  LT_CHECK(!tensors.empty(), "no tensors to write to '", folder.string(), "'");
  const HfWeightsLayout layout = plan_hf_weights(specs_of(tensors), options);
  std::error_code ec;
  if (options.make_folder) {
    std::filesystem::create_directories(folder, ec);
    if (ec) fail("cannot create model folder '", folder.string(), "': ", ec.message());
  }
  std::vector<std::string> written;
  for (const auto& [file, order] : layout.files) {
    NamedTensors shard;
    for (size_t i : order) shard.push_back(tensors[i]);
    write_safetensors(folder / file, shard, options.metadata);
    written.push_back(file);
  }
  if (!layout.index_json.empty()) {
    write_file_atomic(folder / kHfIndexFile, layout.index_json);
    written.push_back(kHfIndexFile);
  }

  // Remove what an earlier save left behind and this one did not replace;
  // a stale model.safetensors would shadow the new index.
  std::set<std::string> keep(written.begin(), written.end());
  std::vector<std::filesystem::path> stale;
  for (const auto& dirent : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = dirent.path().filename().string();
    if (keep.count(name)) continue;
    if (is_shard_file_name(name) || name == kHfWeightsFile || name == kHfIndexFile) {
      stale.push_back(dirent.path());
    }
  }
  if (ec) fail("cannot list model folder '", folder.string(), "': ", ec.message());
  for (const auto& path : stale) {
    if (!std::filesystem::remove(path, ec) && ec) {
      fail("cannot remove stale '", path.string(), "' from an earlier save: ", ec.message());
    }
  }
  return written;
}

void write_chat_template(const std::filesystem::path& folder, const std::string& jinja) {
  write_file_atomic(folder / "chat_template.jinja", jinja);
  for (const char* name : {"tokenizer_config.json", "chat_template.json"}) {
    const std::filesystem::path file = folder / name;
    if (!std::filesystem::exists(file)) continue;
    // ordered_json: the file keeps its key order, only the template changes.
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(read_text(file));
    } catch (const nlohmann::json::exception& e) {
      fail("'", file.string(), "': not valid JSON (", e.what(), ")");
    }
    if (!j.is_object() || !j.contains("chat_template")) continue;
    j["chat_template"] = jinja;
    write_file_atomic(file, j.dump(2) + "\n");
  }
}

}  // namespace lt::io
