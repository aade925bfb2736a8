#pragma once
// exec.state_placement (issue 26): which stages of a streaming run keep
// their f32 masters and optimizer states on disk, and what the disk costs a
// step.
//
// Placement (place_states): with `auto`, the fewest stages go to disk that
// bring the run's host bytes (exec::bytes_needed) within the host budget,
// taken in disk_order: the blocks from the last one back, then the head,
// then the embedding. Why that order:
//  - the optimizer updates stages in forward order, so the reads of late
//    stages run while the early (host) stages update, and their write-backs
//    while the next step's forward works on the early stages, which is the
//    order the forward needs them in;
//  - the edge stages come last because with a large vocabulary each holds
//    several blocks' parameters, and the host keeps up to
//    kStagesOfStatesInFlight of the largest disk stages in flight.
// The first kStagesOfStatesInFlight stages moved save the host nothing
// (their states come back in flight around their updates; on the CPU
// stand-in their f32 upload copies even add a little); each one after
// saves its master and states. So `auto` moves none, or at least that
// many, and the first prefix that fits is the least disk traffic in that
// order.
//
// Cost (predict_update_pipeline): the updates run on one thread in stage
// order, the disk stages' reads and write-backs on another in the FIFO
// order of Note [Stage states on disk]; the next step's forward of stage k
// waits for k's update, and for a disk stage for its write-back. The
// pipeline is simulated stage by stage with the profile's disk rates. The
// streaming executor queues a step's first reads at its start, behind the
// previous step's write-backs, and they run while it computes (Note
// [Updates during the backward]): that is simulated in the steady state,
// the first reads starting as long before the step's updates can as the
// disk was free of the previous step's write-backs.
#include <cstdint>
#include <string>
#include <vector>

#include "exec/memory_budget.h"
#include "exec/schedule.h"
#include "models/config.h"

namespace lt::plan {

// The stages (0: embed, 1..L: blocks, L + 1: head) in the order `auto`
// moves them to disk.
std::vector<int> disk_order(const models::ModelConfig& config);

struct StatePlacementChoice {
  std::vector<bool> on_disk;  // per stage; all false: everything in host memory
  int64_t host_bytes = 0;     // bytes_needed's host count with this placement
  // > 0: even every stage on disk leaves the host this many bytes short.
  int64_t short_bytes = 0;
  int disk_stages() const;
};

// The fewest stages in disk_order whose states on disk bring
// bytes_needed(config, sizes, schedule)'s host count plus `host_extra`
// (bytes the count leaves out: the planner's disk transit buffers) within
// `host_budget` bytes. sizes.states_on_disk is ignored.
StatePlacementChoice place_states(const models::ModelConfig& config, exec::TrainSizes sizes,
                                  const exec::Schedule& schedule, int64_t host_budget,
                                  int64_t host_extra = 0);

// Per stage in update (forward) order: what the pipeline model needs.
struct StageUpdate {
  double update_s = 0;   // the CPU optimizer's update of the stage
  double forward_s = 0;  // the stage's forward in the next step
  double read_s = 0;     // reading its states from disk (0: in host memory)
  double write_s = 0;    // writing them back
  bool on_disk = false;
  // Its backward in this step (the head: its whole step): with updates
  // during the backward, its gradients land when it ends.
  double backward_s = 0;
};

struct UpdatePipeline {
  // How much later the next step's forward ends than it would with every
  // update done before it (the exposed optimizer and disk time).
  double exposed_s = 0;
  double disk_busy_s = 0;  // the state thread's reads and writes, all of them
};
// `reads_at_step_start`: the executor queues the step's first reads when
// the step starts (the streaming executor), so they run during its forward
// and backward once the previous step's write-backs are done; else (the
// offload executor) only with the updates, at the backward's end.
UpdatePipeline predict_update_pipeline(const std::vector<StageUpdate>& stages,
                                       bool reads_at_step_start = false);
// The same with train.clip_with_previous_norm (Note [Updates during the
// backward], exec/streaming_early_updates.cpp): each stage's update is
// queued when its backward ends, in backward order; for the disk stages
// e0 > e1 > ..., the states thread runs R(e0) R(e1) R(e2) (queued at the
// step's start) W(e0) R(e3) W(e1) R(e4) ..., W(ej) after U(ej), which
// waits for R(ej) and ej's gradients; the next forward starts when the
// backward ends. Exposed is also at least what the optimizer or the disk
// does a step beyond the step's compute (the step cannot be shorter than
// either thread's work).
UpdatePipeline predict_update_pipeline_during_backward(const std::vector<StageUpdate>& stages);

// The bytes of states one step moves: each disk stage read once and
// written once.
struct StateTraffic {
  int64_t read_bytes = 0, write_bytes = 0;
};
StateTraffic state_traffic(const models::ModelConfig& config, const exec::TrainSizes& sizes);

// One line: how many stages on disk (which), the traffic per step and its
// seconds at the given disk rates (GB/s).
std::string describe_state_placement(const models::ModelConfig& config,
                                     const exec::TrainSizes& sizes, double disk_read_gbps,
                                     double disk_write_gbps);

}  // namespace lt::plan
