#include "io/safetensors.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json_brief.h"
#include "core/regular_file.h"
#include "io/atomic_file.h"

namespace lt::io {

namespace {

using nlohmann::json;

// Tensor bytes are copied between memory and file as they are; the format
// is little-endian, and so is every host lazytrain targets.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

// The reference implementation refuses headers above 100 MB
// (MAX_HEADER_SIZE); a garbage length field must not make us allocate more.
// The largest real headers (thousands of tensors) are a few hundred KB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Holes are reported one by one up to this many, then counted, so a hostile
// file cannot flood the log.
constexpr size_t kMaxHoleWarnings = 8;

struct DTypeInfo {
  const char* name;
  uint32_t bits;  // per element; sub-byte types pack several per byte
  std::optional<DType> dtype;
};

// Every dtype the format defines. Those lazytrain cannot hold still parse
// (their byte counts are checked) so that a file with, say, one U16 tensor
// can be read for its other tensors; asking for the U16 tensor is refused.
constexpr DTypeInfo kDTypes[] = {
    {"BOOL", 8, DType::U8},    {"U8", 8, DType::U8},    {"I8", 8, DType::I8},
    {"F8_E5M2", 8, {}},        {"F8_E4M3", 8, {}},      {"F8_E8M0", 8, {}},
    {"I16", 16, {}},           {"U16", 16, {}},         {"F16", 16, DType::F16},
    {"BF16", 16, DType::BF16}, {"I32", 32, DType::I32}, {"U32", 32, {}},
    {"F32", 32, DType::F32},   {"F64", 64, DType::F64}, {"I64", 64, DType::I64},
    {"U64", 64, {}},           {"C64", 64, {}},         {"F4", 4, {}},
    {"F6_E2M3", 6, {}},        {"F6_E3M2", 6, {}},
};

const DTypeInfo* find_dtype(const std::string& name) {
  for (const auto& info : kDTypes) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

template <typename... Args>
[[noreturn]] void bad_file(const std::string& file, const Args&... args) {
  fail("safetensors file '", file, "': ", args...);
}

template <typename... Args>
[[noreturn]] void bad_field(const std::string& file, const std::string& tensor, const char* field,
                            const Args&... args) {
  fail("safetensors file '", file, "': tensor '", tensor, "': field '", field, "': ", args...);
}

// A JSON number that is a non-negative integer (not 2.0, not -1, not 1e3).
std::optional<uint64_t> as_count(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  return std::nullopt;
}

std::string json_kind(const json& v) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return "negative integer " + v.dump();
  if (v.is_number_float()) return "non-integer number " + v.dump();
  return std::string(v.type_name());
}

// nlohmann parses to a DOM; this callback keeps it shallow and rejects
// duplicate keys. A valid header nests three levels (header object, entry,
// shape array), so anything deeper is discarded unbuilt, which bounds the
// memory a hostile header can cost. Duplicate keys would otherwise silently
// keep the last value.
struct HeaderParseGuard {
  bool too_deep = false;
  std::string duplicate;  // first duplicated key, with its context
  std::set<std::string> top_keys;
  std::set<std::string> entry_keys;
  std::string current_entry;

  bool operator()(int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth >= 3) {
          too_deep = true;
          return false;
        }
        if (depth == 1) entry_keys.clear();
        return true;
      case json::parse_event_t::key:
        if (!duplicate.empty() || !parsed.is_string()) return true;
        if (depth == 1) {
          current_entry = parsed.get<std::string>();
          if (!top_keys.insert(current_entry).second) duplicate = "'" + current_entry + "'";
        } else if (depth == 2) {
          const auto& k = parsed.get_ref<const std::string&>();
          if (!entry_keys.insert(k).second) {
            duplicate = "'" + k + "' inside '" + current_entry + "'";
          }
        }
        return true;
      default:
        return true;
    }
  }
};

