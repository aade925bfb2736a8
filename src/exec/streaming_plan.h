#pragma once
// The order in which the streaming executor runs stages in one step, derived
// from a Schedule. Stages are numbered along the chain: 0 = embed, 1..L =
// blocks 0..L-1, L+1 = head; boundary b is the output of stage b (and the
// input of stage b + 1), as in exec/schedule.h.
//
// Forward runs stages 0..L, then the head runs forward and backward per
// chunk. Backward walks L..0; when the input boundary of the next stage was
// dropped, the whole segment from the nearest kept boundary below it (or
// from the token ids) is recomputed once, keeping every recomputed boundary
// until its own backward has consumed it.
#include <vector>

#include "exec/schedule.h"

namespace lt::exec {

enum class StageWork {
  Forward,    // no-grad forward; produces boundary `stage`
  HeadStep,   // the head: forward + backward per chunk, gives d(boundary L)
  Recompute,  // no-grad forward again, to rebuild a dropped boundary
  Backward,   // forward under grad mode from the input boundary, then backward
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
// step; window w < L with the first of the recomputes before block w's
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

}  // namespace lt::exec
