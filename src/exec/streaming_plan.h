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

}  // namespace lt::exec
