// Reading tokenizer files: Hugging Face tokenizer.json, and GPT-2's
// encoder.json + vocab.bpe. Every problem is an lt::Error that names the
// file and the field; nothing here crashes on a malformed file.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "data/byte_level.h"
#include "data/json_fields.h"
#include "data/tokenizer.h"

namespace lt::data {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json parse_json_file(const fs::path& file) {
  return parse_json_text(read_whole_file(file), file);
}

std::vector<std::pair<std::string, uint32_t>> parse_vocab(const json& vocab,
                                                          const JsonField& field) {
  if (!vocab.is_object())
    field.fail("expected an object of token -> id, found " + json_type_name(vocab));
  std::vector<std::pair<std::string, uint32_t>> entries;
  entries.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    entries.emplace_back(it.key(), require_token_id(it.value(), field.member(it.key())));
  }
  return entries;
}

// Merges are "left right" strings (one space) or ["left", "right"] pairs.
std::vector<std::pair<std::string, std::string>> parse_merges(const json& merges,
                                                              const JsonField& field) {
  if (!merges.is_array()) field.fail("expected a list of merges, found " + json_type_name(merges));
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    if (merge.is_string()) {
      const std::string& text = merge.get_ref<const std::string&>();
      size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        field.element(i).fail("expected \"left right\" with exactly one space, found " +
                              merge.dump());
      }
      pairs.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      pairs.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      field.element(i).fail("expected \"left right\" or [\"left\", \"right\"], found " +
                            merge.dump());
    }
  }
  return pairs;
}

// Refuses a vocabulary that would drop bytes (BpeModel::bytes_without_token),
// naming the first few. Every byte-level BPE released (GPT-2, Llama 3, Qwen)
// has a token for each of the 256 bytes, so this stops only damaged or
// hand-made files.
void check_every_byte_encodes(const BpeModel& model, const JsonField& vocab_field) {
  const std::vector<uint8_t> missing = model.bytes_without_token();
  if (missing.empty()) return;
  std::string list;
  for (size_t i = 0; i < missing.size() && i < 8; ++i) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", missing[i]);
    list += (i ? ", " : "") + std::string(hex);
  }
  if (missing.size() > 8) list += ", ...";
  char first[8];
  std::snprintf(first, sizeof first, "0x%02X", missing.front());
  vocab_field.fail("no token for byte " + std::string(first) + " (\"" +
                   byte_level_encode(std::string(1, static_cast<char>(missing.front()))) +
                   "\" in the byte-level alphabet), and no unk_token or byte_fallback token "
                   "stands in for it, so text holding it would lose it silently; " +
                   std::to_string(missing.size()) + " of 256 bytes lack one: " + list);
}

// A character-level (SentencePiece-style) model must not drop a character
// either: a Llama 2 or Mistral vocabulary has <unk> and all 256 "<0xXX>".
void check_every_character_encodes(const BpeModel& model, const JsonField& field) {
  if (!model.may_drop_characters()) return;
  field.fail(
      "a character outside the vocabulary would be dropped silently: there is no unk_token, and "
      "byte_fallback is off or the vocabulary lacks some of the tokens <0x00> .. <0xFF> (with "
      "no ByteLevel pre-tokenizer the vocabulary is read as SentencePiece-style: characters, "
      "not bytes)");
}

