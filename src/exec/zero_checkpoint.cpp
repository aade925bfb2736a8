#include "exec/zero_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "core/error.h"
#include "io/safetensors.h"

namespace lt::exec {

namespace fs = std::filesystem;

namespace {

Tensor i64_scalar(int64_t value) {
  Tensor t = Tensor::empty({}, DType::I64);
  *t.data<int64_t>() = value;
  return t;
}

}  // namespace

std::string zero_shard_file_name(int rank, int world) {
  return "optimizer-shard-" + std::to_string(rank) + "-of-" + std::to_string(world) +
         ".safetensors";
}

void write_zero_shard(const fs::path& path, const ZeroOptimizer& optimizer) {
  const ZeroShards& shards = optimizer.shards();
  io::NamedTensors out;
  for (auto& [name, t] : optimizer.shard_state()) out.emplace_back(name, t);
  for (const ZeroPiece& piece : shards.pieces)
    out.emplace_back(optimizer.masters()[piece.param].first + ".begin", i64_scalar(piece.begin));
  if (optimizer.block_size() > 0)
    out.emplace_back(kZeroBlockSizeKey, i64_scalar(optimizer.block_size()));
  out.emplace_back("zero.rank", i64_scalar(shards.rank));
  out.emplace_back(kZeroWorldSizeKey, i64_scalar(shards.world));
  io::write_safetensors(path, out);
}

struct ZeroShardFiles::Impl {
  struct File {
    fs::path path;
    int fd = -1;
    io::SafetensorsHeader header;
    std::unordered_map<std::string, size_t> index;  // entry name -> position
  };
  struct Piece {
    size_t file = 0;
    int64_t begin = 0;  // its first element
    bool quantized = false;
  };
  fs::path dir;
  nn::NamedParameters params;
  int64_t world = 0;
  std::vector<File> files;
  std::vector<std::vector<Piece>> pieces;  // per parameter, over the files
  std::vector<int64_t> steps;              // per parameter; -1: no piece
  int64_t step = -1, block = 0;

  ~Impl() {
    for (const File& f : files)
      if (f.fd >= 0) ::close(f.fd);
  }

