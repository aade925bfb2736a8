#include "exec/zero_checkpoint.h"

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

int64_t i64_of(const std::map<std::string, Tensor>& file, const std::string& name,
               const fs::path& path) {
  auto it = file.find(name);
  LT_CHECK(it != file.end() && it->second.dtype() == DType::I64 && it->second.numel() == 1,
           path.string(), ": '", name, "' is missing or not an i64 scalar");
  return *it->second.data<int64_t>();
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

optim::NamedTensors whole_state_from_shards(const fs::path& dir, const nn::NamedParameters& params,
                                            int64_t world) {
  LT_CHECK(world >= 1, dir.string(), ": ZeRO-1 world size ", world);
  // Per parameter, its states as one optimizer holds them whole, made as a
  // shard first brings them: AdamW's m and v (f32, the parameter's
  // elements), or AdamW8bit's codes (u8, its elements) and scales (f32, one
  // per block).
  std::vector<std::map<std::string, Tensor>> whole(params.size());
  std::vector<int64_t> covered(params.size(), 0), steps(params.size(), -1);
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) index[params[i].first] = i;
  int64_t step = -1;
  for (int r = 0; r < world; ++r) {
    const fs::path path = dir / zero_shard_file_name(r, static_cast<int>(world));
    LT_CHECK(fs::is_regular_file(path), path.string(), ": missing (a ZeRO-1 checkpoint of ", world,
             " ranks has one file per rank)");
    const auto file = io::read_safetensors(path);
    LT_CHECK(i64_of(file, "zero.rank", path) == r && i64_of(file, kZeroWorldSizeKey, path) == world,
             path.string(), ": not shard ", r, " of ", world);
    const int64_t block =
        file.count(kZeroBlockSizeKey) ? i64_of(file, kZeroBlockSizeKey, path) : int64_t{0};
    const int64_t file_step = i64_of(file, "step", path);
    LT_CHECK(step < 0 || step == file_step, path.string(), ": step ", file_step,
             ", the other shards' ", step);
    step = file_step;
    for (const auto& [key, t] : file) {
      const std::string suffix = ".begin";
      if (key.size() <= suffix.size() ||
          key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const std::string name = key.substr(0, key.size() - suffix.size());
      auto it = index.find(name);
      LT_CHECK(it != index.end(), path.string(), ": parameter '", name,
               "' is not in the model (a checkpoint of another model?)");
      const size_t i = it->second;
      const int64_t numel = params[i].second.numel();
      const int64_t begin = i64_of(file, key, path);
      const bool quantized = file.count(name + ".exp_avg.codes") != 0;
      LT_CHECK(!quantized || (block > 0 && begin % block == 0), path.string(), ": '", name,
               "' has 8-bit states from element ", begin, ", not on a block of ", block);
      struct Field {
        std::string suffix;
        DType dtype;
        int64_t whole, unit;  // the whole state's elements; elements of the parameter per one
      };
      std::vector<Field> fields;
      if (quantized) {
        for (const char* moment : {"exp_avg", "sqrt_exp_avg_sq"}) {
          fields.push_back({std::string(moment) + ".codes", DType::U8, numel, 1});
          fields.push_back(
              {std::string(moment) + ".scales", DType::F32, (numel + block - 1) / block, block});
        }
      } else {
        fields = {{"exp_avg", DType::F32, numel, 1}, {"exp_avg_sq", DType::F32, numel, 1}};
      }
      for (const Field& field : fields) {
        const std::string state = name + "." + field.suffix;
        auto f = file.find(state);
        LT_CHECK(f != file.end() && f->second.dtype() == field.dtype, path.string(), ": '", state,
                 "' is missing or not ", dtype_name(field.dtype));
        Tensor& to = whole[i][field.suffix];
        if (!to.defined()) to = Tensor::zeros({field.whole}, field.dtype);
        const Tensor& piece = f->second;
        const int64_t at = begin / field.unit;
        LT_CHECK(at + piece.numel() <= to.numel(), path.string(), ": '", state, "' of ",
                 piece.numel(), " elements from ", at, " does not fit the whole's ", to.numel());
        std::memcpy(
            static_cast<char*>(to.data_ptr()) + static_cast<size_t>(at) * dtype_size(field.dtype),
            piece.contiguous().data_ptr(),
            static_cast<size_t>(piece.numel()) * dtype_size(field.dtype));
        if (field.unit == 1 && &field == &fields.front()) covered[i] += piece.numel();
      }
      steps[i] = i64_of(file, name + ".step", path);
    }
  }
  optim::NamedTensors out;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, p] = params[i];
    LT_CHECK(covered[i] == p.numel(), dir.string(), ": the ", world, " optimizer shards cover ",
             covered[i], " of the ", p.numel(), " elements of '", name, "'");
    for (auto& [suffix, t] : whole[i])
      out.emplace_back(name + "." + suffix,
                       suffix == "exp_avg" || suffix == "exp_avg_sq" ? t.reshape(p.shape()) : t);
    out.emplace_back(name + ".step", i64_scalar(steps[i]));
  }
  out.emplace_back("step", i64_scalar(step));
  return out;
}

}  // namespace lt::exec
