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
  out.emplace_back("zero.rank", i64_scalar(shards.rank));
  out.emplace_back(kZeroWorldSizeKey, i64_scalar(shards.world));
  io::write_safetensors(path, out);
}

optim::NamedTensors whole_state_from_shards(const fs::path& dir, const nn::NamedParameters& params,
                                            int64_t world) {
  LT_CHECK(world >= 1, dir.string(), ": ZeRO-1 world size ", world);
  std::vector<Tensor> m, v;
  std::vector<int64_t> covered(params.size(), 0), steps(params.size(), -1);
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < params.size(); ++i) {
    index[params[i].first] = i;
    m.push_back(Tensor::zeros({params[i].second.numel()}, DType::F32));
    v.push_back(Tensor::zeros({params[i].second.numel()}, DType::F32));
  }
  int64_t step = -1;
  for (int r = 0; r < world; ++r) {
    const fs::path path = dir / zero_shard_file_name(r, static_cast<int>(world));
    LT_CHECK(fs::is_regular_file(path), path.string(), ": missing (a ZeRO-1 checkpoint of ", world,
             " ranks has one file per rank)");
    const auto file = io::read_safetensors(path);
    LT_CHECK(i64_of(file, "zero.rank", path) == r && i64_of(file, kZeroWorldSizeKey, path) == world,
             path.string(), ": not shard ", r, " of ", world);
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
      const int64_t begin = i64_of(file, key, path);
      for (auto [field, whole] : {std::pair{"exp_avg", &m[i]}, std::pair{"exp_avg_sq", &v[i]}}) {
        auto f = file.find(name + "." + field);
        LT_CHECK(f != file.end() && f->second.dtype() == DType::F32, path.string(), ": '", name,
                 ".", field, "' is missing or not f32");
        const Tensor& piece = f->second;
        LT_CHECK(begin >= 0 && begin + piece.numel() <= whole->numel(), path.string(), ": '", name,
                 ".", field, "' of ", piece.numel(), " elements from ", begin,
                 " does not fit the parameter's ", whole->numel());
        std::memcpy(whole->data<float>() + begin, piece.contiguous().data<float>(),
                    static_cast<size_t>(piece.numel()) * sizeof(float));
        if (field == std::string("exp_avg")) covered[i] += piece.numel();
      }
      steps[i] = i64_of(file, name + ".step", path);
    }
  }
  optim::NamedTensors out;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, p] = params[i];
    LT_CHECK(covered[i] == p.numel(), dir.string(), ": the ", world, " optimizer shards cover ",
             covered[i], " of the ", p.numel(), " elements of '", name, "'");
    out.emplace_back(name + ".exp_avg", m[i].reshape(p.shape()));
    out.emplace_back(name + ".exp_avg_sq", v[i].reshape(p.shape()));
    out.emplace_back(name + ".step", i64_scalar(steps[i]));
  }
  out.emplace_back("step", i64_scalar(step));
  return out;
}

}  // namespace lt::exec
