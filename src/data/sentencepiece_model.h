#pragma once
// A SentencePiece tokenizer.model (SentencePiece's own protobuf format),
// for model folders that ship no tokenizer.json. It is read and run by the
// SentencePiece library itself (Debian's libsentencepiece), so ids and text
// are what `sentencepiece` gives: encode without BOS/EOS, decode dropping
// control tokens (<s>, </s>) and the first piece's leading space.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lt::data {

class SentencePieceModel {
 public:
  // False when lazytrain was built without libsentencepiece; load() then
  // fails saying so.
  static bool available();
  // Errors (missing file, not a model) are lt::Error naming the file.
  static std::unique_ptr<SentencePieceModel> load(const std::filesystem::path& file);

  ~SentencePieceModel();

  void encode(std::string_view text, std::vector<uint32_t>& ids) const;
  // The text of `ids`; `skip_special_tokens` also drops the unknown token
  // (control tokens decode to nothing either way). An id past the pieces is
  // an lt::Error.
  std::string decode(std::span<const uint32_t> ids, bool skip_special_tokens) const;
  // The bytes `id` adds in the middle of a text: its piece with "▁" as a
  // space, a byte piece's byte, nothing for a control token.
  const std::string& middle_bytes(uint32_t id) const { return middle_bytes_[id]; }
  bool is_special(uint32_t id) const;

  size_t size() const { return middle_bytes_.size(); }
  std::optional<uint32_t> piece_id(std::string_view piece) const;
  std::optional<std::string> piece(uint32_t id) const;

 private:
  struct Library;
  SentencePieceModel(std::unique_ptr<Library> library, std::string file);

  std::unique_ptr<Library> library_;
  std::string file_;
  std::vector<std::string> middle_bytes_;
};

}  // namespace lt::data
