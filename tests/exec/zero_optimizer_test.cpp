// ZeRO-1's host memory per rank (exec/zero_optimizer.h): the optimizer
// states a rank allocates fall with the number of ranks. Measured by the
// CPU allocator while each rank's ZeroOptimizer is built over the qwen3
// fixture (no collective runs at construction), against the hand count:
// AdamW's m and v, 8 bytes for each parameter of the rank's shard (at most
// ceil(P / N)), plus the shard's summed gradients, S f32, and at its first
// use the flat buffer of N S f32. The whole model's AdamW allocates 8 P.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/allocator.h"
#include "exec/zero_optimizer.h"
#include "io/hf_model.h"

namespace lt::exec {
namespace {

// A rank of a world, for construction only: no collective may run.
class RankOnly final : public CrossRankSum {
 public:
  RankOnly(int rank, int world) : rank_(rank), world_(world) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void sum(std::span<double>) override { ADD_FAILURE() << "a collective at construction"; }
  void sum(const std::vector<Tensor>&) override { ADD_FAILURE() << "a collective"; }

 private:
  int rank_, world_;
};

int64_t allocated_by(const std::function<void()>& make) {
  const int64_t before = cpu_allocator().stats().current_bytes;
  make();
  return cpu_allocator().stats().current_bytes - before;
}

TEST(ZeroOptimizer, StatesPerRankFallWithTheWorldSize) {
  const models::CausalLM model = io::load_hf_model(std::filesystem::path(LT_SOURCE_DIR) /
                                                   "tests/models/fixtures/families/qwen3");
  int64_t total = 0;
  for (const auto& [name, p] : model.parameters()) total += p.numel();
  std::unique_ptr<optim::AdamW> whole;
  EXPECT_EQ(allocated_by([&] {
              whole = std::make_unique<optim::AdamW>(model.parameters(), optim::AdamWOptions{});
            }),
            8 * total);
  int64_t previous_largest = 8 * total + 1;
  for (int world : {1, 2, 3, 4}) {
    const int64_t shard = (total + world - 1) / world;
    int64_t largest = 0, states = 0;
    for (int rank = 0; rank < world; ++rank) {
      RankOnly ranks(rank, world);
      std::unique_ptr<ZeroOptimizer> zero;
      const int64_t bytes = allocated_by([&] {
        zero = std::make_unique<ZeroOptimizer>(model.parameters(), optim::AdamWOptions{},
                                               std::vector<std::string>{"norm"}, ranks);
      });
      const int64_t owned = zero->shards().owned();
      EXPECT_LE(owned, shard);
      EXPECT_EQ(zero->state_bytes(), 8 * owned) << "rank " << rank << " of " << world;
      EXPECT_EQ(bytes, 8 * owned + 4 * shard) << "rank " << rank << " of " << world;
      // The flat buffer comes with its first use (the streaming executor
      // over shared weights never makes it).
      EXPECT_EQ(allocated_by([&] { zero->flat_gradient_view(0); }), 4 * (world * shard))
          << "rank " << rank << " of " << world;
      largest = std::max(largest, zero->state_bytes());
      states += zero->state_bytes();
    }
    EXPECT_EQ(states, 8 * total) << world << " ranks hold every state once";
    EXPECT_LT(largest, previous_largest) << world << " ranks";
    EXPECT_LE(largest, 8 * shard);
    previous_largest = largest;
  }
}

}  // namespace
}  // namespace lt::exec
