#include "train/tokenizer_files_for_transformers.h"

#include <nlohmann/json.hpp>

#include <optional>

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
      std::optional<std::string> bos = files.bos_token;
      if (!bos && files.prefix_tokens.size() == 1) bos = files.prefix_tokens.front();
      std::optional<std::string> pad;
      if (const auto named = files.other_special_tokens.find("pad_token");
          named != files.other_special_tokens.end()) {
        pad = named->second;
      } else {
        pad = padding_token(folder / "tokenizer.json");
      }
      if (bos) config["bos_token"] = *bos;
      if (eos_token) config["eos_token"] = *eos_token;
      if (pad) config["pad_token"] = *pad;
    }
  } catch (const Error&) {
    return std::nullopt;
  }
  config["clean_up_tokenization_spaces"] = false;
  return config;
}

}  // namespace

std::vector<std::string> write_tokenizer_files_for_transformers(const fs::path& folder) {
  std::vector<std::string> written;
  const bool fast = fs::is_regular_file(folder / "tokenizer.json");
  const bool gpt2 = !fast && fs::is_regular_file(folder / "encoder.json") &&
                    fs::is_regular_file(folder / "vocab.bpe");
  if (!fast && !gpt2) return written;
  if (gpt2 && !fs::exists(folder / "vocab.json") && !fs::exists(folder / "merges.txt")) {
    if (const std::optional<std::string> merges = merges_txt(folder / "vocab.bpe")) {
      io::write_file_atomic(folder / "vocab.json", data::read_whole_file(folder / "encoder.json"));
      io::write_file_atomic(folder / "merges.txt", *merges);
      written.insert(written.end(), {"vocab.json", "merges.txt"});
    }
  }
  if (!fs::exists(folder / "tokenizer_config.json")) {
    if (const std::optional<ordered_json> config = tokenizer_config(folder, gpt2)) {
      io::write_file_atomic(folder / "tokenizer_config.json", config->dump(2) + "\n");
      written.push_back("tokenizer_config.json");
    }
  }
  return written;
}

}  // namespace lt::train
