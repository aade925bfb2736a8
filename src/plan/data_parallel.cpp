#include "plan/data_parallel.h"

#include <algorithm>

#include "core/error.h"

namespace lt::plan {

HardwareProfile rank_share_of_node(HardwareProfile hw, int ranks_per_node, int update_shards) {
  LT_CHECK(ranks_per_node >= 1 && update_shards >= 1, "ranks per node (", ranks_per_node,
           ") and update shards (", update_shards, ") must be at least 1");
  const double share = static_cast<double>(update_shards) / ranks_per_node;
  hw.cpu_adam_gparams_per_s *= share;
  hw.cpu_adam8bit_gparams_per_s *= share;
  for (std::optional<double>* rate :
       {&hw.cpu_adam_beside_copies_gparams_per_s, &hw.cpu_adam8bit_beside_copies_gparams_per_s})
    if (*rate) **rate *= share;
  hw.host_mem_gbps *= share;
  return hw;
}

DataParallelPlan plan_data_parallel(const models::ModelConfig& model, const DataParallelOptions& o,
                                    int64_t rank_host_bytes) {
  LT_CHECK(o.gpus >= 1, "--gpus must be at least 1, got ", o.gpus);
  LT_CHECK(o.gpus_per_node >= 1, "--gpus-per-node must be at least 1, got ", o.gpus_per_node);
  DataParallelPlan p;
  p.gpus = o.gpus;
  p.ranks_per_node = std::min(o.gpus, o.gpus_per_node);
  p.nodes = (o.gpus + o.gpus_per_node - 1) / o.gpus_per_node;
  const double link = o.link_gbps.value_or(kDefaultLinkGbps);
  const double node_link = o.node_link_gbps.value_or(kDefaultNodeLinkGbps);
  p.bus_gbps = p.nodes > 1 ? std::min(link, node_link) : link;
  const bool named = p.nodes > 1 ? o.link_gbps && o.node_link_gbps : o.link_gbps.has_value();
  p.link_from = named ? "profile"
                      : "default (not measured; the profile names no link_gbps" +
                            std::string(p.nodes > 1 ? "/node_link_gbps" : "") + ")";
  const int64_t params = model.num_parameters();
  p.gradient_bytes = 2 * params;  // bf16 gradients and weights
  const double share = static_cast<double>(o.gpus - 1) / static_cast<double>(o.gpus);
  p.traffic_bytes = static_cast<int64_t>(2 * share * static_cast<double>(p.gradient_bytes));
  p.collectives_s = static_cast<double>(p.traffic_bytes) / (p.bus_gbps * 1e9);
  p.host_bytes_per_node = rank_host_bytes * p.ranks_per_node;
  p.zero_saves_bytes_per_rank =
      static_cast<int64_t>(share * static_cast<double>(exec::optimizer_state_bytes(
                                       params, o.optimizer, o.optimizer_block)));
  const int64_t zero_rank = rank_host_bytes - p.zero_saves_bytes_per_rank;
  const int64_t weights = kSharedWeightBytesPerParameter * params;
  p.zero_host_bytes_per_node = p.ranks_per_node > 1
                                   ? (zero_rank - weights) * p.ranks_per_node + weights
                                   : zero_rank * p.ranks_per_node;
  return p;
}

}  // namespace lt::plan
