#include "data/decoder.h"

#include "data/byte_level.h"
#include "data/normalizer.h"
#include "data/unicode.h"

namespace lt::data {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a "<0xXX>" token, or -1. As HF: exactly six bytes, and the two
// between "<0x" and ">" parsed as Rust's u8::from_str_radix(_, 16) parses
// them, which takes either case and also a '+' sign ("<0x+A>" is 0x0A).
int fallback_byte(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return -1;
  const int low = hex_digit(token[4]);
  if (low < 0) return -1;
  if (token[3] == '+') return low;
  const int high = hex_digit(token[3]);
  return high < 0 ? -1 : high * 16 + low;
}

// HF's ByteLevel decoder on one token: its characters' bytes, or the token
// itself when a character is outside the byte-level alphabet.
std::string byte_level_bytes(const std::string& token) {
  std::optional<std::string> bytes = byte_level_decode(token);
  return bytes ? *bytes : token;
}

// The token without up to `start` leading and `stop` trailing copies of the
// one-character `strip`. HF indexes past the start of a token shorter than
// `stop` (and panics); here the cuts stop at the token's ends.
std::string strip_token(const std::string& token, std::string_view strip, size_t start,
                        size_t stop) {
  size_t begin = 0;
  for (size_t i = 0; i < start && token.compare(begin, strip.size(), strip) == 0; ++i)
    begin += strip.size();
  size_t end = token.size();
  for (size_t i = 0; i < stop && end >= begin + strip.size() &&
                     token.compare(end - strip.size(), strip.size(), strip) == 0;
       ++i)
    end -= strip.size();
  return token.substr(begin, end - begin);
}

// HF's ByteFallback: each run of byte tokens becomes one token of its bytes
// when they are UTF-8, else one U+FFFD per byte. `raw` keeps the bytes.
std::vector<std::string> fuse_byte_runs(const std::vector<std::string>& tokens, bool raw) {
  std::vector<std::string> out;
  std::string run;
  auto flush = [&] {
    if (run.empty()) return;
    if (raw || is_valid_utf8(run)) {
      out.push_back(run);
    } else {
      for (size_t i = 0; i < run.size(); ++i) out.emplace_back("\uFFFD");
    }
    run.clear();
  };
  for (const std::string& token : tokens) {
    const int byte = fallback_byte(token);
    if (byte >= 0) {
      run.push_back(static_cast<char>(byte));
    } else {
      flush();
      out.push_back(token);
    }
  }
  flush();
  return out;
}

std::string joined(const std::vector<std::string>& tokens, std::string_view separator) {
  std::string text;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) text += separator;
    text += tokens[i];
  }
  return text;
}

}  // namespace

void Decoder::parse_step(const nlohmann::json& value, const JsonField& field,
                         std::vector<Step>& steps) {
  const std::string type =
      require_string(require_member(value, field, "type"), field.member("type"));
  Step step{};
  if (type == "ByteLevel") {
    step.kind = Step::Kind::kByteLevel;
  } else if (type == "Metaspace") {
    step.kind = Step::Kind::kMetaspace;
    step.metaspace = Metaspace::from_json(value, field);
  } else if (type == "Replace") {
    step.kind = Step::Kind::kReplace;
    std::tie(step.pattern, step.content) = parse_replace(value, field);
  } else if (type == "ByteFallback") {
    step.kind = Step::Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Step::Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Step::Kind::kStrip;
    step.pattern = require_one_character(value, field, "content");
    for (auto [key, target] : {std::pair{"start", &step.start}, std::pair{"stop", &step.stop}}) {
      const nlohmann::json& count = require_member(value, field, key);
      if (!count.is_number_unsigned()) {
        field.member(key).fail("expected a non-negative integer, found " + brief_json(count));
      }
      *target = count.get<size_t>();
    }
  } else if (type == "Sequence") {
    const nlohmann::json& list = require_member(value, field, "decoders");
    JsonField list_field = field.member("decoders");
    if (!list.is_array()) list_field.fail("expected a list, found " + json_type_name(list));
    for (size_t i = 0; i < list.size(); ++i) parse_step(list[i], list_field.element(i), steps);
    return;
  } else {
    field.member("type").fail(
        "unsupported decoder \"" + type +
        "\"; supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence, "
        "or null");
  }
  steps.push_back(std::move(step));
}

Decoder Decoder::from_json(const nlohmann::json* value, const JsonField& field, bool byte_level) {
  Decoder decoder;
  if (value != nullptr) {
    parse_step(*value, field, decoder.steps_);
  } else if (byte_level) {
    decoder.steps_.push_back(Step{Step::Kind::kByteLevel, "", "", {}, 0, 0});
  } else {
    decoder.join_with_spaces_ = true;
  }
  return decoder;
}

bool Decoder::is_byte_level() const {
  return steps_.size() == 1 && steps_[0].kind == Step::Kind::kByteLevel;
}

std::vector<std::string> Decoder::run(std::vector<std::string> tokens, Mode mode) const {
  const bool middle = mode == Mode::kMiddle;
  // Once tokens are joined, Strip cuts the text's ends, which a token in the
  // middle does not touch.
  bool fused = false;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kByteLevel: {
        std::string bytes;
        for (const std::string& token : tokens) bytes += byte_level_bytes(token);
        tokens.assign(1, middle || is_valid_utf8(bytes) ? bytes : utf8_lossy(bytes));
        fused = true;
        break;
      }
      case Step::Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i)
          tokens[i] = step.metaspace.decode_token(tokens[i], i == 0 && !middle);
        break;
      case Step::Kind::kReplace:
        for (std::string& token : tokens) {
          std::string replaced;
          append_replaced(replaced, token, step.pattern, step.content);
          token.swap(replaced);
        }
        break;
      case Step::Kind::kByteFallback:
        tokens = fuse_byte_runs(tokens, middle);
        break;
      case Step::Kind::kFuse:
        tokens.assign(1, joined(tokens, ""));
        fused = true;
        break;
      case Step::Kind::kStrip:
        if (middle && fused) break;
        for (std::string& token : tokens)
          token = strip_token(token, step.pattern, step.start, step.stop);
        break;
    }
  }
  return tokens;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (join_with_spaces_) return joined(tokens, " ");
  return joined(run(std::move(tokens), Mode::kExact), "");
}

std::string Decoder::middle_bytes(std::string_view token) const {
  if (join_with_spaces_) return " " + std::string(token);  // the separator before it
  return joined(run({std::string(token)}, Mode::kMiddle), "");
}

}  // namespace lt::data