BpeModel parse_model(const json& model, const JsonField& field, bool byte_level) {
  if (!model.is_object()) field.fail("expected an object, found " + json_type_name(model));
  if (const json* type = optional_member(model, field, "type")) {
    std::string name = require_string(*type, field.member("type"));
    if (name != "BPE")
      field.member("type").fail("unsupported model \"" + name + "\"; expected BPE");
  }
  if (const json* dropout = optional_member(model, field, "dropout")) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0) {
      field.member("dropout").fail("BPE dropout is not supported (expected null), found " +
                                   dropout->dump());
    }
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* value = optional_member(model, field, affix)) {
      if (!require_string(*value, field.member(affix)).empty()) {
        field.member(affix).fail("not supported (expected null or \"\"), found " +
                                 brief_json(*value));
      }
    }
  }
  auto vocab = parse_vocab(require_member(model, field, "vocab"), field.member("vocab"));
  auto merges = parse_merges(require_member(model, field, "merges"), field.member("merges"));

  BpeOptions options;
  options.byte_level = byte_level;
  options.ignore_merges = optional_bool(model, field, "ignore_merges", false);
  options.byte_fallback = optional_bool(model, field, "byte_fallback", false);
  options.fuse_unk = optional_bool(model, field, "fuse_unk", false);
  if (const json* unk = optional_member(model, field, "unk_token")) {
    std::string unk_token = require_string(*unk, field.member("unk_token"));
    for (const auto& [token, id] : vocab) {
      if (token == unk_token) options.unk_id = id;
    }
    if (!options.unk_id)
      field.member("unk_token").fail("\"" + unk_token + "\" is not in model.vocab");
  }
  BpeModel bpe(vocab, merges, options, field.member("merges"));
  if (byte_level) {
    check_every_byte_encodes(bpe, field.member("vocab"));
  } else {
    check_every_character_encodes(bpe, field);
  }
  return bpe;
}

std::vector<AddedToken> parse_added_tokens(const json* value, const JsonField& field) {
  std::vector<AddedToken> tokens;
  if (value == nullptr) return tokens;
  if (!value->is_array()) field.fail("expected a list, found " + json_type_name(*value));
  for (size_t i = 0; i < value->size(); ++i) {
    const json& entry = (*value)[i];
    JsonField entry_field = field.element(i);
    AddedToken token;
    token.id = require_token_id(require_member(entry, entry_field, "id"), entry_field.member("id"));
    token.content = require_string(require_member(entry, entry_field, "content"),
                                   entry_field.member("content"));
    token.special = optional_bool(entry, entry_field, "special", false);
    // HF's default: special tokens match the raw text, others the normalized.
    token.normalized = optional_bool(entry, entry_field, "normalized", !token.special);
    token.lstrip = optional_bool(entry, entry_field, "lstrip", false);
    token.rstrip = optional_bool(entry, entry_field, "rstrip", false);
    token.single_word = optional_bool(entry, entry_field, "single_word", false);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// An added token's id must be its own: not a vocab entry's that is another
// token, not another added token's, and its content not a vocab entry under
// another id. Hugging Face tokenizers does not take such an id as written
// (it gives the token a free id, or the vocab's, with a warning), so taking
// it gave two tokens one id: "d" decoded as "<pad>".
void check_added_token_ids(const std::vector<AddedToken>& tokens, const BpeModel& model,
                           const JsonField& field) {
  std::map<uint32_t, size_t> added_at;
  std::map<std::string, size_t> content_at;
  // Hugging Face tokenizers numbers a token the vocab lacks itself: one past
  // the largest id added so far or the vocab's last (its count less one),
  // whatever the file says (a file's 430 after a vocab of 425 is 426 there).
  // Checked where the vocab's ids run 0..count-1, as every tokenizer it
  // saves: with holes in them, its count-based numbering may fall on a vocab
  // id, and the file's ids are taken as written.
  int64_t vocab_count = 0;
  for (size_t id = 0; id < model.id_limit(); ++id)
    vocab_count += model.token_string(static_cast<uint32_t>(id)) != nullptr ? 1 : 0;
  const bool numbered_by_count = vocab_count == static_cast<int64_t>(model.id_limit());
  int64_t largest_added = -1;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const AddedToken& token = tokens[i];
    const JsonField entry = field.element(i);
    if (const std::string* held = model.token_string(token.id); held && *held != token.content)
      entry.member("id").fail(
          fmt::format("{} is already {} in model.vocab; '{}' needs an id of its own (Hugging Face "
                      "tokenizers gives it another)",
                      token.id, nlohmann::json(*held).dump(), token.content));
    if (const auto vocab_id = model.token_id(token.content); vocab_id && *vocab_id != token.id)
      entry.member("id").fail(fmt::format(
          "{}, but model.vocab has '{}' as {} (Hugging Face tokenizers takes the vocab's id)",
          token.id, token.content, *vocab_id));
    const auto [earlier, fresh] = added_at.emplace(token.id, i);
    if (!fresh && tokens[earlier->second].content != token.content)
      entry.member("id").fail(fmt::format("{} is also added_tokens[{}]'s id, '{}'", token.id,
                                          earlier->second, tokens[earlier->second].content));
    const auto [first, new_content] = content_at.emplace(token.content, i);
    if (!new_content && tokens[first->second].id != token.id)
      entry.member("id").fail(fmt::format(
          "{}, but added_tokens[{}] adds '{}' as {} (Hugging Face tokenizers takes that id)",
          token.id, first->second, token.content, tokens[first->second].id));
    const int64_t numbered = std::max(largest_added, vocab_count - 1) + 1;
    if (numbered_by_count && new_content && !model.token_id(token.content) && token.id != numbered)
      entry.member("id").fail(fmt::format(
          "{}, but Hugging Face tokenizers numbers the tokens the vocab lacks after it and each "
          "other, in order, whatever the file says: '{}' is {} there",
          token.id, token.content, numbered));
    largest_added = std::max<int64_t>(largest_added, token.id);
  }
}

}  // namespace

