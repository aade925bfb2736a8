#pragma once
// The order in which the streaming executor runs stages in one step, derived
// from a Schedule. Stages are numbered along the chain: 0 = embed, 1..L =
// blocks 0..L-1, L+1 = head; boundary b is the output of stage b (and the
// input of stage b + 1), as in exec/schedule.h.
//
// Forward runs stages 0..L, then the head runs forward and backward per
// chunk (with Schedule::tail_blocks = T, forward runs 0..L-T and the tail
// step runs blocks L-T+1..L and the head per chunk). Backward walks L..0; when the input boundary
// of the next stage was dropped, the whole segment from the nearest kept boundary below it (or from
// the token ids) is recomputed once, keeping every recomputed boundary until its own backward has
// consumed it.
//
// A StagePlan is that order with everything the executor does around each
// use: the read-backs it starts before, the weights it loads ahead, and the
// boundaries and gradients it lets go of after. The executor runs it, and
// device_holds walks it into what the device holds at each point of the
// step, which exec::bytes_needed counts: the budget and the execution are
// one piece of data (as ggml's graph allocator measures the graph it runs).
#include <cstdint>
#include <vector>

#include "exec/schedule.h"

namespace lt::exec {

enum class StageWork {
  Forward,    // no-grad forward; produces boundary `stage`
  HeadStep,   // the head: forward + backward per chunk, gives d(boundary L)
  Recompute,  // no-grad forward again, to rebuild a dropped boundary
  Backward,   // forward under grad mode from the input boundary (its output
              // unread: StageContext::output_unread), then backward
  TailStep,   // Schedule::tail_blocks = T: the last T blocks (`stage` = L-T+1,
              // the first) and the head per chunk, forward under grad mode
              // and backward; gives d(boundary L-T) (Note [The fused tail],
              // streaming_plan.cpp)
};

struct StageUse {
  int stage = 0;
  StageWork work = StageWork::Forward;
  bool operator==(const StageUse&) const = default;
};

// Throws lt::Error when the schedule does not fit `num_blocks`.
std::vector<StageUse> plan_stage_uses(const Schedule& schedule, int num_blocks);

const char* stage_work_name(StageWork work);

// Per use of `uses` (plan_stage_uses): the backward window (Schedule::
// read_windows) that starts with it, or -1. Window L starts with the head
// step (or the tail step); window w < L with the first of the recomputes before block w's
// backward, or with that backward when nothing is recomputed for it.
std::vector<int> window_starts(const std::vector<StageUse>& uses, int num_blocks);

// What the executor does about offloaded boundaries before running use u:
// the boundaries whose read back starts now (the schedule's read windows,
// or its defaults: a disk read two uses ahead of the first use, an upload
// one use ahead). Walked identically by the executor and by bytes_needed.
struct Prefetch {
  std::vector<int> disk_reads;  // disk boundaries whose read into host memory starts
                                // (their first piece, when their read is split)
  // Later pieces of split reads (Schedule::read_splits) issued now, in the
  // windows the schedule gives them: (boundary, piece index >= 1). Any
  // piece not yet issued when its boundary is uploaded is issued just
  // before the upload.
  struct Piece {
    int boundary = -1;
    int piece = 0;
    bool operator==(const Piece&) const = default;
  };
  std::vector<Piece> disk_read_pieces;
  std::vector<int> uploads;  // offloaded boundaries whose upload to the device starts
};
std::vector<Prefetch> plan_prefetches(const Schedule& schedule, const std::vector<StageUse>& uses,
                                      int num_blocks);

// What the executor does once a use has computed, in this order.
struct AfterUse {
  // Boundaries whose device copy is freed (a forward's input the schedule
  // does not keep, the head's input), once their copy out has landed.
  std::vector<int> release;
  // Boundaries consumed for good (a backward's input): every copy freed.
  std::vector<int> drop;
  // Boundaries whose copy out to the host starts (a forward's output placed
  // on the host or disk; a disk one goes on to the disk from there).
  std::vector<int> offload;
  // The gradients of the parameters the stage owns start downloading to
  // the host (the head step and every backward; the tail step's head's
  // first, then its blocks', last to first).
  bool copy_out_gradients = false;
};

struct StagePlan {
  int num_blocks = 0;
  std::vector<StageUse> uses;
  std::vector<Prefetch> prefetches;  // per use: started before it computes
  // Per use: the stage whose weights start loading into the other slot
  // while it computes (the next use's that is not on the device; -1 when
  // none is left).
  std::vector<int> next_stage;
  // Per stage: kept on the device (Schedule::stages_on_device), never loaded.
  std::vector<bool> on_device;
  // Schedule::tail_blocks: the tail's stages past its first (its later
  // blocks and the head) that are not on the device, in the order they
  // run. Each loads into a weight slot of its own at the start of
  // tail_load_use (the use before the tail step) and holds it until the
  // tail step ends; tail_load_use is -1 when there are none (Note [The
  // fused tail]).
  std::vector<int> tail_slot_stages;
  int tail_load_use = -1;
  // Schedule::tail_chunk_sequences (0: the step's chunks).
  int64_t tail_chunk_sequences = 0;
  std::vector<AfterUse> after;  // per use
};

// Throws lt::Error when the schedule does not fit `num_blocks`.
StagePlan plan_stage(const Schedule& schedule, int num_blocks);

// Something the device holds between stage computations.
enum class Held {
  Weights,           // a stage's weight copies in a slot (a tied head's include the embedding)
  Gradients,         // the gradients of the parameters a stage owns
  TiedGradient,      // a tied head's embedding gradient, from the head step to the embed backward
  Boundary,          // a boundary activation, whole batch
  BoundaryGradient,  // the gradient of the boundary backward is at, whole batch
  DeviceStage,       // a stage on the device: its f32 masters, weight copies (when the
                     // compute dtype is not f32) and optimizer states, for good
};
struct Hold {
  Held what = Held::Weights;
  int index = -1;  // the stage (weights, gradients) or the boundary; -1 for the others
  // Gradients downloading: the executor lets at most two downloads be in
  // flight, and their device memory is held until they land.
  bool in_flight = false;
  bool operator==(const Hold&) const = default;
};
// What the device holds at two points of each use, besides the token ids
// and targets (the whole step) and the use's own working set (transient,
// freed when it ends): at its start, once its weights are loaded and its
// read-backs issued; at its end, once it has computed and before the
// executor lets anything go (AfterUse). Downloads are counted as in flight
// until the executor waits for them (or for a later one): the most the
// device can hold, whatever the copy engine's speed.
struct UseHolds {
  std::vector<Hold> at_start, at_end;
};
// `tied_embedding`: the head reads the embedding matrix, and its step
// leaves that matrix's gradient on the device for the embed stage's
// backward to add to.
std::vector<UseHolds> device_holds(const StagePlan& plan, bool tied_embedding);

}  // namespace lt::exec
