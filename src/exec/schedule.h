#pragma once
// What the streaming executor does with each boundary activation, and how
// it cuts the batch: the `Schedule` of docs/design.md ("Key interfaces"). The
// planner (src/plan/) writes one; the executor runs any valid one.
//
// Boundaries: the chain is embed -> block 0 .. block L-1 -> head, and
// boundary i (0 <= i <= L) is the hidden state entering block i (boundary
// L enters the head). Boundary 0 is the embed stage's output.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "exec/executor.h"

namespace lt::exec {

enum class Placement {
  Gpu,        // kept in device memory between forward and backward
  Host,       // offloaded to pinned host memory, brought back for backward
  Disk,       // offloaded to disk (io_uring), read back for backward
  Recompute,  // dropped; backward recomputes it from the nearest kept one before it
};

const char* placement_name(Placement p);  // "gpu", "host", "disk", "recompute"
// Throws lt::Error naming `where` (e.g. "plan.json: boundaries[3].placement").
Placement parse_placement(const std::string& name, const std::string& where);

struct Schedule {
  int64_t batch_size = 0;  // sequences per optimizer step (0: the trainer's)
  // Sequences per chunk the executor takes through one stage at a time (0:
  // each grad-accumulation micro-batch whole). Not the micro-batch: the
  // executor splits each micro-batch into chunks, never joins them. JSON:
  // "chunk_sequences"; schedules written before it was named apart say
  // "micro_batch", which is still read.
  int64_t chunk_sequences = 0;
  ExecutorKind executor = ExecutorKind::Streaming;
  std::vector<Placement> boundaries;  // size L + 1
  // Per boundary (empty, or size L + 1): the backward window in which the
  // executor starts bringing an offloaded boundary back, or -1 for its
  // default. Backward windows run from the head (window L) down to block 0
  // (window w < L: block w's backward and the recomputes just before it).
  // A host boundary's upload to the device starts when window w starts; a
  // disk boundary's read into host memory does (its upload follows one
  // stage use ahead of its first use). Boundary i is first needed in window
  // e - 1, e being the next boundary above i that is not recomputed (or L),
  // so w must be in [e, L]. The default: a host boundary's upload starts one
  // stage use ahead of its first use, a disk boundary's read two uses ahead.
  // JSON: "read_window" in the boundary's entry, left out for -1.
  std::vector<int> read_windows;
  // Per boundary (empty, or size L + 1): how a disk boundary's read is
  // split across backward windows, as {window, fraction} pieces in
  // strictly decreasing window order (the order they run), fractions > 0
  // summing to 1; an empty list reads it whole. The first piece's window is
  // the boundary's read window (where its host buffers come to exist); each
  // later piece is read when its window starts, and the boundary is
  // uploaded only after all its pieces have landed. JSON: "read_split":
  // [{"window": w, "fraction": f}, ...] in the boundary's entry.
  struct ReadPiece {
    int window = -1;
    double fraction = 0;
    bool operator==(const ReadPiece&) const = default;
  };
  std::vector<std::vector<ReadPiece>> read_splits;
  // Stages (0: embed, 1..L: blocks, L + 1: the head) whose f32 masters,
  // weight copies, gradients and optimizer states stay in device memory,
  // updated there: no upload, no gradient download, no CPU update (Note
  // [Stages on the device], exec/streaming_device_stages.cpp). Ascending;
  // empty: every stage streams. JSON: "stages_on_device": [indices].
  std::vector<int> stages_on_device;
  // The last `tail_blocks` blocks and the head run as one use, chunk by
  // chunk: the blocks' forward under grad mode, the head's forward and
  // backward, the blocks' backward (Note [The fused tail],
  // exec/streaming_plan.cpp). Those blocks are then computed once a step
  // instead of twice, and the boundaries between them never exist. 0: the
  // head runs apart. Needs every boundary on the GPU or recomputed. JSON:
  // "fused_tail": the count (true reads as 1), left out when 0.
  int tail_blocks = 0;
  // The tail step's chunks, in sequences (0: the step's chunks): each chunk
  // runs through the tail in pieces of this many rows, so that the tail's
  // blocks keep their saved activations for fewer tokens and more of them
  // fit beside the head (Note [The tail's own chunks], streaming_plan.cpp).
  // At most chunk_sequences; needs tail_blocks > 0. JSON:
  // "tail_chunk_sequences", left out when 0.
  int64_t tail_chunk_sequences = 0;
  // Per stage of a chain of `num_blocks` blocks: whether it is on the device.
  std::vector<bool> on_device(int num_blocks) const;
  // What the planner predicted (absent when written by hand).
  bool has_prediction = false;
  double predicted_step_s = 0;
  std::map<std::string, int64_t> predicted_peak_bytes;  // "gpu", "host", "disk"

  int kept_count() const;  // boundaries not recomputed
  // Runs in chunks of `chunk_sequences` given from outside the plan
  // (exec.micro_batch): the planner's predictions, made for its own chunk,
  // no longer hold and are dropped.
  void use_chunk(int64_t chunk_sequences);
  // The window boundary's read back starts in: its read split's first
  // window, else read_windows[boundary], else -1.
  int read_window(int boundary) const;
  // read_splits[boundary], or an empty list.
  const std::vector<ReadPiece>& read_split(int boundary) const;
  // The first window in which boundary i may be read back: e above.
  int first_read_window(int boundary) const;
  // Every boundary kept on the device (no recompute, no offload).
  static Schedule all_gpu(int num_blocks);
  // Boundary i kept on the device when i % k == 0, else recomputed
  // (MegaTrain's default policy with k = 4).
  static Schedule every_kth_gpu(int num_blocks, int k);
};

// `s` with stages added to its stages_on_device in the forward's order
// (the embedding, the blocks, the head), each one `keep(with it)` accepts;
// a tied head reads the embedding, so it is tried only with stage 0.
// Note [Stages on the device] (the planner's and exec.mode auto's rule).
Schedule with_stages_on_device(Schedule s, int num_blocks, bool tied_embedding,
                               const std::function<bool(const Schedule&)>& keep);

// Structural checks for a chain of `num_blocks` blocks: the boundary count,
// batch sizes, read windows (only for host and disk boundaries, in
// [first_read_window, L]) and read splits (disk boundaries; windows in that
// range, decreasing, fractions summing to 1, agreeing with read_window). Throws lt::Error naming
// `source` and the field.
void validate(const Schedule& schedule, int num_blocks, const std::string& source);

// " in pieces of N sequences" for a tail with chunks of its own, else "".
std::string tail_chunk_phrase(const Schedule& schedule);

nlohmann::json to_json(const Schedule& schedule);
// Throws lt::Error naming `source` and the offending field.
Schedule schedule_from_json(const nlohmann::json& j, const std::string& source);
Schedule load_schedule(const std::string& path);
void save_schedule(const Schedule& schedule, const std::string& path);  // atomic

}  // namespace lt::exec