SafetensorsEntry parse_entry(const std::string& file, const std::string& name, const json& v,
                             uint64_t data_bytes) {
  if (!v.is_object()) {
    fail("safetensors file '", file, "': tensor '", name, "': entry is a ", v.type_name(),
         ", expected an object with dtype, shape and data_offsets");
  }
  SafetensorsEntry e;
  e.name = name;

  auto dtype_it = v.find("dtype");
  if (dtype_it == v.end()) bad_field(file, name, "dtype", "missing");
  if (!dtype_it->is_string())
    bad_field(file, name, "dtype", "expected a string, got ", dtype_it->type_name());
  e.dtype_name = dtype_it->get<std::string>();
  const DTypeInfo* info = find_dtype(e.dtype_name);
  if (!info) bad_field(file, name, "dtype", "unknown dtype '", e.dtype_name, "'");
  e.dtype = info->dtype;

  auto shape_it = v.find("shape");
  if (shape_it == v.end()) bad_field(file, name, "shape", "missing");
  if (!shape_it->is_array())
    bad_field(file, name, "shape", "expected an array, got ", shape_it->type_name());
  uint64_t numel = 1;
  bool overflow = false;
  for (size_t d = 0; d < shape_it->size(); ++d) {
    const json& dim = (*shape_it)[d];
    auto n = as_count(dim);
    if (!n)
      bad_field(file, name, "shape", "dimension ", d, " is a ", json_kind(dim),
                ", expected a non-negative integer");
    if (*n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      bad_field(file, name, "shape", "dimension ", d, " = ", *n, " is too large");
    }
    e.shape.push_back(static_cast<int64_t>(*n));
    overflow = overflow || __builtin_mul_overflow(numel, *n, &numel);
  }
  // Any zero dimension makes the product 0 even if an earlier step overflowed.
  if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) {
    numel = 0;
    overflow = false;
  }

  auto off_it = v.find("data_offsets");
  if (off_it == v.end()) bad_field(file, name, "data_offsets", "missing");
  if (!off_it->is_array() || off_it->size() != 2) {
    bad_field(file, name, "data_offsets", "expected [begin, end], got ", brief_json(*off_it));
  }
  auto begin = as_count((*off_it)[0]);
  auto end = as_count((*off_it)[1]);
  if (!begin || !end) {
    bad_field(file, name, "data_offsets", "expected two non-negative integers, got ",
              brief_json(*off_it));
  }
  if (*begin > *end) bad_field(file, name, "data_offsets", "begin ", *begin, " > end ", *end);
  if (*end > data_bytes) {
    // The usual cause is a file that stops early, which the offsets alone
    // did not say to someone who has never read the format.
    bad_field(file, name, "data_offsets", "end ", *end, " lies beyond the data region of ",
              data_bytes, " bytes: the file is truncated (at least ", *end - data_bytes,
              " bytes missing, as an interrupted download, copy or save leaves it)");
  }
  e.begin = *begin;
  e.end = *end;

  uint64_t bits = 0;
  if (overflow || __builtin_mul_overflow(numel, uint64_t{info->bits}, &bits)) {
    bad_field(file, name, "shape", shape_str(e.shape), " has more elements than any file can hold");
  }
  if (bits % 8 != 0) {
    bad_field(file, name, "shape", shape_str(e.shape), " of ", e.dtype_name,
              " does not fill whole bytes");
  }
  if (bits / 8 != e.nbytes()) {
    bad_field(file, name, "data_offsets", "[", e.begin, ", ", e.end, "] holds ", e.nbytes(),
              " bytes, but shape ", shape_str(e.shape), " of ", e.dtype_name, " needs ", bits / 8);
  }
  return e;
}

