// Weights shared per host on several hosts (Note [Gathers among a host's
// peers], exec/zero_optimizer.cpp): the ZeRO-1 all-gather of the weights
// brings each shard to each other host once, not once per rank of that
// host. This test binary runs as 4 ranks under mpirun, cut into 2 hosts of
// 2 (LT_TEST_RANKS_PER_HOST), with MPI over TCP alone (btl self,tcp), so
// that every byte a rank receives passes through read(2) and the kernel
// counts it (/proc/self/io's rchar). Each rank sets its ZeRO-1 pieces of
// the fixture's masters (in its host's shared segment) to its rank + 1 and
// gathers; then every element of the masters holds its owner's value (the
// owners from zero_shards, element by element), and what each rank
// received is its peer's shard of every group (4 bytes an element: one
// shard per other host) and at most 4 KB more (MPI's headers and the
// arrival notices: ~350 bytes measured), where the all-gather over every
// rank brings 3 shards (checked to fail so: 58-62 KB against 20.4 KB).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <span>

#include "dist/dist_runs.h"
#include "dist/mpi.h"
#include "dist/process.h"
#include "exec/streaming.h"
#include "exec/zero_optimizer.h"
#include "support/bytes_read.h"
#include "train/host_weights.h"

namespace lt::train::testing {
namespace {

constexpr const char* kOutDir = "LT_TEST_PEER_GATHER_OUT";

TEST(PeerGatherRank, Run) {
  const char* out = std::getenv(kOutDir);
  if (out == nullptr) GTEST_SKIP() << "one rank of PeerGather, under mpirun";
  const dist::World& world = dist::this_world();  // MPI_Init
  models::CausalLM model = io::load_hf_model(fixture("qwen3"));
  const std::vector<size_t> groups = exec::streaming_zero_groups(model);
  TrainConfig c;
  c.dist.zero = 1;
  c.dist.timeout_s = 60;
  RunPlan plan;
  plan.executor = exec::ExecutorKind::Offload;
  ProgressBar log(0, 1);
  std::unique_ptr<exec::SharedWeights> shared =
      share_weights_on_host(c, plan, model, groups.size(), log);
  ASSERT_TRUE(shared);
  std::unique_ptr<exec::CrossRankSum> sum = dist::make_mpi_sum(60);
  const auto params = model.parameters();
  exec::ZeroOptimizer zero(params, optim::AdamWOptions{}, {}, *sum, groups);
  zero.share_weights(*shared);
  for (const exec::ZeroPiece& piece : zero.shards().pieces)
    params[piece.param]
        .second.detach()
        .flatten()
        .slice(0, piece.begin, piece.begin + piece.length)
        .fill_(world.rank + 1.0);
  // Counted from before a sum over every rank: no rank can start its
  // gather (whose small messages go eagerly) before this rank has joined
  // the sum, so none of them is read before the count starts (the CI check
  // of dbde754 counted 0 bytes on a rank whose polling of the set-up's
  // non-blocking host barrier had read them earlier). The sum adds a few
  // bytes, within the bound's slack.
  const int64_t received = lt::testing::bytes_read_by([&] {
    double joined = 1;
    sum->sum(std::span<double>(&joined, 1));
    zero.gather_masters();
  });
  // Every element's owner, from every rank's shards.
  std::vector<int64_t> numels;
  for (const auto& [name, p] : params) numels.push_back(p.numel());
  int64_t wrong = 0;
  for (int r = 0; r < world.size; ++r)
    for (const exec::ZeroPiece& piece : exec::zero_shards(numels, r, world.size, groups).pieces) {
      const float* m = params[piece.param].second.data<float>();
      for (int64_t e = piece.begin; e < piece.begin + piece.length; ++e)
        wrong += m[e] != static_cast<float>(r + 1);
    }
  std::ofstream(fs::path(out) / ("rank-" + std::to_string(world.rank)))
      << received << " " << zero.shards().shard << " " << wrong << "\n";
}

TEST(PeerGather, EachShardReachesEachOtherHostOnce) {
  prepare_mpirun_environment();
  TempDir tmp("peer_gather");
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string command =
      "timeout 120 mpirun -np 4 --oversubscribe --bind-to none --mca btl self,tcp -x "
      "LT_TEST_RANKS_PER_HOST=2 -x " +
      std::string(kOutDir) + "=" + tmp.path().string() + " " + self +
      " --gtest_filter=PeerGatherRank.Run > " + (tmp / "log").string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream log(tmp / "log");
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  ASSERT_EQ(status, 0) << text;
  for (int r = 0; r < 4; ++r) {
    std::ifstream in(tmp / ("rank-" + std::to_string(r)));
    int64_t received = -1, shard = 0, wrong = -1;
    in >> received >> shard >> wrong;
    SCOPED_TRACE("rank " + std::to_string(r));
    ASSERT_GE(received, 0) << text;
    EXPECT_EQ(wrong, 0) << "elements without their owner's value";
    const int64_t one_shard = 4 * shard;  // f32, every group's S_g: one other host's
    EXPECT_GE(received, one_shard);
    EXPECT_LE(received, one_shard + 4 * 1024) << "the shards of 3 ranks are " << 3 * one_shard;
  }
}

}  // namespace
}  // namespace lt::train::testing
