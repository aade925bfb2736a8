#pragma once
// `lazytrain plan --gpus N` (docs/distributed.md): the one-GPU plan of a
// rank's share of the global batch, and what data parallel adds to it:
// the gradients' collectives over the link between GPUs, per step and per
// rank, and the host memory of a node's ranks.
//
// The cost of a collective is the bus-bandwidth model NCCL's own tests
// report: a ring all-reduce of B bytes moves 2 (N - 1) / N x B bytes over
// each rank's link; a reduce-scatter of the gradients and an all-gather of
// the weights (ZeRO-1) move (N - 1) / N of each, the same total for
// same-sized gradients and weights. The link: the profile's link_gbps
// between the GPUs of a node, node_link_gbps between nodes (the slower
// bounds a ring that crosses them); absent, the defaults below, figures
// of NVLink-class and 400 Gb/s-per-GPU machines, not measured here.
// The prediction adds the collectives to the rank's step, not overlapped:
// an upper bound (buckets overlap them with the backward).
#include <cstdint>
#include <optional>
#include <string>

#include "exec/memory_budget.h"
#include "models/config.h"
#include "plan/hardware.h"

namespace lt::plan {

inline constexpr double kDefaultLinkGbps = 360;     // NVLink 4, all-reduce bus bandwidth
inline constexpr double kDefaultNodeLinkGbps = 50;  // 400 Gb/s InfiniBand per GPU

struct DataParallelOptions {
  int gpus = 1;
  int gpus_per_node = 8;
  std::optional<double> link_gbps, node_link_gbps;  // the profile's, when it names them
  exec::OptimizerStates optimizer = exec::OptimizerStates::Fp32;
  int64_t optimizer_block = 2048;
};

struct DataParallelPlan {
  int gpus = 1, nodes = 1, ranks_per_node = 1;
  double bus_gbps = 0;
  std::string link_from;       // "profile" or the default's words
  int64_t gradient_bytes = 0;  // bf16, every parameter
  int64_t traffic_bytes = 0;   // per rank and step over its link
  double collectives_s = 0;    // traffic / bus bandwidth
  int64_t host_bytes_per_node = 0;
  // With ZeRO-1 (dist.zero 1) each rank would keep 1/N of the optimizer
  // states: the host bytes per rank it saves.
  int64_t zero_saves_bytes_per_rank = 0;
  // With ZeRO-1, the ranks of a node share one copy of the weights
  // (dist.share_weights; exec/shared_weights.h, on several nodes too: one
  // segment per host): the f32 masters and the bf16 copies the GPU uploads
  // from, 6 bytes a parameter, once per node instead of once per rank. The
  // host bytes per node then.
  int64_t zero_host_bytes_per_node = 0;
};

// The weights the ranks of a node share under ZeRO-1: f32 masters and bf16
// copies, per parameter.
inline constexpr int64_t kSharedWeightBytesPerParameter = 4 + 2;

// A node's `ranks_per_node` ranks share its cores and host memory: the
// launcher gives each rank's thread pool 1/k of the cores (LT_NUM_THREADS),
// and their CPU updates and copies draw on one host memory bandwidth. So
// a rank's plan is priced on 1/k of the profile's CPU update rates and of
// host_mem_gbps: under all-reduce each rank updates every master. Under
// ZeRO-1 (`update_shards` = the world size N) a rank updates 1/N of them,
// priced as all of them at N times the rate. (The memory bound is then a
// little generous: the copies' share of the bandwidth is taken from N/k
// of it, not 1/k.) A profile's figures are one process's on the node.
HardwareProfile rank_share_of_node(HardwareProfile hw, int ranks_per_node, int update_shards = 1);

// `rank_host_bytes`: the host peak the one-GPU plan of a rank's batch
// counts. Throws naming --gpus when it is < 1.
DataParallelPlan plan_data_parallel(const models::ModelConfig& model,
                                    const DataParallelOptions& options, int64_t rank_host_bytes);

}  // namespace lt::plan