void check_layout(const std::string& file, SafetensorsHeader& h) {
  std::sort(h.entries.begin(), h.entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;  // end of the furthest non-empty tensor so far
  const SafetensorsEntry* last = nullptr;
  size_t holes = 0;
  for (const auto& e : h.entries) {
    if (e.nbytes() == 0) continue;  // empty tensors occupy no bytes, overlap nothing
    if (e.begin < covered) {
      bad_field(file, e.name, "data_offsets", "[", e.begin, ", ", e.end, "] overlaps tensor '",
                last->name, "' at [", last->begin, ", ", last->end, "]");
    }
    if (e.begin > covered && ++holes <= kMaxHoleWarnings) {
      h.warnings.push_back(detail::concat("safetensors file '", file, "': ", e.begin - covered,
                                          " unused bytes before tensor '", e.name, "'"));
    }
    covered = e.end;
    last = &e;
  }
  if (holes > kMaxHoleWarnings) {
    h.warnings.push_back(
        detail::concat("safetensors file '", file, "': ", holes, " gaps between tensors in all"));
  }
  if (covered < h.data_bytes) {
    h.warnings.push_back(detail::concat("safetensors file '", file, "': ", h.data_bytes - covered,
                                        " unused bytes after the last tensor"));
  }
}

}  // namespace

std::optional<DType> dtype_from_safetensors(const std::string& name) {
  const DTypeInfo* info = find_dtype(name);
  return info ? info->dtype : std::nullopt;
}

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::F64:
      return "F64";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::I32:
      return "I32";
    case DType::I64:
      return "I64";
    case DType::I8:
      return "I8";
    case DType::U8:
      return "U8";
  }
  fail("dtype ", static_cast<int>(dtype), " has no safetensors name");
}

SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t size,
                                           const std::string& file_label) {
  const std::string& file = file_label;
  if (size < 8) {
    bad_file(file, "file is ", size, " bytes, too short for the 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];  // little-endian, on any host
  if (n > size - 8) {
    bad_file(file, "header length ", n, " exceeds the ", size - 8,
             " bytes after the length field (file truncated or not safetensors)");
  }
  if (n > kMaxHeaderBytes) {
    bad_file(file, "header length ", n, " exceeds the format's limit of ", kMaxHeaderBytes);
  }
  SafetensorsHeader h;
  h.header_bytes = n;
  h.data_start = 8 + n;
  h.data_bytes = size - h.data_start;
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  if (n == 0 || text[0] != '{') {
    bad_file(file, "header must be a JSON object starting with '{'");
  }

  // JSON text never holds a raw NUL (strings escape control characters),
  // and the parser would take one for the end of input, accepting whatever
  // follows it.
  if (std::memchr(text, '\0', n) != nullptr) {
    bad_file(file, "header is not valid JSON: it contains a NUL byte (padding must be spaces)");
  }
  HeaderParseGuard guard;
  json root;
  try {
    root = json::parse(text, text + n, std::ref(guard));
  } catch (const json::exception& err) {
    bad_file(file, "header is not valid JSON: ", err.what());
  }
  if (guard.too_deep) bad_file(file, "header nests deeper than a safetensors header can");
  if (!guard.duplicate.empty()) bad_file(file, "header repeats the key ", guard.duplicate);
  if (!root.is_object()) bad_file(file, "header is a ", root.type_name(), ", expected an object");

  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;
      if (!value.is_object()) {
        bad_file(file, "field '__metadata__': expected an object of strings, got ",
                 value.type_name());
      }
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          bad_file(file, "field '__metadata__': value of '", mk, "' is a ", mv.type_name(),
                   ", expected a string");
        }
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    h.entries.push_back(parse_entry(file, key, value, h.data_bytes));
  }
  check_layout(file, h);
  return h;
}

// ---- reading ----

