#include "train/host_weights.h"

#include <fmt/format.h>

#include <algorithm>

#include "dist/host_segment.h"
#include "dist/process.h"
#ifdef LT_WITH_CUDA
#include "core/cuda/runtime_calls.h"
#endif

namespace lt::train {

std::unique_ptr<exec::SharedWeights> share_weights_on_host(const TrainConfig& c,
                                                           const RunPlan& plan,
                                                           models::CausalLM& model, size_t groups,
                                                           ProgressBar& log) {
  const dist::World& world = dist::this_world();
  const bool cpu_master = plan.executor == exec::ExecutorKind::Offload ||
                          plan.executor == exec::ExecutorKind::Streaming;
  if (!world.distributed() || c.dist.zero != 1 || !c.dist.share_weights || !cpu_master)
    return nullptr;
  if (world.launcher == dist::Launcher::Torchrun && world.local_size == 0) {
    log.message(
        "dist.share_weights: LOCAL_WORLD_SIZE is not set, so the ranks of a host cannot find "
        "each other: each rank keeps its own copy of the weights");
    return nullptr;
  }
  const dist::HostSegment layout = dist::host_layout(c.dist.timeout_s);
  const auto params = model.parameters();
  const bool bf16_copies = plan.device.is_cuda();
  const dist::HostSegment host = dist::open_host_segment(
      exec::SharedWeights::bytes_for(params, groups, layout.local_size, bf16_copies),
      c.dist.timeout_s);
  dist::SharedMemory& memory = *host.memory;
#ifdef LT_WITH_CUDA
  if (bf16_copies) {
    // Page-locked, so that the uploads from it run at the link's rate.
    cuda::host_register(memory.data(), memory.bytes());
    memory.before_unmap = [data = memory.data()] { cuda::host_unregister(data); };
  }
#endif
  auto shared = std::make_unique<exec::SharedWeights>(
      host.memory, memory.data(), memory.bytes(), params, groups, host.local_rank, host.local_size,
      bf16_copies, c.dist.timeout_s);
  // Several hosts: the shards of other hosts' ranks this rank copies in
  // (Note [Weights shared by the ranks of a host]).
  std::vector<int> copied;
  for (int r = 0; r < world.size; ++r)
    if (std::find(host.members.begin(), host.members.end(), r) == host.members.end() &&
        r % host.local_size == host.local_rank)
      copied.push_back(r);
  shared->copy_in_shards_of(std::move(copied));
  if (host.local_rank == 0) shared->write_weights();
  shared->barrier("local rank 0's copy of the weights into shared memory");
  memory.unlink();  // every rank of the host has it mapped (done already under MPI)
  shared->adopt();
  log.message(fmt::format(
      "dist.share_weights: the {} ranks of this host share one copy of the weights in /dev/shm "
      "({:.2f} MB; {:.2f} MB of f32 weights no longer held per rank){}",
      host.local_size, static_cast<double>(memory.bytes()) / 1e6,
      static_cast<double>(shared->weight_bytes()) / 1e6,
      host.hosts > 1 ? fmt::format(", on each of {} hosts, all-gathered between them", host.hosts)
                     : ""));
  return shared;
}

}  // namespace lt::train
