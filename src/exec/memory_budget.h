#pragma once
// bytes_needed: the one function that counts the bytes a streaming step
// needs in each memory space (GPU, host, disk) for a model, a batch shape
// and a Schedule (docs/design.md, "Key interfaces"). The planner calls it to
// decide, the executor to allocate, and `lazytrain plan` prints it.
//
// The device computes in TrainSizes::compute_bytes per element (bf16 on a
// GPU; f32 on the CPU stand-in): its weight copies, gradients and boundary
// activations. The master weights and the optimizer live on the host in fp32.
//
// The GPU side counts the data the streaming executor runs: its stage plan
// (streaming_plan.h, plan_stage), walked by device_holds into what the
// device holds at each point of a step: the two weight slots, a stage's
// gradients while two earlier stages' downloads may still be in flight, a
// tied head's embedding gradient, and every boundary on the device (kept,
// recomputed, offloaded ones still in use or fetched ahead, and the
// boundary gradient). held_bytes gives those points' bytes; a test counts
// the executor's own device allocations at the same points on the CPU
// stand-in and finds the same bytes. Only the per-chunk working set of a
// block and of the loss is an estimate.
#include <cstdint>
#include <string>
#include <vector>

#include "exec/schedule.h"
#include "models/config.h"

namespace lt::exec {

enum class OptimizerStates {
  Fp32,      // AdamW: m and v in fp32, 8 bytes per parameter
  EightBit,  // adamw8bit: 1-byte codes for m and v + an fp32 scale per block
};

struct TrainSizes {
  int64_t batch_size = 1;  // sequences per optimizer step
  int64_t seq_len = 1;     // tokens per sequence
  OptimizerStates optimizer = OptimizerStates::Fp32;
  // Bytes per element of what the device computes with and holds: 2 (bf16)
  // on a GPU, 4 (f32) on the CPU stand-in.
  int64_t compute_bytes = 2;
  // Working sets measured on this device at this sequence length (`lazytrain
  // profile --model`, plan/stage_times.h), bytes = a + b * sequences per
  // chunk, beyond the parameters' gradients: used for a block's backward and
  // the head step, with kMeasuredWorkingSetMargin, instead of the estimates.
  // Both slopes 0: not measured.
  struct BytesFit {
    double a = 0, b = 0;
  };
  BytesFit measured_block_backward = {}, measured_head_step = {};
  // adamw8bit: elements per fp32 scale (optim.block_size). Last, so that
  // {batch, seq, optimizer, compute_bytes} still reads as it did.
  int64_t optimizer_block = 2048;
  // Where the device is: a GPU, or the CPU stand-in (which sizes the loss
  // chunks differently). Said, not guessed from compute_bytes.
  bool on_gpu = true;
  // exec.state_placement (streaming), per stage (embed, blocks, head): true
  // puts that stage's f32 masters and optimizer states on disk, with at
  // most kStagesOfStatesInFlight such stages in host memory at a time.
  // Empty: every stage's in host memory.
  std::vector<bool> states_on_disk = {};
  // exec.weight_uploads f32 (a GPU): the stages whose masters stay in host
  // memory upload them as they are, pinned, and the GPU converts them to
  // bf16 through a staging buffer of kUploadStagingBytes; no pinned bf16
  // copies of them. The disk stages still upload their bf16 copies.
  bool f32_weight_uploads = false;
  // Bytes a weight upload moves per parameter of a block.
  int64_t upload_bytes_per_parameter() const { return f32_weight_uploads ? 4 : compute_bytes; }
  bool has_measured_working_sets() const {
    return measured_block_backward.b > 0 && measured_head_step.b > 0;
  }
  bool any_states_on_disk() const;
};

// With the states on disk, the streaming executor holds at most this many
// stages' masters and optimizer states in host memory (Note [Stage states
// on disk]: reads run this many stages less one ahead of the updates).
inline constexpr int kStagesOfStatesInFlight = 3;

// The device buffer f32 weight uploads land in before the GPU converts
// them to bf16 (TrainSizes::f32_weight_uploads), a piece at a time.
inline constexpr int64_t kUploadStagingBytes = int64_t{64} << 20;

// Measured working sets are taken with this share more: one run of one
// block measured them, and the executor's own chunks may differ slightly
// (allocation order, a GEMM workspace).
inline constexpr double kMeasuredWorkingSetMargin = 0.10;

enum class MemorySpace { Gpu, Host, Disk };
const char* memory_space_name(MemorySpace space);  // "gpu", "host", "disk"

struct MemoryItem {
  MemorySpace space;
  std::string what;  // e.g. "weight double buffer (bf16)"
  int64_t bytes = 0;
};

struct MemoryBudget {
  std::vector<MemoryItem> items;
  int64_t bytes(MemorySpace space) const;  // the sum of that space's items
  void add(MemorySpace space, std::string what, int64_t bytes);
};

// Parameters of one transformer block, and of what is not in a block
// (embeddings, final norm, untied lm_head), derived from num_parameters().
int64_t block_parameters(const models::ModelConfig& config);
int64_t edge_parameters(const models::ModelConfig& config);
// The embed stage's parameters (token and gpt2's position embeddings) and
// the head stage's own (final norm and an untied lm_head); together, edge.
int64_t embed_parameters(const models::ModelConfig& config);
int64_t head_parameters(const models::ModelConfig& config);

// Parameters stage `stage` owns (0: embed, 1..L: the blocks, L + 1: the
// head), whose master and optimizer states go where TrainSizes::
// states_on_disk says.
int64_t stage_parameters(const models::ModelConfig& config, int stage);
// Elements of the weight copies stage `stage` reads: its own, and a tied
// head's the embedding's too unless `embed_on_device` (it reads the embed
// stage's device copy then).
int64_t stage_weight_elements(const models::ModelConfig& config, int stage, bool embed_on_device);

// Device bytes of stage `stage` kept on the device (Schedule::
// stages_on_device), besides its gradients: its f32 masters, its weight copy
// in the compute dtype (none when that is f32: the masters are the weights)
// and its optimizer states.
int64_t device_stage_bytes(const models::ModelConfig& config, const TrainSizes& sizes, int stage);

// Bytes of the f32 masters and optimizer states of `n` parameters.
int64_t master_and_state_bytes(int64_t n, const TrainSizes& sizes);

// The stages sizes.states_on_disk puts on disk (exec.state_placement).
struct DiskStages {
  int64_t parameters = 0;      // theirs, all together
  int count = 0;               // how many
  std::vector<int64_t> sizes;  // each one's parameters
};
DiskStages disk_stages_of(const models::ModelConfig& config, const TrainSizes& sizes);
// Their masters and optimizer states on disk, and the largest
// kStagesOfStatesInFlight of them in host memory around their updates.
void add_disk_stages(MemoryBudget& m, DiskStages disk, const TrainSizes& sizes);

// Bytes of AdamW's m and v for `n` parameters: two f32 each, or for
// adamw8bit a byte each and one f32 scale a block of `block` for each.
int64_t optimizer_state_bytes(int64_t n, OptimizerStates optimizer, int64_t block);

// Rows of one lm_head_loss chunk (autograd/fn_lm_loss.cpp): about 2^24
// logits at a time on the host, 2^28 on a GPU.
int64_t loss_chunk_rows(int64_t vocab, bool on_gpu);

// Bytes of one boundary activation for the whole batch:
// B * T * hidden * compute_bytes.
int64_t boundary_bytes(const models::ModelConfig& config, const TrainSizes& sizes);
// Bytes of the token ids and targets (i64) of sizes.batch_size sequences:
// a step's, which the batcher makes on the host (and a GPU run copies).
int64_t token_bytes(const TrainSizes& sizes);

// Boundary-sized (whole batch) device buffers the streaming executor holds
// at the worst point of a step, by kind. Boundary L (the head's input) is
// always held from its forward to the head, whatever its placement says.
struct BoundaryPeak {
  int kept = 0;        // placed on the GPU
  int recomputed = 0;  // placed "recompute": in forward as a stage's input
                       // or output, in backward rebuilt until consumed
  int offloaded = 0;   // placed on host/disk: in forward while it is the
                       // input or output of a stage (and its copy out runs),
                       // in backward from its upload (at the start of its
                       // read window, else one use ahead) until its
                       // backward has consumed it
  int gradient = 0;    // dy, the gradient of the boundary backward is at
  int total() const { return kept + recomputed + offloaded + gradient; }
};
BoundaryPeak device_boundary_peak(const Schedule& schedule, int num_blocks);

// Host buffers of disk boundaries in transit at once: in forward, the one
// copied out and two the disk may still be writing; in backward, those whose
// read has started (in their read windows, else two stage uses ahead of
// their first use; a split read's buffers exist from its first piece) until
// their backward consumes them, and two writes that
// may still be pending. At most the number of disk boundaries.
int disk_transit_buffers(const Schedule& schedule, int num_blocks);

// For every schedule that keeps boundaries 0 and L on the GPU,
// device_boundary_peak(s).total() <= (boundaries placed on the GPU) +
// longest_recompute_run(s) + kMaxTransientBoundaries when s has no read
// windows (read windows bring host boundaries back earlier, and the planner
// keeps them only when they fit). The planner holds this much room back,
// since it chooses the placements.
inline constexpr int kMaxTransientBoundaries = 2;
// disk_transit_buffers, at most, without read windows.
inline constexpr int kMaxDiskTransitBuffers = 5;

// Everything that does not depend on where boundaries go: weights, their
// buffers, optimizer state, gradient buffers, the batch's token ids and
// targets, and the working sets of chunks of `chunk_sequences` sequences
// (0: the whole batch), for any schedule that keeps boundary 0 on the
// device (as the planner's do).
MemoryBudget fixed_bytes(const models::ModelConfig& config, const TrainSizes& sizes,
                         int64_t chunk_sequences);

// The device bytes the streaming executor holds at the two points of each
// stage use (streaming_plan.h, device_holds), beside the uses' working
// sets: the token ids and targets, weight slots, gradients and boundaries.
// Per use of plan_stage(schedule); sequences of train.seq_len tokens.
struct HeldBytes {
  int64_t at_start = 0, at_end = 0;
};
std::vector<HeldBytes> held_bytes(const models::ModelConfig& config, const TrainSizes& sizes,
                                  const Schedule& schedule);

// The peak bytes per space of a step that runs `schedule`: fixed_bytes plus
// device_boundary_peak on the GPU; boundaries placed on the host, and the
// host buffers of disk boundaries in flight, on the host; disk boundaries
// on disk. The schedule must have num_hidden_layers + 1 boundaries.
MemoryBudget bytes_needed(const models::ModelConfig& config, const TrainSizes& sizes,
                          const Schedule& schedule);

// What the resident executor (exec/resident.h) holds on its device at the
// worst point of a step, in the Gpu space (the training device: the host
// when it runs on the CPU). `micro_batch`: sequences per forward (the
// trainer's train.batch_size / train.grad_accum; resident runs its
// micro-batches one after the other). sizes.compute_bytes 2: bf16 compute
// copy beside the f32 masters (train.dtype bf16 on a GPU); 4: the f32
// masters compute themselves.
//
// Counted: the f32 masters, the compute copy, gradients in the compute
// dtype (the masters read the copy's), the optimizer's m and v, the whole
// batch's token ids and targets, and the autograd graph of one micro-batch
// (add_graph_of_one_micro_batch).
MemoryBudget resident_bytes_needed(const models::ModelConfig& config, const TrainSizes& sizes,
                                   int64_t micro_batch, bool on_gpu);

// The autograd graph of one micro-batch of `micro_batch` sequences, added
// to `m` on the device: every block's saved tensors and statistics, and the
// larger of two points' transients beside them. The head's step: the final
// norm's input and output, one loss chunk's logits with their gradient
// written over them (fp32, rows as lm_head_loss chunks them), the hidden's
// gradient and, unless `lm_head_gradient_counted` (among the gradients
// already in `m`), lm_head_loss's weight-gradient sum (the engine adds it
// into .grad in place). The last block's backward: its MLP's activation
// gradients.
void add_graph_of_one_micro_batch(MemoryBudget& m, const models::ModelConfig& config,
                                  const TrainSizes& sizes, int64_t micro_batch, bool on_gpu,
                                  bool lm_head_gradient_counted);

// The offload executor's device part that does not depend on the batch:
// the weights and gradients (and ZenFlow's columns), counted exactly; a
// device smaller than these cannot run it at any micro-batch.
MemoryBudget offload_device_weights(const models::ModelConfig& config, const TrainSizes& sizes,
                                    double zenflow_topk);

// The offload executor (exec/offload.h): on the device the weights and
// gradients in the compute dtype and one micro-batch's graph, plus, for
// ZenFlow (zenflow_topk > 0), an f32 master, m and v for its share of the
// columns; on the host the f32 masters, the optimizer states, the pinned
// bf16 shadows (on a GPU) and one gradient slab set (two for ZenFlow). The
// masters and states of the stages sizes.states_on_disk names are on disk
// (add_disk_stages), with the stand-in's upload copies of them.
MemoryBudget offload_bytes_needed(const models::ModelConfig& config, const TrainSizes& sizes,
                                  int64_t micro_batch, double zenflow_topk);

// Longest run of consecutive recomputed boundaries in the schedule (0 if
// none). Backward rematerializes such a run all at once.
int longest_recompute_run(const Schedule& schedule);

}  // namespace lt::exec