struct SafetensorsFile::Mapping {
  void* base = nullptr;
  size_t size = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (base) ::munmap(base, size);
  }
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(base); }
};

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : path_(path), mapping_(std::make_shared<Mapping>()) {
  const std::string file = path.string();
  require_regular_file(path);
  // O_NONBLOCK: should the path become a FIFO after the check above, open
  // returns at once (and fstat below refuses it) instead of waiting for a
  // writer. On a regular file the flag changes nothing.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) bad_file(file, "cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    bad_file(file, "not a regular file");
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size > 0) {
    // Private and writable: pages are copy-on-write, so a caller that writes
    // into a loaded tensor changes its own memory, never the file, and does
    // not fault on read-only pages.
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      bad_file(file, "mmap of ", size, " bytes failed: ", std::strerror(err));
    }
    mapping_->base = p;
    mapping_->size = size;
  }
  ::close(fd);  // the mapping holds its own reference to the file

  static const uint8_t kEmpty[1] = {0};
  header_ = parse_safetensors_header(size ? mapping_->bytes() : kEmpty, size, file);
  for (const auto& w : header_.warnings) spdlog::warn("{}", w);
  for (size_t i = 0; i < header_.entries.size(); ++i) index_.emplace(header_.entries[i].name, i);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(header_.entries.size());
  for (const auto& e : header_.entries) out.push_back(e.name);
  return out;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) bad_file(path_.string(), "has no tensor '", name, "'");
  return header_.entries[it->second];
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  if (!e.dtype) {
    bad_field(path_.string(), name, "dtype", e.dtype_name,
              " is not supported (lazytrain reads F32, F64, BF16, F16, I64, I32, I8, U8, BOOL)");
  }
  const DType dtype = *e.dtype;
  uint8_t* p = static_cast<uint8_t*>(mapping_->base) + header_.data_start + e.begin;
  Tensor t;
  if (e.nbytes() > 0 && reinterpret_cast<uintptr_t>(p) % dtype_size(dtype) != 0) {
    t = Tensor::empty(e.shape, dtype);
    std::memcpy(t.data_ptr(), p, e.nbytes());
  } else {
    // Each tensor's Storage holds the mapping; the file stays mapped until
    // the last tensor from it is gone.
    auto storage = std::make_shared<Storage>(p, e.nbytes(), Device::cpu(),
                                             [mapping = mapping_]() mutable { mapping.reset(); });
    t = Tensor::from_storage(std::move(storage), 0, e.shape, contiguous_strides(e.shape), dtype);
  }
  t.set_name(name);
  return t;
}

NamedTensors SafetensorsFile::tensors() const {
  NamedTensors out;
  out.reserve(header_.entries.size());
  for (const auto& e : header_.entries) out.emplace_back(e.name, tensor(e.name));
  return out;
}

std::map<std::string, Tensor> read_safetensors(const std::filesystem::path& path) {
  SafetensorsFile file(path);
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : file.tensors()) out.emplace(name, std::move(t));
  return out;
}

// ---- writing ----

std::vector<TensorSpec> specs_of(const NamedTensors& tensors) {
  std::vector<TensorSpec> out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    LT_CHECK(t.defined(), "tensor '", name, "' is undefined");
    out.push_back({name, t.dtype(), t.shape()});
  }
  return out;
}

std::string make_safetensors_header(const NamedTensors& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  return make_safetensors_header(specs_of(tensors), metadata);
}

std::string make_safetensors_header(const std::vector<TensorSpec>& tensors,
                                    const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps our order: metadata first, then tensors as given,
  // which is also the order of their bytes.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    LT_CHECK(t.name != "__metadata__", "a tensor cannot be named '__metadata__'");
    LT_CHECK(seen.insert(t.name).second, "tensor name '", t.name, "' appears twice");
    const uint64_t nbytes = t.nbytes();
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  // Spaces after the JSON are whitespace to a JSON parser and make
  // 8 + N a multiple of 8, so every tensor whose offset is a multiple of its
  // element size lands aligned in memory.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

std::string safetensors_length_prefix(const std::string& header) {
  std::string len(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i));
  return len;
}

void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string header = make_safetensors_header(tensors, metadata);
  AtomicFileWriter out(path);
  out.write(safetensors_length_prefix(header));
  out.write(header);
  for (const auto& [name, t] : tensors) {
    // One tensor at a time, so a model on the GPU never needs a second full
    // copy in host memory.
    Tensor c = t.detach().contiguous().to(Device::cpu());
    if (c.nbytes() > 0) out.write(c.data_ptr(), c.nbytes());
  }
  out.commit();
}

}  // namespace lt::io
