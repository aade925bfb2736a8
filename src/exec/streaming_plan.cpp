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

namespace lt::exec {

std::vector<int> window_starts(const std::vector<StageUse>& uses, int num_blocks) {
  std::vector<int> starts(uses.size(), -1);
  for (size_t u = 0; u < uses.size(); ++u) {
    const StageWork work = uses[u].work;
    if (work == StageWork::HeadStep) {
      starts[u] = num_blocks;
    } else if (work != StageWork::Forward && u > 0 && uses[u - 1].work != StageWork::Recompute) {
      size_t b = u;  // the backward this use leads to
      while (uses[b].work != StageWork::Backward) ++b;
      starts[u] = uses[b].stage - 1;
    }
  }
  return starts;
}

std::vector<Prefetch> plan_prefetches(const Schedule& schedule, const std::vector<StageUse>& uses,
                                      int num_blocks) {
  const auto& place = schedule.boundaries;
  const auto on = [&](int b, Placement p) { return b >= 0 && b < num_blocks && place[b] == p; };
  // The input boundary of use v when it reads one back (recompute, backward).
  const auto read_input = [&](size_t v) {
    const bool reads = v < uses.size() && (uses[v].work == StageWork::Recompute ||
                                           uses[v].work == StageWork::Backward);
    return reads ? uses[v].stage - 1 : -1;
  };
  const std::vector<int> starts = window_starts(uses, num_blocks);
  std::vector<bool> read(place.size(), false), uploaded(place.size(), false);
  std::vector<int> next_piece(place.size(), 1);  // of each split read
  std::vector<Prefetch> out(uses.size());
  for (size_t u = 0; u < uses.size(); ++u) {
    Prefetch& p = out[u];
    const auto disk_read = [&](int b) {
      if (!on(b, Placement::Disk) || read[b]) return;
      read[b] = true;
      p.disk_reads.push_back(b);
    };
    // Issues boundary b's split pieces up to window `window` (-1: all).
    const auto read_pieces = [&](int b, int window) {
      const auto& split = schedule.read_split(b);
      while (read[b] && next_piece[b] < static_cast<int>(split.size()) &&
             split[next_piece[b]].window >= window)
        p.disk_read_pieces.push_back({b, next_piece[b]++});
    };
    const auto upload = [&](int b) {
      if (!(on(b, Placement::Host) || on(b, Placement::Disk)) || uploaded[b]) return;
      disk_read(b);
      read_pieces(b, -1);
      uploaded[b] = true;
      p.uploads.push_back(b);
    };
    if (starts[u] >= 0) {
      for (int b = 0; b < num_blocks; ++b) {
        if (schedule.read_window(b) == starts[u] && place[b] == Placement::Disk) disk_read(b);
        if (schedule.read_window(b) == starts[u] && place[b] == Placement::Host) upload(b);
        if (place[b] == Placement::Disk) read_pieces(b, starts[u]);
      }
    }
    upload(read_input(u + 1));
    const int ahead = read_input(u + 2);
    if (ahead >= 0 && schedule.read_window(ahead) < 0) disk_read(ahead);
  }
  return out;
}

}  // namespace lt::exec