  void read_at(const File& f, void* to, size_t bytes, uint64_t offset) const {
    auto* at = static_cast<char*>(to);
    while (bytes > 0) {
      const ssize_t n = ::pread(f.fd, at, bytes, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      LT_CHECK(n > 0, f.path.string(), ": read failed at byte ", offset, ": ",
               n < 0 ? std::strerror(errno) : "the file ends");
      at += n, bytes -= static_cast<size_t>(n), offset += static_cast<uint64_t>(n);
    }
  }
  const io::SafetensorsEntry* entry(const File& f, const std::string& name) const {
    auto it = f.index.find(name);
    return it == f.index.end() ? nullptr : &f.header.entries[it->second];
  }
  int64_t scalar(const File& f, const std::string& name) const {
    const io::SafetensorsEntry* e = entry(f, name);
    LT_CHECK(e && e->dtype == DType::I64 && e->nbytes() == sizeof(int64_t), f.path.string(), ": '",
             name, "' is missing or not an i64 scalar");
    int64_t value = 0;
    read_at(f, &value, sizeof value, f.header.data_start + e->begin);
    return value;
  }
  void open(int r) {
    File f;
    f.path = dir / zero_shard_file_name(r, static_cast<int>(world));
    LT_CHECK(fs::is_regular_file(f.path), f.path.string(), ": missing (a ZeRO-1 checkpoint of ",
             world, " ranks has one file per rank)");
    f.fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    LT_CHECK(f.fd >= 0, f.path.string(), ": cannot open: ", std::strerror(errno));
    files.push_back(std::move(f));
    File& file = files.back();
    const uint64_t size = fs::file_size(file.path);
    uint64_t header_bytes = 0;
    LT_CHECK(size >= 8, file.path.string(), ": ", size, " bytes, too short for safetensors");
    read_at(file, &header_bytes, 8, 0);  // little-endian, as every host lazytrain runs on
    LT_CHECK(header_bytes <= size - 8, file.path.string(), ": a header of ", header_bytes,
             " bytes in a file of ", size);
    std::vector<uint8_t> head(8 + header_bytes);
    std::memcpy(head.data(), &header_bytes, 8);
    read_at(file, head.data() + 8, header_bytes, 8);
    file.header = io::parse_safetensors_header(head.data(), size, file.path.string());
    for (size_t k = 0; k < file.header.entries.size(); ++k)
      file.index[file.header.entries[k].name] = k;
    LT_CHECK(scalar(file, "zero.rank") == r && scalar(file, kZeroWorldSizeKey) == world,
             file.path.string(), ": not shard ", r, " of ", world);
    if (entry(file, kZeroBlockSizeKey)) block = scalar(file, kZeroBlockSizeKey);
    const int64_t file_step = scalar(file, "step");
    LT_CHECK(step < 0 || step == file_step, file.path.string(), ": step ", file_step,
             ", the other shards' ", step);
    step = file_step;
  }
  void list_pieces(size_t file, const std::unordered_map<std::string, size_t>& index) {
    const File& f = files[file];
    const std::string suffix = ".begin";
    for (const io::SafetensorsEntry& e : f.header.entries) {
      const std::string& key = e.name;
      if (key.size() <= suffix.size() || !key.ends_with(suffix)) continue;
      const std::string name = key.substr(0, key.size() - suffix.size());
      auto it = index.find(name);
      LT_CHECK(it != index.end(), f.path.string(), ": parameter '", name,
               "' is not in the model (a checkpoint of another model?)");
      Piece piece{file, scalar(f, key), entry(f, name + ".exp_avg.codes") != nullptr};
      LT_CHECK(!piece.quantized || (block > 0 && piece.begin % block == 0), f.path.string(), ": '",
               name, "' has 8-bit states from element ", piece.begin, ", not on a block of ",
               block);
      pieces[it->second].push_back(piece);
      steps[it->second] = scalar(f, name + ".step");
    }
  }

  // Units [from, to) of parameter i's whole state `field`, from the pieces
  // that overlap them.
  Tensor part(size_t i, const std::string& field, DType dtype, int64_t from, int64_t to) const {
    const auto& [name, p] = params.at(i);
    const std::string state = name + "." + field;
    const bool scales = field.ends_with(".scales");
    LT_CHECK(!scales || block > 0, dir.string(), ": '", state, "' without a block size");
    const int64_t unit = scales ? block : 1;
    const int64_t whole = (p.numel() + unit - 1) / unit;
    LT_CHECK(0 <= from && from <= to && to <= whole, dir.string(), ": units [", from, ", ", to,
             ") of '", state, "', which has ", whole);
    Tensor out = Tensor::empty({to - from}, dtype);
    const size_t size = dtype_size(dtype);
    int64_t covered = 0;
    for (const Piece& piece : pieces[i]) {
      const File& f = files[piece.file];
      const io::SafetensorsEntry* e = entry(f, state);
      LT_CHECK(e && e->dtype == dtype, f.path.string(), ": '", state, "' is missing or not ",
               dtype_name(dtype));
      const int64_t at = piece.begin / unit, count = static_cast<int64_t>(e->nbytes() / size);
      LT_CHECK(at + count <= whole, f.path.string(), ": '", state, "' of ", count,
               " elements from ", at, " does not fit the whole's ", whole);
      const int64_t begin = std::max(from, at), end = std::min(to, at + count);
      if (begin >= end) continue;
      read_at(f, static_cast<char*>(out.data_ptr()) + static_cast<size_t>(begin - from) * size,
              static_cast<size_t>(end - begin) * size,
              f.header.data_start + e->begin + static_cast<uint64_t>(begin - at) * size);
      covered += end - begin;
    }
    LT_CHECK(covered == to - from, dir.string(), ": the ", world, " optimizer shards cover ",
             covered, " of the ", to - from, " elements [", from, ", ", to, ") of '", state, "'");
    return out;
  }
};

ZeroShardFiles::ZeroShardFiles(const fs::path& dir, const nn::NamedParameters& params,
                               int64_t world)
    : impl_(std::make_unique<Impl>()) {
  LT_CHECK(world >= 1, dir.string(), ": ZeRO-1 world size ", world);
  Impl& m = *impl_;
  m.dir = dir;
  m.params = params;
  m.world = world;
  m.pieces.resize(params.size());
  m.steps.assign(params.size(), -1);
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) index[params[i].first] = i;
  for (int r = 0; r < world; ++r) m.open(r);
  for (size_t f = 0; f < m.files.size(); ++f) m.list_pieces(f, index);
}

ZeroShardFiles::~ZeroShardFiles() = default;

int64_t ZeroShardFiles::block_size() const {
  return impl_->block;
}

bool ZeroShardFiles::quantized(size_t i) const {
  for (const Impl::Piece& piece : impl_->pieces.at(i))
    if (piece.quantized) return true;
  return false;
}

ZeroOptimizer::StateSource ZeroShardFiles::source() const {
  const Impl* m = impl_.get();
  ZeroOptimizer::StateSource s;
  s.part = [m](size_t i, const std::string& field, DType dtype, int64_t from, int64_t to) {
    return m->part(i, field, dtype, from, to);
  };
  s.step = [m](size_t i) {
    if (i >= m->params.size()) return i64_scalar(m->step);
    LT_CHECK(m->steps[i] >= 0, m->dir.string(), ": no optimizer shard holds '", m->params[i].first,
             "'");
    return i64_scalar(m->steps[i]);
  };
  return s;
}

optim::NamedTensors whole_state_from_shards(const fs::path& dir, const nn::NamedParameters& params,
                                            int64_t world) {
  const ZeroShardFiles files(dir, params, world);
  const ZeroOptimizer::StateSource source = files.source();
  optim::NamedTensors out;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, p] = params[i];
    if (files.quantized(i)) {
      for (const std::string moment : {"exp_avg", "sqrt_exp_avg_sq"}) {
        out.emplace_back(name + "." + moment + ".codes",
                         source.part(i, moment + ".codes", DType::U8, 0, p.numel()));
        const int64_t block = files.block_size();
        out.emplace_back(
            name + "." + moment + ".scales",
            source.part(i, moment + ".scales", DType::F32, 0, (p.numel() + block - 1) / block));
      }
    } else {
      for (const char* field : {"exp_avg", "exp_avg_sq"})
        out.emplace_back(name + "." + field,
                         source.part(i, field, DType::F32, 0, p.numel()).reshape(p.shape()));
    }
    out.emplace_back(name + ".step", source.step(i));
  }
  out.emplace_back("step", source.step(params.size()));
  return out;
}

}  // namespace lt::exec
