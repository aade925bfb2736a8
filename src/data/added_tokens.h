#pragma once
// Added tokens (special tokens like <|im_start|>, and tokens added after
// training) are cut out of the text before normalization and BPE, as
// Hugging Face `tokenizers` does: at each position the longest token that
// starts there wins (leftmost-longest), and what lies between is plain text.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lt::data {

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false;
  // Matched against the normalized text (else the raw text).
  bool normalized = false;
  // Also swallow the whitespace to the left / right of the match.
  bool lstrip = false;
  bool rstrip = false;
  // Only match when not inside a word.
  bool single_word = false;
};

// A stretch of text: an added token (`token_id` >= 0) or plain text (-1).
struct TextSegment {
  std::string_view text;
  int64_t token_id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `tokens` must outlive the matcher. `patterns[i]` is what is searched for
  // tokens[i] (its content, or its normalized content).
  AddedTokenMatcher(std::vector<const AddedToken*> tokens, std::vector<std::string> patterns);

  bool empty() const { return tokens_.empty(); }

  // Appends the segments of `text`, which together cover it, in order.
  void split(std::string_view text, std::vector<TextSegment>& segments) const;

 private:
  struct TrieNode {
    // Children sorted by byte; a token list this small rarely has more
    // than a few per node.
    std::vector<std::pair<unsigned char, uint32_t>> children;
    int32_t token = -1;  // index into tokens_ of the token ending here
  };

  // The longest token that starts at text[pos]: (index, length), or index -1.
  std::pair<int32_t, size_t> longest_match_at(std::string_view text, size_t pos) const;

  std::vector<const AddedToken*> tokens_;
  std::vector<TrieNode> trie_;
  bool starts_token_[256] = {};
};

}  // namespace lt::data