Tokenizer Tokenizer::from_tokenizer_json(const fs::path& file) {
  json root = parse_json_file(file);
  JsonField top{file.string(), ""};
  if (!root.is_object()) top.fail("expected an object, found " + json_type_name(root));
  // The pre-tokenizer says what the model's units are: with ByteLevel,
  // bytes in its alphabet; without, characters (SentencePiece-style).
  PreTokenizer pre_tokenizer = PreTokenizer::from_json(optional_member(root, top, "pre_tokenizer"),
                                                       top.member("pre_tokenizer"));
  const bool byte_level = pre_tokenizer.byte_level();
  BpeModel model = parse_model(require_member(root, top, "model"), top.member("model"), byte_level);
  Normalizer normalizer =
      Normalizer::from_json(optional_member(root, top, "normalizer"), top.member("normalizer"));
  Decoder decoder =
      Decoder::from_json(optional_member(root, top, "decoder"), top.member("decoder"), byte_level);
  std::vector<AddedToken> added =
      parse_added_tokens(optional_member(root, top, "added_tokens"), top.member("added_tokens"));
  check_added_token_ids(added, model, top.member("added_tokens"));
  Tokenizer tokenizer(std::move(model), std::move(pre_tokenizer), std::move(normalizer),
                      std::move(decoder), std::move(added));
  tokenizer.file_ = file;
  return tokenizer;
}

std::vector<std::pair<std::string, std::string>> read_gpt2_merges(const fs::path& vocab_bpe) {
  std::string text = read_whole_file(vocab_bpe);
  std::vector<std::pair<std::string, std::string>> merges;
  std::istringstream lines(text);
  std::string line;
  for (size_t line_number = 1; std::getline(lines, line); ++line_number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("#version", 0) == 0) continue;
    if (line.empty() && lines.peek() == std::char_traits<char>::eof()) break;
    size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      fail(vocab_bpe.string(), ": line ", line_number,
           ": expected a merge \"left right\", found \"", line, "\"");
    }
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return merges;
}

Tokenizer Tokenizer::from_gpt2_files(const fs::path& encoder_json, const fs::path& vocab_bpe) {
  json encoder = parse_json_file(encoder_json);
  auto vocab = parse_vocab(encoder, JsonField{encoder_json.string(), ""});
  const std::vector<std::pair<std::string, std::string>> merges = read_gpt2_merges(vocab_bpe);
  BpeModel model(vocab, merges, BpeOptions{}, JsonField{vocab_bpe.string(), "merges"});
  check_every_byte_encodes(model, JsonField{encoder_json.string(), ""});

  std::vector<AddedToken> added;
  constexpr std::string_view kEndOfText = "<|endoftext|>";
  for (const auto& [token, id] : vocab) {
    if (token == kEndOfText) {
      AddedToken end_of_text;
      end_of_text.content = token;
      end_of_text.id = id;
      end_of_text.special = true;
      added.push_back(end_of_text);
    }
  }
  Tokenizer tokenizer(std::move(model), PreTokenizer::gpt2(), Normalizer{},
                      Decoder::from_json(nullptr, JsonField{}, true), std::move(added));
  tokenizer.file_ = encoder_json;
  return tokenizer;
}

