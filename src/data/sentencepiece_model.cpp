#include "data/sentencepiece_model.h"

#include "core/error.h"
#include "core/regular_file.h"

#ifdef LT_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#endif

namespace lt::data {

#ifdef LT_HAVE_SENTENCEPIECE

struct SentencePieceModel::Library {
  sentencepiece::SentencePieceProcessor processor;
};

bool SentencePieceModel::available() {
  return true;
}

std::unique_ptr<SentencePieceModel> SentencePieceModel::load(const std::filesystem::path& file) {
  require_regular_file(file);
  auto library = std::make_unique<Library>();
  const auto status = library->processor.Load(file.string());
  if (!status.ok()) {
    fail(file.string(), ": not a SentencePiece model that libsentencepiece can read (",
         status.ToString(), ")");
  }
  return std::unique_ptr<SentencePieceModel>(
      new SentencePieceModel(std::move(library), file.string()));
}

SentencePieceModel::SentencePieceModel(std::unique_ptr<Library> library, std::string file)
    : library_(std::move(library)), file_(std::move(file)) {
  const auto& processor = library_->processor;
  const int size = processor.GetPieceSize();
  middle_bytes_.resize(static_cast<size_t>(size));
  for (int id = 0; id < size; ++id) {
    std::string& bytes = middle_bytes_[static_cast<size_t>(id)];
    const std::string& piece = processor.IdToPiece(id);
    if (processor.IsControl(id)) continue;
    if (processor.IsByte(id)) {
      // "<0xXX>"
      bytes.push_back(static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
    } else if (processor.IsUnknown(id)) {
      bytes = " \u2047 ";  // SentencePiece's default surface of an unknown piece
    } else {
      for (size_t pos = 0; pos < piece.size();) {
        if (piece.compare(pos, 3, "\u2581") == 0) {
          bytes.push_back(' ');
          pos += 3;
        } else {
          bytes.push_back(piece[pos++]);
        }
      }
    }
  }
}

void SentencePieceModel::encode(std::string_view text, std::vector<uint32_t>& ids) const {
  std::vector<int> pieces;
  const auto status = library_->processor.Encode(text, &pieces);
  if (!status.ok())
    fail(file_, ": SentencePiece could not encode the text (", status.ToString(), ")");
  for (int id : pieces) ids.push_back(static_cast<uint32_t>(id));
}

std::string SentencePieceModel::decode(std::span<const uint32_t> ids,
                                       bool skip_special_tokens) const {
  std::vector<int> pieces;
  pieces.reserve(ids.size());
  for (uint32_t id : ids) {
    if (id >= size()) {
      fail("cannot decode token id ", id, ": no token has it (", file_, " has ", size(),
           " pieces)");
    }
    if (skip_special_tokens && is_special(id)) continue;
    pieces.push_back(static_cast<int>(id));
  }
  std::string text;
  const auto status = library_->processor.Decode(pieces, &text);
  if (!status.ok()) fail(file_, ": SentencePiece could not decode (", status.ToString(), ")");
  return text;
}

bool SentencePieceModel::is_special(uint32_t id) const {
  const int piece = static_cast<int>(id);
  return library_->processor.IsControl(piece) || library_->processor.IsUnknown(piece);
}

std::optional<uint32_t> SentencePieceModel::piece_id(std::string_view piece) const {
  // PieceToId answers the unknown token's id for a piece it lacks.
  const int id = library_->processor.PieceToId(piece);
  if (id < 0 || library_->processor.IdToPiece(id) != piece) return std::nullopt;
  return static_cast<uint32_t>(id);
}

std::optional<std::string> SentencePieceModel::piece(uint32_t id) const {
  if (id >= size()) return std::nullopt;
  return library_->processor.IdToPiece(static_cast<int>(id));
}

#else  // built without libsentencepiece

struct SentencePieceModel::Library {};

bool SentencePieceModel::available() {
  return false;
}

std::unique_ptr<SentencePieceModel> SentencePieceModel::load(const std::filesystem::path& file) {
  fail(file.string(),
       ": a SentencePiece tokenizer.model, but lazytrain was built without libsentencepiece "
       "(install libsentencepiece-dev and rebuild, or give the folder a tokenizer.json)");
}

SentencePieceModel::SentencePieceModel(std::unique_ptr<Library> library, std::string file)
    : library_(std::move(library)), file_(std::move(file)) {}
void SentencePieceModel::encode(std::string_view, std::vector<uint32_t>&) const {}
std::string SentencePieceModel::decode(std::span<const uint32_t>, bool) const {
  return "";
}
bool SentencePieceModel::is_special(uint32_t) const {
  return false;
}
std::optional<uint32_t> SentencePieceModel::piece_id(std::string_view) const {
  return std::nullopt;
}
std::optional<std::string> SentencePieceModel::piece(uint32_t) const {
  return std::nullopt;
}

#endif

SentencePieceModel::~SentencePieceModel() = default;

}  // namespace lt::data
