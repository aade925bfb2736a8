#include "exec/streaming_plan.h"

namespace lt::exec {

std::vector<StageUse> plan_stage_uses(const Schedule& schedule, int num_blocks) {
  validate(schedule, num_blocks, "streaming schedule");
  const int last_block_stage = num_blocks;  // stage L
  std::vector<StageUse> uses;
  for (int s = 0; s <= last_block_stage; ++s) uses.push_back({s, StageWork::Forward});
  uses.push_back({last_block_stage + 1, StageWork::HeadStep});
  // Boundaries that will be on hand when backward needs them.
  std::vector<bool> present(static_cast<size_t>(num_blocks) + 1);
  for (int b = 0; b < num_blocks; ++b) present[b] = schedule.boundaries[b] != Placement::Recompute;
  for (int s = last_block_stage; s >= 0; --s) {
    if (s >= 1 && !present[s - 1]) {
      int kept = s - 2;  // nearest boundary below that is on hand; -1 = the token ids
      while (kept >= 0 && !present[kept]) --kept;
      for (int t = kept + 1; t <= s - 1; ++t) {
        uses.push_back({t, StageWork::Recompute});
        present[t] = true;
      }
    }
    uses.push_back({s, StageWork::Backward});
  }
  return uses;
}

const char* stage_work_name(StageWork work) {
  switch (work) {
    case StageWork::Forward:
      return "forward";
    case StageWork::HeadStep:
      return "head";
    case StageWork::Recompute:
      return "recompute";
    case StageWork::Backward:
      return "backward";
  }
  return "?";
}

}  // namespace lt::exec
