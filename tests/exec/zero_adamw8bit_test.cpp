// ZeRO-1 with AdamW8bit (exec/zero_optimizer.h), bit for bit, in one
// process: each of N simulated ranks gets the whole (same) gradient, keeps
// its shard's pieces, and updates them with AdamW8bit's blockwise states
// on shards aligned to the block. The outside reference is one AdamW8bit
// over the whole parameters (optim/adamw8bit.h, itself tested against a
// float64 reference): after 3 steps every rank's pieces of the masters
// equal it to the bit, and the shard files the N ranks write, assembled
// (exec/zero_checkpoint.h), equal its whole state (codes and per-block
// scales, the small tensors' f32 m and v) to the bit. Awkward sizes:
// tensors of 1 to 700 elements with short last blocks, cut between ranks,
// as one group and as several (the streaming executor's stages), on 1 to
// 4 ranks. Without the alignment the pieces would quantize in other blocks
// and differ.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "compile/compiler_info.h"
#include "compile/kernel_cache.h"
#include "core/random.h"
#include "exec/zero_checkpoint.h"
#include "train/train_helpers.h"

namespace lt::exec {
namespace {

// Rank `rank` of `world`, alone: its collectives see only itself, as if
// every rank held the same gradient and sums were of one. reduce_scatter
// hands it its own shard of its flat buffer; the all-gather is not run.
class AloneRank final : public CrossRankSum {
 public:
  AloneRank(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void sum(std::span<double>) override {}
  void sum(const std::vector<Tensor>&) override {}
  void reduce_scatter(const Tensor& flat, const Tensor& shard) override {
    const int64_t s = shard.numel();
    shard.copy_(flat.slice(0, rank_ * s, (rank_ + 1) * s));
  }
  void all_gather(const Tensor&) override {}

 private:
  int rank_, world_;
};

nn::NamedParameters clone(const nn::NamedParameters& params) {
  nn::NamedParameters out;
  for (const auto& [name, p] : params) out.emplace_back(name, p.clone());
  return out;
}

void expect_bitwise(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  EXPECT_EQ(0, std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes())) << what;
}

TEST(ZeroAdamW8bit, ShardsOnBlocksGiveOneAdamW8bitBitForBit) {
  // Blocks of 16; tensors of 40 and more elements quantized.
  const optim::AdamW8bitOptions opts8{16, 40};
  optim::AdamWOptions adam;
  adam.lr = 1e-2;
  adam.weight_decay = 0.1;
  Generator gen(5);
  nn::NamedParameters params;
  const std::vector<int64_t> sizes = {5, 130, 1, 700, 64, 257, 39, 41};
  for (size_t i = 0; i < sizes.size(); ++i)
    params.emplace_back((i == 2 ? "norm." : "w.") + std::to_string(i),
                        Tensor::randn({sizes[i]}, gen));
  std::vector<std::vector<Tensor>> grads(3);
  for (auto& step : grads)
    for (int64_t n : sizes) step.push_back(Tensor::randn({n}, gen));

  const nn::NamedParameters whole = clone(params);
  optim::AdamW8bit reference(whole, adam, {"norm"}, opts8);
  for (const auto& step : grads) {
    for (size_t i = 0; i < whole.size(); ++i) whole[i].second.set_grad(step[i]);
    reference.step(adam.lr);
  }
  const optim::NamedTensors want = reference.state();

  for (const std::vector<size_t>& groups : {std::vector<size_t>{}, std::vector<size_t>{0, 3, 5}})
    for (int world : {1, 2, 3, 4}) {
      SCOPED_TRACE(std::to_string(world) + " ranks, " + std::to_string(groups.size()) + " groups");
      train::testing::TempDir tmp("zero_adamw8bit");
      for (int rank = 0; rank < world; ++rank) {
        const nn::NamedParameters masters = clone(params);
        AloneRank alone(rank, world);
        ZeroOptimizer zero(masters, adam, {"norm"}, alone, groups, opts8);
        for (const auto& step : grads) {
          zero.reduce_gradients(step);
          zero.update(adam.lr, 1.0, 0, masters.size());
          zero.finish_step();
        }
        for (const ZeroPiece& piece : zero.shards().pieces) {
          EXPECT_EQ(piece.begin % opts8.block_size, 0);
          const auto& [name, m] = masters[piece.param];
          expect_bitwise(
              m.slice(0, piece.begin, piece.begin + piece.length),
              whole[piece.param].second.slice(0, piece.begin, piece.begin + piece.length),
              name + " on rank " + std::to_string(rank));
        }
        write_zero_shard(tmp.path() / zero_shard_file_name(rank, world), zero);
      }
      const optim::NamedTensors got = whole_state_from_shards(tmp.path(), params, world);
      std::map<std::string, Tensor> by_name(got.begin(), got.end());
      for (const auto& [name, t] : want) {
        ASSERT_TRUE(by_name.count(name)) << name;
        expect_bitwise(by_name.at(name), t, name);
      }
      EXPECT_EQ(got.size(), want.size());
    }
}

// train.compile: ZeroOptimizer passes use_compiled_updates to its pieces'
// optimizers. The compiled AdamW and 8-bit AdamW are optim's bit for bit
// (optim/compiled_adamw.h, compiled_adamw8bit.h), so each rank's pieces
// equal the hand-written run's. Every piece of a rank is compiled-updated.
TEST(ZeroAdamW8bit, CompiledUpdatesReachThePiecesOptimizers) {
  if (!compile::compiler_info().built_in) GTEST_SKIP() << "built without MLIR (-DLT_MLIR=OFF)";
  optim::AdamWOptions adam;
  adam.lr = 1e-2;
  Generator gen(9);
  nn::NamedParameters params;
  const std::vector<int64_t> sizes = {5, 130, 700, 257};
  for (size_t i = 0; i < sizes.size(); ++i)
    params.emplace_back("w." + std::to_string(i), Tensor::randn({sizes[i]}, gen));
  std::vector<std::vector<Tensor>> grads(3);
  for (auto& step : grads)
    for (int64_t n : sizes) step.push_back(Tensor::randn({n}, gen));
  for (bool eight_bit : {false, true}) {
    SCOPED_TRACE(eight_bit ? "adamw8bit" : "adamw");
    std::optional<optim::AdamW8bitOptions> opts8;
    if (eight_bit) opts8 = optim::AdamW8bitOptions{16, 40};
    const int world = 2;
    for (int rank = 0; rank < world; ++rank) {
      std::vector<nn::NamedParameters> masters;
      int64_t compiled_updates[2] = {0, 0};
      for (bool compiled : {false, true}) {
        masters.push_back(clone(params));
        AloneRank alone(rank, world);
        ZeroOptimizer zero(masters.back(), adam, {}, alone, {}, opts8);
        if (compiled) {
          EXPECT_TRUE(zero.use_compiled_updates(std::make_shared<compile::KernelCache>()));
        }
        for (const auto& step : grads) {
          zero.reduce_gradients(step);
          zero.update(adam.lr, 1.0, 0, params.size());
          zero.finish_step();
        }
        compiled_updates[compiled] = zero.compiled_updates();
        EXPECT_EQ(zero.compiled_fallback(), "");
      }
      EXPECT_EQ(compiled_updates[0], 0);
      EXPECT_GT(compiled_updates[1], 0);
      for (size_t i = 0; i < params.size(); ++i) {
        const std::vector<double> a = masters[0][i].second.to_doubles();
        const std::vector<double> b = masters[1][i].second.to_doubles();
        for (size_t e = 0; e < a.size(); ++e) {
          ASSERT_EQ(a[e], b[e]) << params[i].first << " element " << e;
        }
      }
    }
  }
}

}  // namespace
}  // namespace lt::exec