Tokenizer Tokenizer::from_sentencepiece_model(const fs::path& file) {
  Tokenizer tokenizer(SentencePieceModel::load(file));
  tokenizer.file_ = file;
  return tokenizer;
}

namespace {

// vocab.json + merges.txt are Hugging Face's names for GPT-2's encoder.json
// + vocab.bpe (its slow tokenizer saves them so), read as those when
// tokenizer_config.json names GPT-2's tokenizer class. Other tokenizers
// saved the same way (Qwen2's, RoBERTa's) split text by other rules, which
// only their tokenizer.json carries: read as GPT-2's they would tokenize
// wrongly, without a word. The class, or "" when no file names one.
std::string slow_tokenizer_class(const fs::path& folder) {
  std::error_code error;
  if (!fs::exists(folder / "tokenizer_config.json", error)) return "";
  const json config = parse_json_file(folder / "tokenizer_config.json");
  const auto it = config.find("tokenizer_class");
  return it != config.end() && it->is_string() ? it->get<std::string>() : "";
}

bool has_hf_gpt2_files(const fs::path& folder) {
  std::error_code error;
  return fs::exists(folder / "vocab.json", error) && fs::exists(folder / "merges.txt", error);
}

bool gpt2_class(const std::string& tokenizer_class) {
  return tokenizer_class == "GPT2Tokenizer" || tokenizer_class == "GPT2TokenizerFast";
}

}  // namespace

bool Tokenizer::found_at(const fs::path& path) {
  std::error_code error;
  if (!fs::is_directory(path, error)) return fs::is_regular_file(path, error);
  return fs::exists(path / "tokenizer.json", error) ||
         (fs::exists(path / "encoder.json", error) && fs::exists(path / "vocab.bpe", error)) ||
         fs::exists(path / "tokenizer.model", error) ||
         (has_hf_gpt2_files(path) && gpt2_class(slow_tokenizer_class(path)));
}

Tokenizer Tokenizer::load(const fs::path& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) {
    if (fs::exists(path / "tokenizer.json")) return from_tokenizer_json(path / "tokenizer.json");
    if (fs::exists(path / "encoder.json") && fs::exists(path / "vocab.bpe")) {
      return from_gpt2_files(path / "encoder.json", path / "vocab.bpe");
    }
    if (fs::exists(path / "tokenizer.model"))
      return from_sentencepiece_model(path / "tokenizer.model");
    if (has_hf_gpt2_files(path)) {
      const std::string tokenizer_class = slow_tokenizer_class(path);
      if (gpt2_class(tokenizer_class))
        return from_gpt2_files(path / "vocab.json", path / "merges.txt");
      fail(path.string(), ": the folder holds vocab.json + merges.txt and no tokenizer.json; ",
           tokenizer_class.empty()
               ? "no tokenizer_config.json names their tokenizer_class"
               : "their tokenizer_class is " + tokenizer_class + " (tokenizer_config.json)",
           ", and lazytrain reads these two files only as GPT-2's (GPT2Tokenizer): other "
           "tokenizers split text by rules only their tokenizer.json carries. Write one with "
           "transformers: AutoTokenizer.from_pretrained(FOLDER).save_pretrained(FOLDER)");
    }
    fail(path.string(),
         ": the folder holds no tokenizer.json, encoder.json + vocab.bpe (or vocab.json + "
         "merges.txt of GPT2Tokenizer), or tokenizer.model");
  }
  if (!fs::exists(path, error)) fail(path.string(), ": no such file or folder");
  if (path.extension() == ".model") return from_sentencepiece_model(path);
  return from_tokenizer_json(path);
}

}  // namespace lt::data
