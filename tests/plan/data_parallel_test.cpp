// `lazytrain plan --gpus N`'s data-parallel figures (plan/data_parallel.h)
// against hand counts: a ring all-reduce of the bf16 gradients (2 bytes a
// parameter) moves 2 (N - 1) / N of them over each rank's link; the link is
// the profile's (the slower of the two between nodes) or the default;
// ZeRO-1 keeps (N - 1) / N of AdamW's 8 bytes a parameter off each rank.
#include <gtest/gtest.h>

#include "plan/data_parallel.h"
#include "plan/hardware.h"
#include "support/errors.h"

namespace lt::plan {
namespace {

models::ModelConfig small_model() {
  models::ModelConfig c;
  c.vocab_size = 1000;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  return c;
}

TEST(DataParallelPlan, CollectivesAndMemoryAgainstHandCounts) {
  const models::ModelConfig model = small_model();
  const double p = static_cast<double>(model.num_parameters());
  ASSERT_GT(p, 0);
  DataParallelOptions o;
  o.gpus = 4;
  DataParallelPlan d = plan_data_parallel(model, o, 1000);
  EXPECT_EQ(d.nodes, 1);
  EXPECT_EQ(d.ranks_per_node, 4);
  EXPECT_EQ(d.bus_gbps, kDefaultLinkGbps);
  EXPECT_NE(d.link_from.find("default"), std::string::npos);
  EXPECT_EQ(d.traffic_bytes, static_cast<int64_t>(2 * 0.75 * 2 * p));
  EXPECT_DOUBLE_EQ(d.collectives_s,
                   static_cast<double>(d.traffic_bytes) / (kDefaultLinkGbps * 1e9));
  EXPECT_EQ(d.host_bytes_per_node, 4000);
  EXPECT_EQ(d.zero_saves_bytes_per_rank, static_cast<int64_t>(0.75 * 8 * p));
  // ZeRO-1 on one node: the 4 ranks share one copy of the f32 masters and
  // bf16 copies (6 bytes a parameter) instead of holding one each.
  EXPECT_EQ(d.zero_host_bytes_per_node,
            4 * (1000 - d.zero_saves_bytes_per_rank) - 3 * 6 * model.num_parameters());

  // 16 GPUs, 8 a node, links from the profile: the ring crosses nodes.
  o.gpus = 16;
  o.link_gbps = 400;
  o.node_link_gbps = 25;
  d = plan_data_parallel(model, o, 1000);
  EXPECT_EQ(d.nodes, 2);
  EXPECT_EQ(d.ranks_per_node, 8);
  EXPECT_EQ(d.bus_gbps, 25);
  EXPECT_EQ(d.link_from, "profile");
  EXPECT_EQ(d.traffic_bytes, static_cast<int64_t>(2 * (15.0 / 16) * 2 * p));
  EXPECT_EQ(d.host_bytes_per_node, 8000);
  // Each node's 8 ranks share one copy of the weights, as on one node.
  EXPECT_EQ(d.zero_host_bytes_per_node,
            8 * (1000 - d.zero_saves_bytes_per_rank) - 7 * 6 * model.num_parameters());

  // One GPU: nothing moves.
  o.gpus = 1;
  d = plan_data_parallel(model, o, 1000);
  EXPECT_EQ(d.traffic_bytes, 0);
  EXPECT_EQ(d.zero_saves_bytes_per_rank, 0);

  o.gpus = 0;
  EXPECT_NE(testing::error_of([&] { plan_data_parallel(model, o, 0); }).find("--gpus"),
            std::string::npos);
}

TEST(DataParallelPlan, TheProfileNamesItsLinks) {
  const HardwareProfile hw =
      HardwareProfile::from_yaml_text("link_gbps: 300\nnode_link_gbps: 40\n", "test.yaml");
  ASSERT_TRUE(hw.link_gbps && hw.node_link_gbps);
  EXPECT_EQ(*hw.link_gbps, 300);
  EXPECT_EQ(*hw.node_link_gbps, 40);
  const HardwareProfile back = HardwareProfile::from_yaml_text(hw.to_yaml(), "round trip");
  EXPECT_EQ(back.link_gbps, hw.link_gbps);
  EXPECT_EQ(back.node_link_gbps, hw.node_link_gbps);
  EXPECT_FALSE(HardwareProfile{}.link_gbps.has_value());
}

}  // namespace
}  // namespace lt::plan
