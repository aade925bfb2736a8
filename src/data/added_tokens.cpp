#include "data/added_tokens.h"

#include <algorithm>

#include "data/unicode.h"

namespace lt::data {

namespace {

// Start of the last code point before `end`.
size_t previous_char_start(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80 && end - start < 4)
    --start;
  return start;
}

bool ends_with_word(std::string_view text, size_t end) {
  if (end == 0) return false;
  size_t start = previous_char_start(text, end);
  DecodedChar ch = decode_utf8(text, start);
  return start + ch.length == end && is_word_char(ch.code_point);
}

bool starts_with_word(std::string_view text, size_t start) {
  if (start >= text.size()) return false;
  return is_word_char(decode_utf8(text, start).code_point);
}

bool is_space(char32_t cp) {
  return char_class(cp) == CharClass::kSpace;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<const AddedToken*> tokens,
                                     std::vector<std::string> patterns)
    : tokens_(std::move(tokens)) {
  trie_.emplace_back();
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& pattern = patterns[i];
    if (pattern.empty()) continue;
    starts_token_[static_cast<unsigned char>(pattern[0])] = true;
    uint32_t node = 0;
    for (char c : pattern) {
      auto byte = static_cast<unsigned char>(c);
      auto& children = trie_[node].children;
      auto it = std::lower_bound(children.begin(), children.end(), std::pair{byte, uint32_t{0}},
                                 [](const auto& a, const auto& b) { return a.first < b.first; });
      if (it != children.end() && it->first == byte) {
        node = it->second;
      } else {
        auto child = static_cast<uint32_t>(trie_.size());
        children.insert(it, {byte, child});
        trie_.emplace_back();
        node = child;
      }
    }
    // The first token with a given content wins, as HF's vocabulary keeps
    // one token per content.
    if (trie_[node].token < 0) trie_[node].token = static_cast<int32_t>(i);
  }
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_match_at(std::string_view text,
                                                               size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  uint32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    const auto& children = trie_[node].children;
    auto it = std::lower_bound(children.begin(), children.end(), std::pair{byte, uint32_t{0}},
                               [](const auto& a, const auto& b) { return a.first < b.first; });
    if (it == children.end() || it->first != byte) break;
    node = it->second;
    if (trie_[node].token >= 0) best = {trie_[node].token, i + 1 - pos};
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<TextSegment>& segments) const {
  size_t plain_start = 0;  // start of the plain text not yet emitted
  for (size_t pos = 0; pos < text.size();) {
    if (!starts_token_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    auto [index, length] = longest_match_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = *tokens_[index];
    size_t start = pos;
    size_t stop = pos + length;
    // HF finds the tokens in the raw text and strips around them after: the
    // next search starts at this match's own end, so a token that starts
    // in the whitespace an rstrip took is still emitted, that text counted
    // twice ("<R> x" with " x" added: <R>, " x").
    pos = stop;
    if (token.single_word && (ends_with_word(text, start) || starts_with_word(text, stop)))
      continue;
    if (token.lstrip) {
      while (start > plain_start) {
        size_t previous = previous_char_start(text, start);
        DecodedChar ch = decode_utf8(text, previous);
        if (previous + ch.length != start || !is_space(ch.code_point)) break;
        start = previous;
      }
      start = std::max(start, plain_start);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        DecodedChar ch = decode_utf8(text, stop);
        if (!is_space(ch.code_point)) break;
        stop += ch.length;
      }
    }
    if (plain_start < start)
      segments.push_back({text.substr(plain_start, start - plain_start), -1});
    start = std::min(start, stop);  // an lstrip's start past an overlapping match's end
    segments.push_back({text.substr(start, stop - start), token.id});
    plain_start = stop;  // back before an earlier rstrip's end when this match overlapped it
  }
  if (plain_start < text.size()) segments.push_back({text.substr(plain_start), -1});
}

}  // namespace lt::data
