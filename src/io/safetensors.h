#pragma once
// safetensors files (https://github.com/huggingface/safetensors):
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header][data region]
//
// The header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]}, offsets in bytes relative to the start of the data region;
// an optional "__metadata__" entry maps strings to strings.
//
// Reading maps the file (mmap) and hands out tensors that are views of the
// mapping: no copy, and the mapping stays alive while any tensor uses it.
// Every field is validated before any tensor byte is touched, so a corrupt or
// hostile file gives an lt::Error naming the file, the tensor and the field,
// never an out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace lt::io {

// The writer's and the reader's view of a list of tensors: order matters
// (the writer lays them out in this order).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// One tensor as the header describes it.
struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;      // as spelled in the file: "F32", "BOOL", ...
  std::optional<DType> dtype;  // empty when lazytrain cannot hold the type (U16, F8_E4M3, ...)
  Shape shape;
  uint64_t begin = 0;  // bytes, relative to the data region
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;              // N: the JSON text, padding included
  uint64_t data_start = 0;                // 8 + N: where the data region begins in the file
  uint64_t data_bytes = 0;                // file size - data_start
  std::vector<SafetensorsEntry> entries;  // sorted by begin offset (file order)
  std::map<std::string, std::string> metadata;
  // Legal but unusual layouts (gaps between tensors, trailing bytes). The
  // reference implementation refuses these; we read them and say so.
  std::vector<std::string> warnings;
};

// Parses and validates the header of a safetensors file held in `bytes`
// (`size` = the whole file's size; only the first 8 + N bytes are read).
// `file_label` names the file in error messages. Throws lt::Error.
SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t size,
                                           const std::string& file_label);

// Maps "F32" -> F32 ... and "BOOL" -> U8 (one byte, 0 or 1). Empty for a
// dtype this build cannot hold.
std::optional<DType> dtype_from_safetensors(const std::string& name);
const char* safetensors_dtype_name(DType dtype);

// A safetensors file opened for reading. Copies share the mapping.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  std::vector<std::string> names() const;  // file order
  bool contains(const std::string& name) const { return index_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;

  // A CPU tensor viewing the mapped bytes. The mapping is private
  // copy-on-write, so writing into the tensor never changes the file. A
  // tensor whose bytes are not aligned to its element size (legal in the
  // format, but not addressable as T*) is copied instead.
  Tensor tensor(const std::string& name) const;
  NamedTensors tensors() const;  // all, in file order

 private:
  struct Mapping;
  std::filesystem::path path_;
  std::shared_ptr<Mapping> mapping_;
  SafetensorsHeader header_;
  std::unordered_map<std::string, size_t> index_;  // name -> entries position
};

// Convenience: every tensor of a file, by name.
std::map<std::string, Tensor> read_safetensors(const std::filesystem::path& path);

// Writes `tensors` (any device, any strides; copied to CPU contiguous one at
// a time) in the given order, packed without gaps, with `metadata` as
// "__metadata__" when non-empty. Atomic: temp file, fsync, rename.
// Tensor names must be unique and not "__metadata__".
void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A tensor as a file's header describes it, before its bytes exist.
struct TensorSpec {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t nbytes() const { return static_cast<uint64_t>(numel(shape)) * dtype_size(dtype); }
};
std::vector<TensorSpec> specs_of(const NamedTensors& tensors);

// The JSON header exactly as write_safetensors lays it out, padded with
// spaces to a multiple of 8 bytes so the data region starts 8-aligned.
std::string make_safetensors_header(const NamedTensors& tensors,
                                    const std::map<std::string, std::string>& metadata);
std::string make_safetensors_header(const std::vector<TensorSpec>& tensors,
                                    const std::map<std::string, std::string>& metadata);
// The header's first 8 bytes: its length, little-endian.
std::string safetensors_length_prefix(const std::string& header);

}  // namespace lt::io
