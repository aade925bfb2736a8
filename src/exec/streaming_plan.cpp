#include "exec/streaming_plan.h"

#include <algorithm>

namespace lt::exec {

// Note [The fused tail]
// Every block runs forward twice a step: once without grad, to make its
// output boundary, and again under grad mode in its backward use, to
// rebuild what its backward reads. For the last blocks the first pass only
// feeds the head; so with Schedule::tail_blocks = T the last T blocks and
// the head run as one use, chunk by chunk: the blocks' forward under grad
// mode, the head's forward and backward, then the blocks' backward. Those
// blocks are computed once (on the H200 a 3B block's no-grad forward is
// ~0.65% of the step), the boundaries from L-T+1 on never exist, and the
// device holds the T blocks' saved activations for one chunk beside the
// head's working set. The use needs all its stages' weights at once: the
// first block's come through the two block slots as any use's; the later
// blocks' and the head's load into slots of their own from the use before
// (a tied head's embedding on the device is read there), so that the two
// block slots go on as before: the next backward's block loads during the
// tail step. The updates still run in forward order, so the tail's stages
// must be updated T forwards earlier than their own forwards would have
// waited: the tail waits for each when its first chunk reaches it (the
// cost model's update pipeline, more simply, at the tail's start).
// Offloaded boundaries are not supported with it (their read-back windows
// are the head's and the tail blocks', merged here).
//
// Note [The tail's own chunks]
// The tail's blocks hold their saved activations for a whole chunk at once,
// so a chunk large enough for the other uses' GEMMs (32 sequences of 1024 on
// the 3B: ~3 GB a block) leaves room for few tail blocks, and every block
// outside the tail runs twice. With Schedule::tail_chunk_sequences the tail
// step runs each chunk in pieces of that many sequences (the chunk's input
// rows sliced, its targets alike, each piece's input gradient copied into
// the chunk's dy): the other uses keep their large chunks while the tail
// holds a piece's activations per block, so it can be longer. The planner
// prices the tail's blocks and head at the piece's size.
std::vector<StageUse> plan_stage_uses(const Schedule& schedule, int num_blocks) {
  validate(schedule, num_blocks, "streaming schedule");
  const int tail_blocks = schedule.tail_blocks;
  const int first_apart = num_blocks - tail_blocks;  // the last stage run apart, forward
  std::vector<StageUse> uses;
  for (int s = 0; s <= first_apart; ++s) uses.push_back({s, StageWork::Forward});
  if (tail_blocks > 0)
    uses.push_back({first_apart + 1, StageWork::TailStep});
  else
    uses.push_back({num_blocks + 1, StageWork::HeadStep});
  // Boundaries that will be on hand when backward needs them.
  std::vector<bool> present(static_cast<size_t>(num_blocks) + 1);
  for (int b = 0; b < num_blocks; ++b) present[b] = schedule.boundaries[b] != Placement::Recompute;
  for (int s = first_apart; s >= 0; --s) {
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
    case StageWork::TailStep:
      return "tail";
  }
  return "?";
}

}  // namespace lt::exec

