#include "train/tokenizer_files_for_transformers.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "core/error.h"
#include "data/chat_template.h"
#include "data/json_fields.h"
#include "data/tokenizer.h"
#include "io/atomic_file.h"

namespace lt::train {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

// GPT2Tokenizer skips merges.txt's first line whatever it holds; Hugging
// Face's GPT-2 files, and OpenAI's vocab.bpe, start with this one.
constexpr const char* kMergesVersion = "#version: 0.2";

// merges.txt's text for vocab.bpe's merges; nothing when this program
// cannot read them (a run on token ids need not have).
std::optional<std::string> merges_txt(const fs::path& vocab_bpe) {
  std::string text = std::string(kMergesVersion) + "\n";
  try {
    for (const auto& [left, right] : data::read_gpt2_merges(vocab_bpe))
      text += left + " " + right + "\n";
  } catch (const Error&) {
    return std::nullopt;
  }
  return text;
}

// The text of `id`'s token as tokenizer_config.json names it: an added
// token's content, else the vocabulary's string.
std::string token_content(const data::Tokenizer& tokenizer, uint32_t id) {
  for (const data::AddedToken& token : tokenizer.added_tokens())
    if (token.id == id) return token.content;
  return tokenizer.id_to_token(id).value_or("");
}

// tokenizer.json's "padding": {"pad_token": ...}, which transformers' fast
// tokenizers take as pad_token; nothing when it pads with none.
std::optional<std::string> padding_token(const fs::path& tokenizer_json) {
  // Only "padding" is read: the vocabulary and merges are dropped unbuilt.
  const json::parser_callback_t skip_model = [](int depth, json::parse_event_t event,
                                                json& parsed) {
    return !(depth == 1 && event == json::parse_event_t::key &&
             (parsed == "model" || parsed == "added_tokens"));
  };
  const json j =
      data::parse_json_text(data::read_whole_file(tokenizer_json), tokenizer_json, skip_model);
  if (!j.is_object()) return std::nullopt;
  const auto padding = j.find("padding");
  if (padding == j.end() || !padding->is_object()) return std::nullopt;
  const auto token = padding->find("pad_token");
  if (token == padding->end() || !token->is_string()) return std::nullopt;
  return token->get<std::string>();
}

// tokenizer_config.json for the tokenizer `folder` holds (`gpt2`: GPT-2's
// files, else a tokenizer.json); nothing when this program cannot read it.
std::optional<ordered_json> tokenizer_config(const fs::path& folder, bool gpt2) {
  ordered_json config;
  try {
    const data::Tokenizer tokenizer = data::Tokenizer::load(folder);
    const data::TokenizerConfig files = data::read_tokenizer_config(folder);
    const std::optional<uint32_t> eos = data::resolve_special_ids(tokenizer, files).eos;
    const std::optional<std::string> eos_token =
        eos ? std::optional(token_content(tokenizer, *eos)) : std::nullopt;
    if (gpt2) {
      config["tokenizer_class"] = "GPT2Tokenizer";
      // GPT2Tokenizer's defaults, as GPT-2's published config names them;
      // null where the vocabulary lacks the token, or transformers would
      // add it as a new one.
      constexpr const char* kEndOfText = "<|endoftext|>";
      const ordered_json end_of_text =
          tokenizer.token_to_id(kEndOfText) ? ordered_json(kEndOfText) : ordered_json(nullptr);
      config["bos_token"] = end_of_text;
      config["eos_token"] = eos_token ? ordered_json(*eos_token) : ordered_json(nullptr);
      config["unk_token"] = end_of_text;
    } else {
      config["tokenizer_class"] = "PreTrainedTokenizerFast";
      // No bos_token: the post-processor of tokenizer.json puts a BOS where
      // the tokenizer has one, and a chat template writing {{ bos_token }}
      // would render one where training, reading no tokenizer_config.json,
      // rendered none.
      std::optional<std::string> pad;
      if (const auto named = files.other_special_tokens.find("pad_token");
          named != files.other_special_tokens.end()) {
        pad = named->second;
      } else {
        pad = padding_token(folder / "tokenizer.json");
      }
      if (eos_token) config["eos_token"] = *eos_token;
      if (pad) config["pad_token"] = *pad;
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  config["clean_up_tokenization_spaces"] = false;
  return config;
}

// The files for `folder` as {name, text}, computed (planned_files).
using PlannedFiles = std::vector<std::pair<std::string, std::string>>;

PlannedFiles compute_planned_files(const fs::path& folder, bool gpt2) {
  PlannedFiles planned;
  if (gpt2 && !fs::exists(folder / "vocab.json") && !fs::exists(folder / "merges.txt")) {
    if (const std::optional<std::string> merges = merges_txt(folder / "vocab.bpe")) {
      planned.emplace_back("vocab.json", data::read_whole_file(folder / "encoder.json"));
      planned.emplace_back("merges.txt", *merges);
    }
  }
  if (!fs::exists(folder / "tokenizer_config.json")) {
    if (const std::optional<ordered_json> config = tokenizer_config(folder, gpt2))
      planned.emplace_back("tokenizer_config.json", config->dump(2) + "\n");
  }
  return planned;
}

// The files for `folder`, computed once for its inputs' bytes: every
// checkpoint of a run copies the same tokenizer, and loading it again
// (a 150k-token tokenizer.json: ~0.7 s, ~75 MB) at each save would cost
// each save that much. The key is what the files are computed from: which
// of the tokenizer's files the folder holds, and their bytes.
PlannedFiles planned_files(const fs::path& folder, bool gpt2) {
  std::string key = gpt2 ? "gpt2" : "fast";
  for (const char* name :
       {"tokenizer.json", "encoder.json", "vocab.bpe", "vocab.json", "merges.txt",
        "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"}) {
    if (!fs::exists(folder / name)) continue;
    key += std::string("|") + name + ":" +
           std::to_string(std::hash<std::string>{}(data::read_whole_file(folder / name)));
  }
  static std::mutex mutex;
  static std::map<std::string, PlannedFiles> computed;
  {
    const std::lock_guard lock(mutex);
    if (const auto it = computed.find(key); it != computed.end()) return it->second;
  }
  PlannedFiles planned = compute_planned_files(folder, gpt2);
  const std::lock_guard lock(mutex);
  return computed.emplace(key, std::move(planned)).first->second;
}

}  // namespace

std::vector<std::string> write_tokenizer_files_for_transformers(const fs::path& folder) {
  std::vector<std::string> written;
  const bool fast = fs::is_regular_file(folder / "tokenizer.json");
  const bool gpt2 = !fast && fs::is_regular_file(folder / "encoder.json") &&
                    fs::is_regular_file(folder / "vocab.bpe");
  if (!fast && !gpt2) return written;
  for (const auto& [name, text] : planned_files(folder, gpt2)) {
    io::write_file_atomic(folder / name, text);
    written.push_back(name);
  }
  return written;
}

}  // namespace lt::train
