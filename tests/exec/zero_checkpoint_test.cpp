// ZeRO-1's optimizer states saved per shard (exec/zero_checkpoint.h): the
// shards 1 to 4 ranks write, read back into the whole model's states,
// equal the states they were cut from bit for bit (random values, the
// qwen3 fixture's parameters, which divide by none of 3 and 4 evenly);
// a missing shard is an error naming its file. A rank resuming with
// ZeRO-1 reads only the parts it keeps.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/random.h"
#include "exec/zero_checkpoint.h"
#include "io/hf_model.h"
#include "support/bytes_read.h"
#include "support/errors.h"
#include "train/train_helpers.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;

class RankOnly final : public CrossRankSum {
 public:
  RankOnly(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void sum(std::span<double>) override { ADD_FAILURE() << "a collective"; }
  void sum(const std::vector<Tensor>&) override { ADD_FAILURE() << "a collective"; }

 private:
  int rank_, world_;
};

// The whole model's AdamW states with random values and step counts.
optim::NamedTensors random_state(const nn::NamedParameters& params) {
  Generator gen(5);
  optim::NamedTensors out;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, p] = params[i];
    out.emplace_back(name + ".exp_avg", Tensor::randn(p.shape(), gen));
    out.emplace_back(name + ".exp_avg_sq", Tensor::uniform(p.shape(), gen, 0, 1));
    Tensor step = Tensor::empty({}, DType::I64);
    *step.data<int64_t>() = 7 + static_cast<int64_t>(i % 3);
    out.emplace_back(name + ".step", step);
  }
  Tensor step = Tensor::empty({}, DType::I64);
  *step.data<int64_t>() = 9;
  out.emplace_back("step", step);
  return out;
}

TEST(ZeroCheckpoint, ShardsReadBackAsTheWholeStateForAnyWorldSize) {
  const models::CausalLM model =
      io::load_hf_model(fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/qwen3");
  const auto params = model.parameters();
  const optim::NamedTensors whole = random_state(params);
  train::testing::TempDir tmp("zero_checkpoint");  // train/train_helpers.h
  for (int world : {1, 2, 3, 4}) {
    const fs::path dir = tmp / std::to_string(world);
    fs::create_directories(dir);
    for (int rank = 0; rank < world; ++rank) {
      RankOnly ranks(rank, world);
      ZeroOptimizer zero(params, optim::AdamWOptions{}, {}, ranks);
      zero.load_state(whole);  // keeps this rank's pieces
      write_zero_shard(dir / zero_shard_file_name(rank, world), zero);
    }
    const optim::NamedTensors back = whole_state_from_shards(dir, params, world);
    ASSERT_EQ(back.size(), whole.size()) << world;
    for (size_t k = 0; k < whole.size(); ++k) {
      const auto& [name, want] = whole[k];
      const auto& [got_name, got] = back[k];
      EXPECT_EQ(got_name, name);
      ASSERT_EQ(got.dtype(), want.dtype()) << name;
      ASSERT_EQ(got.shape(), want.shape()) << name;
      EXPECT_EQ(
          0, std::memcmp(got.contiguous().data_ptr(), want.contiguous().data_ptr(), want.nbytes()))
          << name << ", " << world << " ranks";
    }
    if (world == 3) {
      fs::remove(dir / zero_shard_file_name(1, 3));
      EXPECT_NE(testing::error_of([&] {
                  whole_state_from_shards(dir, params, 3);
                }).find(zero_shard_file_name(1, 3) + ": missing"),
                std::string::npos);
    }
  }
}

// The bytes of a file's safetensors header (its first 8 bytes and the JSON).
int64_t header_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  return 8 + static_cast<int64_t>(n);
}

// A ZeRO-1 rank resuming reads only the parts of the shard files it keeps
// (ZeroShardFiles): for every world size that wrote them and every world
// size that reads, each rank's states equal those it keeps of the whole
// (ZeroOptimizer::load_state, checked above to give back the whole bit
// for bit), and the kernel counts that the rank read its own states' bytes
// (8 a parameter element it owns: ~1/N of the states) plus the files'
// headers and scalars, not the whole states.
TEST(ZeroCheckpoint, ARankReadsOnlyTheStatesItKeeps) {
  const models::CausalLM model =
      io::load_hf_model(fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/qwen3");
  const auto params = model.parameters();
  const optim::NamedTensors whole = random_state(params);
  int64_t elements = 0;
  for (const auto& [name, p] : params) elements += p.numel();
  train::testing::TempDir tmp("zero_checkpoint_parts");
  for (int saved : {1, 2, 3}) {
    const fs::path dir = tmp / std::to_string(saved);
    fs::create_directories(dir);
    int64_t headers = 0;
    for (int rank = 0; rank < saved; ++rank) {
      RankOnly ranks(rank, saved);
      ZeroOptimizer zero(params, optim::AdamWOptions{}, {}, ranks);
      zero.load_state(whole);
      const fs::path file = dir / zero_shard_file_name(rank, saved);
      write_zero_shard(file, zero);
      headers += header_bytes(file);
    }
    for (int world : {1, 2, 3, 4}) {
      for (int rank = 0; rank < world; ++rank) {
        SCOPED_TRACE(std::to_string(saved) + " ranks saved, rank " + std::to_string(rank) + " of " +
                     std::to_string(world) + " reads");
        RankOnly ranks(rank, world);
        ZeroOptimizer want(params, optim::AdamWOptions{}, {}, ranks);
        want.load_state(whole);
        ZeroOptimizer got(params, optim::AdamWOptions{}, {}, ranks);
        const int64_t read = testing::bytes_read_by([&] {
          const ZeroShardFiles files(dir, params, saved);
          got.load_state_parts(files.source());
        });
        const optim::NamedTensors a = want.shard_state(), b = got.shard_state();
        ASSERT_EQ(a.size(), b.size());
        for (size_t k = 0; k < a.size(); ++k) {
          EXPECT_EQ(a[k].first, b[k].first);
          ASSERT_EQ(a[k].second.nbytes(), b[k].second.nbytes()) << a[k].first;
          EXPECT_EQ(0, std::memcmp(a[k].second.contiguous().data_ptr(),
                                   b[k].second.contiguous().data_ptr(), a[k].second.nbytes()))
              << a[k].first;
        }
        // m and v of the rank's elements; scalars: each file's rank, world
        // size and step, and every piece's first element and step.
        const int64_t states = 8 * got.shards().owned();
        const int64_t scalars = 8 * (3 * saved + 2 * (static_cast<int64_t>(params.size()) + saved));
        EXPECT_GE(read, states);
        EXPECT_LE(read, states + headers + scalars) << "states of " << 8 * elements << " bytes";
        EXPECT_LE(got.shards().owned(), elements / world + 1);  // a shard: ceil(elements / N)
      }
    }
  }
}

}  // namespace
}  // namespace lt::exec