namespace lt::exec {

std::vector<int> window_starts(const std::vector<StageUse>& uses, int num_blocks) {
  std::vector<int> starts(uses.size(), -1);
  for (size_t u = 0; u < uses.size(); ++u) {
    const StageWork work = uses[u].work;
    if (work == StageWork::HeadStep || work == StageWork::TailStep) {
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
    const bool reads = v < uses.size() &&
                       (uses[v].work == StageWork::Recompute ||
                        uses[v].work == StageWork::Backward || uses[v].work == StageWork::TailStep);
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

StagePlan plan_stage(const Schedule& schedule, int num_blocks) {
  StagePlan plan;
  plan.num_blocks = num_blocks;
  plan.uses = plan_stage_uses(schedule, num_blocks);
  plan.prefetches = plan_prefetches(schedule, plan.uses, num_blocks);
  const auto& place = schedule.boundaries;
  const size_t n = plan.uses.size();
  plan.after.resize(n);
  plan.on_device = schedule.on_device(num_blocks);
  plan.tail_chunk_sequences = schedule.tail_chunk_sequences;
  for (size_t u = 0; u < n; ++u) {
    // The next use's stage, past the stages on the device (never loaded).
    int next = -1;
    for (size_t v = u + 1; v < n && next < 0; ++v)
      if (!plan.on_device[static_cast<size_t>(plan.uses[v].stage)]) next = plan.uses[v].stage;
    plan.next_stage.push_back(next);
    // The tail's later stages load into slots of their own a use ahead of it.
    if (u + 1 < n && plan.uses[u + 1].work == StageWork::TailStep) {
      for (int t = plan.uses[u + 1].stage + 1; t <= num_blocks + 1; ++t)
        if (!plan.on_device[static_cast<size_t>(t)]) plan.tail_slot_stages.push_back(t);
      if (!plan.tail_slot_stages.empty()) plan.tail_load_use = static_cast<int>(u);
    }
    const int s = plan.uses[u].stage;
    AfterUse& after = plan.after[u];
    switch (plan.uses[u].work) {
      case StageWork::Forward:
        // The input has been used; it stays only if the schedule keeps it.
        if (s >= 1 && place[s - 1] != Placement::Gpu) after.release.push_back(s - 1);
        // Boundary L always stays for the head.
        if (s < num_blocks && (place[s] == Placement::Host || place[s] == Placement::Disk))
          after.offload.push_back(s);
        break;
      case StageWork::HeadStep:
        after.release.push_back(num_blocks);
        after.copy_out_gradients = true;
        break;
      case StageWork::Recompute:
        break;
      case StageWork::Backward:
      case StageWork::TailStep:
        if (s >= 1) after.drop.push_back(s - 1);
        after.copy_out_gradients = true;
        break;
    }
  }
  return plan;
}

std::vector<UseHolds> device_holds(const StagePlan& plan, bool tied_embedding) {
  const int num_blocks = plan.num_blocks;
  std::vector<bool> boundary_on_device(static_cast<size_t>(num_blocks) + 1, false);
  bool boundary_gradient = false, tied_gradient = false;
  // The two weight slots, as StreamingExecutor::Impl::acquire fills them.
  int slots[2] = {-1, -1};
  int current_slot = 0;
  const auto find_slot = [&](int stage) {
    return slots[0] == stage ? 0 : slots[1] == stage ? 1 : -1;
  };
  // Every download of the step in issue order (a boundary's copy out or a
  // stage's gradients), and how many have landed: the download engine
  // runs them in order, so a wait for one lands all before it too.
  struct Download {
    int boundary = -1;
    std::vector<int> stages;  // whose gradients it moves (the tail step's: all at once)
  };
  std::vector<Download> downloads;
  size_t landed = 0;
  const auto land_through = [&](size_t index) { landed = std::max(landed, index + 1); };
  // Impl::download waits for the one before the last before issuing.
  const auto download = [&](Download d) {
    if (downloads.size() >= 2) land_through(downloads.size() - 2);
    downloads.push_back(d);
  };
  // Stages on the device whose gradients this step's backward has made:
  // held until the step's end, when their update frees them.
  std::vector<int> device_gradients;
  bool tail_slots = false;  // the tail's own slots (Note [The fused tail])
  const auto on_device = [&](int stage) { return plan.on_device[static_cast<size_t>(stage)]; };
  // `own_gradients`: the stages whose gradients the use has made (none at
  // its start).
  const auto snapshot = [&](const std::vector<int>& own_gradients) {
    std::vector<Hold> h;
    for (int stage = 0; stage < static_cast<int>(plan.on_device.size()); ++stage)
      if (on_device(stage)) h.push_back({Held::DeviceStage, stage, false});
    for (int stage : slots)
      if (stage >= 0) h.push_back({Held::Weights, stage, false});
    if (tail_slots)
      for (int stage : plan.tail_slot_stages) h.push_back({Held::Weights, stage, false});
    for (int stage : device_gradients) h.push_back({Held::Gradients, stage, false});
    for (int stage : own_gradients) h.push_back({Held::Gradients, stage, false});
    for (size_t d = landed; d < downloads.size(); ++d)
      for (int stage : downloads[d].stages) h.push_back({Held::Gradients, stage, true});
    if (tied_gradient) h.push_back({Held::TiedGradient, -1, false});
    for (int b = 0; b <= num_blocks; ++b)
      if (boundary_on_device[b]) h.push_back({Held::Boundary, b, false});
    if (boundary_gradient) h.push_back({Held::BoundaryGradient, -1, false});
    return h;
  };
  std::vector<UseHolds> out(plan.uses.size());
  for (size_t u = 0; u < plan.uses.size(); ++u) {
    const int s = plan.uses[u].stage;
    if (static_cast<int>(u) == plan.tail_load_use) tail_slots = true;
    for (int b : plan.prefetches[u].uploads) boundary_on_device[b] = true;
    // As Impl::acquire: a stage on the device takes no slot.
    int slot = on_device(s) ? current_slot : find_slot(s);
    if (slot < 0) {
      slot = 1 - current_slot;
      slots[slot] = s;
    }
    current_slot = slot;
    const int next = plan.next_stage[u];
    if (next >= 0 && next != s && find_slot(next) < 0) slots[1 - slot] = next;
    out[u].at_start = snapshot({});
    std::vector<int> own_gradients;  // in the order they go out
    switch (plan.uses[u].work) {
      case StageWork::Forward:
      case StageWork::Recompute:
        boundary_on_device[s] = true;
        break;
      case StageWork::HeadStep:
        boundary_gradient = true;
        tied_gradient = tied_embedding;
        own_gradients = {s};
        break;
      case StageWork::TailStep:
        boundary_gradient = true;
        tied_gradient = tied_embedding;
        for (int t = num_blocks + 1; t >= s; --t) own_gradients.push_back(t);  // the head's first
        break;
      case StageWork::Backward:
        own_gradients = {s};
        if (s == 0) {  // no boundary below; the embedding's gradient now is its own
          boundary_gradient = false;
          tied_gradient = false;
        }
        break;
    }
    out[u].at_end = snapshot(own_gradients);
    if (plan.uses[u].work == StageWork::TailStep) tail_slots = false;
    const AfterUse& after = plan.after[u];
    for (int b : after.release) {
      for (size_t d = landed; d < downloads.size(); ++d)
        if (downloads[d].boundary == b) land_through(d);  // Impl waits for its copy out
      boundary_on_device[b] = false;
    }
    for (int b : after.drop) boundary_on_device[b] = false;
    for (int b : after.offload) download({b, {}});
    if (after.copy_out_gradients) {
      Download gradients;  // Impl::copy_out: one download for the use's streamed stages
      for (int stage : own_gradients) {
        if (on_device(stage))
          device_gradients.push_back(stage);
        else
          gradients.stages.push_back(stage);
      }
      if (!gradients.stages.empty()) download(gradients);
    }
  }
  return out;
}

}  // namespace lt::exec
