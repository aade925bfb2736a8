#include "exec/memory_budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "exec/streaming_plan.h"
#include "models/causal_lm.h"
#include "ops/classifier.h"

namespace lt::exec {

namespace {

constexpr int64_t kBf16 = 2;
constexpr int64_t kFp32 = 4;
constexpr int64_t kTokenId = 8;  // token ids and targets are i64
// Disk offload writes in 4 KiB-aligned units (O_DIRECT).
constexpr int64_t kDiskAlign = 4096;

// Elements a block saves per token for its backward (nn/block.cpp,
// autograd/fn_activations.cpp): the block input and the normed input (2h),
// q, k, v after RoPE and the attention output (2q + 2kv), the residual
// after attention and its normed copy (2h), and the MLP's: SwiGLU saves
// gate and up (the fused swiglu recomputes act(gate)) and down_proj its
// input act(gate)*up (3 ffn); gpt2's GELU saves up and down_proj's input
// (2 ffn). qk-norm saves q and k before their norm too. Attention scores
// are never stored (the attention kernels recompute them), the softmax
// statistics are negligible. The resident budget counts these.
int64_t block_saved_elements_per_token(const models::ModelConfig& c) {
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  const int64_t ffn_saved = c.hidden_act == models::Activation::Silu ? 3 : 2;
  int64_t n = 4 * c.hidden_size + 2 * q + 2 * kv + ffn_saved * c.intermediate_size;
  if (c.qk_norm) n += q + kv;
  return n;
}

// Bytes per token of the f32 statistics a block saves beside those tensors
// (ops/norm.h, ops/attention.h): each norm's rstd (LayerNorm's mean too),
// qk-norm's per head, and the attention's log-sum-exp per query head. The
// demo's are 6 floats against 2176 elements; the resident count, which
// must not fall below what is measured, adds them.
int64_t block_statistics_bytes_per_token(const models::ModelConfig& c) {
  const int64_t per_norm = c.is_gpt2() ? 2 : 1;
  int64_t n = 2 * per_norm + c.num_attention_heads;
  if (c.qk_norm) n += c.num_attention_heads + c.num_key_value_heads;
  return n * kFp32;
}

// Elements per token a block's backward holds beyond the graph's saved
// tensors at its worst point (autograd frees a node's saved tensors once
// its backward has run): the activation's backward in the MLP of the
// first block to run. Alive there: the gradient of the block's output (h),
// which the residual add keeps for the attention half; down_proj's input
// gradient (ffn); the activation's input gradients (SwiGLU: gate's and
// up's, 2 ffn; GELU: up's, ffn); less down_proj's saved input, freed by
// then (ffn). The attention half holds less: by then the MLP's saved
// tensors (2h + 2 or 3 ffn) are freed, more than its q, k, v and output
// gradients take. On the demo (h 128, ffn 384, f32) the step's measured
// peak grows by 21056 bytes a token: 16 of ids, 17456 saved and these 896
// elements.
int64_t block_backward_elements_per_token(const models::ModelConfig& c) {
  const int64_t activation_inputs = c.hidden_act == models::Activation::Silu ? 2 : 1;
  return c.hidden_size + activation_inputs * c.intermediate_size;
}

// Bytes a block saves for its backward over `tokens` tokens, computing in
// `cb` bytes per element, statistics included.
int64_t block_saved_bytes(const models::ModelConfig& c, int64_t tokens, int64_t cb) {
  return tokens * (block_saved_elements_per_token(c) * cb + block_statistics_bytes_per_token(c));
}

// Half the streaming budget's estimate of a block's backward working set
// when none was measured: the saved tensors as if the MLP kept four
// [tokens x ffn] tensors (one more than SwiGLU saves, two more than GELU),
// a generous allowance the measured working sets replace on a GPU.
int64_t block_estimate_elements_per_token(const models::ModelConfig& c) {
  const int64_t ffn_saved = c.hidden_act == models::Activation::Silu ? 3 : 2;
  return block_saved_elements_per_token(c) + (4 - ffn_saved) * c.intermediate_size;
}

void add_optimizer_states(MemoryBudget& m, MemorySpace space, int64_t n, const TrainSizes& sizes) {
  m.add(space,
        sizes.optimizer == OptimizerStates::Fp32
            ? "AdamW m and v (fp32)"
            : "AdamW m and v (8-bit codes + fp32 block scales)",
        optimizer_state_bytes(n, sizes.optimizer, sizes.optimizer_block));
}

}  // namespace

int64_t optimizer_state_bytes(int64_t n, OptimizerStates optimizer, int64_t block) {
  if (optimizer == OptimizerStates::Fp32) return 2 * n * kFp32;
  return 2 * n + 2 * ((n + block - 1) / block) * kFp32;
}

int64_t loss_chunk_rows(int64_t vocab, bool on_gpu) {
  const int64_t logits = on_gpu ? int64_t{1} << 28 : int64_t{1} << 24;
  return std::max<int64_t>(1, logits / vocab);
}

const char* memory_space_name(MemorySpace space) {
  switch (space) {
    case MemorySpace::Gpu:
      return "gpu";
    case MemorySpace::Host:
      return "host";
    case MemorySpace::Disk:
      return "disk";
  }
  return "?";
}

int64_t MemoryBudget::bytes(MemorySpace space) const {
  int64_t sum = 0;
  for (const auto& item : items)
    if (item.space == space) sum += item.bytes;
  return sum;
}

void MemoryBudget::add(MemorySpace space, std::string what, int64_t bytes) {
  if (bytes > 0) items.push_back({space, std::move(what), bytes});
}

int64_t embed_parameters(const models::ModelConfig& c) {
  const int64_t positions = c.is_gpt2() ? c.max_position_embeddings * c.hidden_size : 0;
  return c.vocab_size * c.hidden_size + positions;
}

int64_t head_parameters(const models::ModelConfig& c) {
  const int64_t final_norm = c.is_gpt2() ? 2 * c.hidden_size : c.hidden_size;
  return final_norm + (c.tie_word_embeddings ? 0 : c.vocab_size * c.hidden_size);
}

int64_t edge_parameters(const models::ModelConfig& c) {
  return embed_parameters(c) + head_parameters(c);
}

int64_t block_parameters(const models::ModelConfig& c) {
  LT_CHECK(c.num_hidden_layers > 0, "memory budget: the model has no layers");
  return (c.num_parameters() - edge_parameters(c)) / c.num_hidden_layers;
}

bool TrainSizes::any_states_on_disk() const {
  return std::find(states_on_disk.begin(), states_on_disk.end(), true) != states_on_disk.end();
}

int64_t stage_parameters(const models::ModelConfig& c, int stage) {
  const int L = static_cast<int>(c.num_hidden_layers);
  LT_CHECK(stage >= 0 && stage <= L + 1, "memory budget: no stage ", stage, " in a model of ", L,
           " blocks");
  if (stage == 0) return embed_parameters(c);
  return stage <= L ? block_parameters(c) : head_parameters(c);
}

int64_t device_stage_bytes(const models::ModelConfig& c, const TrainSizes& s, int stage) {
  const int64_t n = stage_parameters(c, stage);
  const int64_t weight_copy = s.compute_bytes == kFp32 ? 0 : n * s.compute_bytes;
  return n * kFp32 + weight_copy + optimizer_state_bytes(n, s.optimizer, s.optimizer_block);
}

int64_t master_and_state_bytes(int64_t n, const TrainSizes& s) {
  return n * kFp32 + optimizer_state_bytes(n, s.optimizer, s.optimizer_block);
}

int64_t boundary_bytes(const models::ModelConfig& c, const TrainSizes& s) {
  return s.batch_size * s.seq_len * c.hidden_size * s.compute_bytes;
}

int64_t stage_weight_elements(const models::ModelConfig& c, int stage, bool embed_on_device) {
  const int L = static_cast<int>(c.num_hidden_layers);
  if (stage == 0) return embed_parameters(c);
  if (stage <= L) return block_parameters(c);
  const bool reads_embedding = c.tie_word_embeddings && !embed_on_device;
  return head_parameters(c) + (reads_embedding ? c.vocab_size * c.hidden_size : 0);
}

int64_t token_bytes(const TrainSizes& s) {
  return 2 * s.batch_size * s.seq_len * kTokenId;  // the token ids and the targets
}

namespace {

// Bytes of one thing the device holds (streaming_plan.h), in the compute
// dtype but for a stage on the device (`on_device`: per stage).
int64_t hold_bytes(const models::ModelConfig& c, const TrainSizes& s, const Hold& h,
                   const std::vector<bool>& on_device) {
  switch (h.what) {
    case Held::Weights:
      return stage_weight_elements(c, h.index, !on_device.empty() && on_device[0]) *
             s.compute_bytes;
    case Held::DeviceStage:
      return device_stage_bytes(c, s, h.index);
    case Held::Gradients:
      return stage_parameters(c, h.index) * s.compute_bytes;
    case Held::TiedGradient:
      return c.vocab_size * c.hidden_size * s.compute_bytes;
    case Held::Boundary:
    case Held::BoundaryGradient:
      return boundary_bytes(c, s);
  }
  return 0;
}

// What a stage use holds on the device besides boundaries, at its end
// (device_holds: the weight slots, the gradients being built, downloading
// and a tied head's), with its working set. Slots and gradients in bytes
// of the compute dtype, the working set in bytes. The uses' largest sum is
// the step's fixed peak: the three never peak at the same use (the weights
// at the head or the embed, the gradients where the head's are still
// downloading, the working set at a block's backward), and adding each
// one's worst overstated the H200 plans' peaks by 0.6-1.25 GB.
struct UseHold {
  std::string use;
  int64_t slot_bytes = 0, grad_bytes = 0, working_set = 0;
  int64_t bytes() const { return slot_bytes + grad_bytes + working_set; }
};

const char* work_phrase(StageWork work) {
  switch (work) {
    case StageWork::Forward:
      return "forward";
    case StageWork::Recompute:
      return "recompute";
    default:
      return "backward";
  }
}

// A block's backward and the head step's working sets for chunks of some
// size.
struct WorkingSets {
  int64_t block = 0, head = 0;
};

// `ws`: a block's backward and the head step's working sets, `tail_ws` those
// of the tail step's pieces of `tail_tokens` tokens (Note [The tail's own
// chunks]). A forward or a recompute holds less than a block's backward (which
// runs the same forward under grad mode), so that bounds them. The embed
// stage's backward makes a dense embedding gradient per chunk; it is added
// into the .grad already there in place, so both are held for a moment:
// with a tied embedding (the head's gradient) or `several_chunks` (an
// earlier chunk's). The first use that holds the most, in the plan's order.
UseHold largest_use_hold(const models::ModelConfig& c, const TrainSizes& s, const StagePlan& plan,
                         int64_t chunk_tokens, bool several_chunks, const WorkingSets& ws,
                         const WorkingSets& tail_ws, int64_t tail_tokens) {
  const int64_t cb = s.compute_bytes;
  const int64_t chunk_hidden = chunk_tokens * c.hidden_size * cb;
  const std::vector<UseHolds> holds = device_holds(plan, c.tie_word_embeddings);
  UseHold best;
  for (size_t u = 0; u < plan.uses.size(); ++u) {
    const StageUse use = plan.uses[u];
    UseHold now;
    for (const Hold& h : holds[u].at_end) {
      if (h.what == Held::Weights) now.slot_bytes += hold_bytes(c, s, h, plan.on_device);
      if (h.what == Held::Gradients || h.what == Held::TiedGradient)
        now.grad_bytes += hold_bytes(c, s, h, plan.on_device);
    }
    if (use.work == StageWork::HeadStep) {
      now.use = "the head step";
      now.working_set = ws.head;
    } else if (use.work == StageWork::TailStep) {
      // The blocks' saved activations for a chunk stay through the head's
      // step, and their backwards follow, the last first (Note [The fused
      // tail]): bounded by the two working sets together and the other
      // blocks' saved tensors.
      const int tail_blocks = plan.num_blocks - use.stage + 1;
      now.use = tail_blocks == 1
                    ? std::string("the tail step (the last block and the head)")
                    : fmt::format("the tail step (the last {} blocks and the head)", tail_blocks);
      now.working_set = tail_ws.block + tail_ws.head +
                        (tail_blocks - 1) * block_saved_elements_per_token(c) * tail_tokens * cb;
    } else if (use.stage == 0) {
      now.use = fmt::format("the embed stage's {}", work_phrase(use.work));
      const bool adds_dense =
          use.work == StageWork::Backward && (c.tie_word_embeddings || several_chunks);
      now.working_set = (adds_dense ? embed_parameters(c) * cb : 0) + chunk_hidden;
    } else {
      now.use = use.work == StageWork::Backward
                    ? fmt::format("block {}'s backward", use.stage - 1)
                    : fmt::format("a block's {}", work_phrase(use.work));
      now.working_set = ws.block;
    }
    if (now.bytes() > best.bytes()) best = now;
  }
  return best;
}

// A step's peak of boundary-sized buffers, over both points of every use.
BoundaryPeak boundary_peak_of(const Schedule& schedule, const std::vector<UseHolds>& holds,
                              int num_blocks) {
  const auto& place = schedule.boundaries;
  BoundaryPeak peak;
  for (const UseHolds& use : holds) {
    for (const std::vector<Hold>* point : {&use.at_start, &use.at_end}) {
      BoundaryPeak now;
      for (const Hold& h : *point) {
        if (h.what == Held::BoundaryGradient) {
          ++now.gradient;
        } else if (h.what == Held::Boundary) {
          if (h.index == num_blocks || place[h.index] == Placement::Gpu)
            ++now.kept;
          else if (place[h.index] == Placement::Recompute)
            ++now.recomputed;
          else
            ++now.offloaded;
        }
      }
      if (now.total() > peak.total()) peak = now;
    }
  }
  return peak;
}

// Everything that does not depend on where boundaries go, for the uses of
// `plan` (fixed_bytes).
MemoryBudget fixed_bytes_of(const models::ModelConfig& c, const TrainSizes& s,
                            int64_t chunk_sequences, const StagePlan& plan);

}  // namespace

MemoryBudget fixed_bytes(const models::ModelConfig& c, const TrainSizes& s,
                         int64_t chunk_sequences) {
  // Every schedule that keeps boundary 0 on the device has the all-GPU
  // schedule's uses but for recomputes, which hold less than the backward
  // after them (memory_budget_test.cpp checks it).
  const int L = static_cast<int>(c.num_hidden_layers);
  return fixed_bytes_of(c, s, chunk_sequences, plan_stage(Schedule::all_gpu(L), L));
}

namespace {

WorkingSets working_sets(const models::ModelConfig& c, const TrainSizes& s, int64_t chunk) {
  const int64_t chunk_tokens = chunk * s.seq_len;
  const int64_t cb = s.compute_bytes;
  // A block's saved tensors for one micro-batch, and as much again for the
  // gradients alive during its backward (an estimate, not a measurement).
  const int64_t block_working_set = 2 * block_estimate_elements_per_token(c) * chunk_tokens * cb;
  // The head step (autograd/fn_lm_loss.cpp, in the compute dtype: bf16 on a
  // GPU, f32 on the CPU stand-in), beside the lm_head weight gradient that
  // largest_use_hold counts among the gradients alive. A loss chunk (2^28 logits on a GPU: 1766
  // rows of a 151936 vocabulary) holds its logits, with their gradient written over them (L),
  // beside lm_head_loss's weight-gradient sum, which the GEMM adds each chunk into (W); the
  // autograd engine then adds that sum into the parameter's .grad in place (ops::add_). And the
  // head's [tokens x hidden] tensors: the final norm's output, its gradient and the norm's input
  // gradient, and a loss chunk's hidden gradient. Before the in-place gradient and sum (H200, 3B
  // shape, batch 64 in chunks of 8, dc2ea21) the head step peaked 1.48 GB over the rest: 3W and
  // those tensors.
  const bool on_gpu = s.on_gpu;
  const int64_t loss_rows = std::min(chunk_tokens, loss_chunk_rows(c.vocab_size, on_gpu));
  const int64_t chunk_logits = loss_rows * c.vocab_size * cb;
  const int64_t weight_grad = c.vocab_size * c.hidden_size * cb;
  int64_t head_working_set = chunk_logits + weight_grad;
  head_working_set += (3 * chunk_tokens + loss_rows) * c.hidden_size * cb;
  // The fused head (the default on a GPU, ops/classifier.h) holds the same
  // chunk, gradients and [tokens x hidden] tensors, but with a vocabulary
  // that is not a multiple of kLmHeadPadVocabTo also a padded copy of the
  // weight, and its weight gradient has the padded rows.
  const int64_t padded_vocab =
      (c.vocab_size + ops::kLmHeadPadVocabTo - 1) / ops::kLmHeadPadVocabTo * ops::kLmHeadPadVocabTo;
  if (on_gpu && ops::fused_lm_head_enabled() && padded_vocab != c.vocab_size)
    head_working_set += (2 * padded_vocab - c.vocab_size) * c.hidden_size * cb;
  int64_t block_set = block_working_set;
  const bool measured = s.has_measured_working_sets();
  if (measured) {
    const auto with_margin = [&](const TrainSizes::BytesFit& f) {
      const double bytes = std::max(0.0, f.a + f.b * static_cast<double>(chunk));
      return static_cast<int64_t>(std::ceil(bytes * (1 + kMeasuredWorkingSetMargin)));
    };
    block_set = with_margin(s.measured_block_backward);
    head_working_set = with_margin(s.measured_head_step);
  }
  return {block_set, head_working_set};
}

MemoryBudget fixed_bytes_of(const models::ModelConfig& c, const TrainSizes& s,
                            int64_t chunk_sequences, const StagePlan& plan) {
  LT_CHECK(s.batch_size > 0 && s.seq_len > 0,
           "memory budget: batch size and sequence length must be > 0");
  const int64_t chunk =
      chunk_sequences > 0 ? std::min(chunk_sequences, s.batch_size) : s.batch_size;
  const int64_t chunk_tokens = chunk * s.seq_len;
  LT_CHECK(s.compute_bytes > 0, "memory budget: compute_bytes must be > 0");
  const int64_t n = c.num_parameters();
  MemoryBudget m;
  using enum MemorySpace;
  m.add(Gpu, "token ids and targets (i64)", token_bytes(s));
  const WorkingSets ws = working_sets(c, s, chunk);
  const int64_t block_set = ws.block, head_working_set = ws.head;
  const bool measured = s.has_measured_working_sets();
  // Note [The tail's own chunks] (streaming_plan.cpp): the tail step's
  // pieces hold the working sets of their own size.
  const int64_t tail_chunk =
      plan.tail_chunk_sequences > 0 ? std::min(plan.tail_chunk_sequences, chunk) : chunk;
  const WorkingSets tail_ws = working_sets(c, s, tail_chunk);
  // Each use frees its working set before the next stage computes, so the
  // step needs the largest use's, with that use's weights and gradients.
  const UseHold peak = largest_use_hold(c, s, plan, chunk_tokens, chunk < s.batch_size, ws, tail_ws,
                                        tail_chunk * s.seq_len);
  m.add(Gpu, fmt::format("weight slots at the peak use ({})", peak.use), peak.slot_bytes);
  m.add(Gpu,
        "gradients alive there (its own, two downloading, a tied embedding's, the stages on "
        "the device's)",
        peak.grad_bytes);
  int64_t device_stages = 0, device_stage_count = 0;
  for (size_t stage = 0; stage < plan.on_device.size(); ++stage) {
    if (!plan.on_device[stage]) continue;
    device_stages += device_stage_bytes(c, s, static_cast<int>(stage));
    ++device_stage_count;
  }
  if (device_stage_count > 0)
    m.add(Gpu,
          fmt::format("the {} stages on the device: f32 masters, weight copies, optimizer states",
                      device_stage_count),
          device_stages);
  m.add(Gpu,
        fmt::format("working set there, one micro-batch ({}; a block's backward {:.3f} GB, the "
                    "head step's {:.3f} GB)",
                    measured ? fmt::format("as measured, +{:.0f}%", 100 * kMeasuredWorkingSetMargin)
                             : std::string("estimated: a block's saved tensors x2; a loss chunk's "
                                           "logits, the lm_head weight gradient's sum and the "
                                           "head's [tokens x hidden] tensors"),
                    static_cast<double>(block_set) / 1e9,
                    static_cast<double>(head_working_set) / 1e9),
        peak.working_set);
  // Host, and the stages whose states live on disk.
  const DiskStages disk = disk_stages_of(c, s);
  const int64_t on_disk = disk.parameters, disk_stages = disk.count;
  const int stage_count = static_cast<int>(c.num_hidden_layers) + 2;
  const int64_t on_host = n - on_disk;
  const std::string of_host =
      on_disk > 0 ? fmt::format(" of {} stages", stage_count - disk_stages) : std::string();
  if (s.f32_weight_uploads) {
    m.add(Gpu, "f32 weight uploads' staging buffer", kUploadStagingBytes);
    m.add(Host, "master weights (fp32), pinned: the GPU uploads them" + of_host, on_host * kFp32);
  } else {
    m.add(Host, "master weights (fp32)" + of_host, on_host * kFp32);
  }
  add_optimizer_states(m, Host, on_host, s);
  if (!s.f32_weight_uploads)
    m.add(Host, "weights streamed to the device, bf16 copies (pinned on a GPU)" + of_host,
          on_host * kBf16);
  if (on_disk > 0) {
    add_disk_stages(m, disk, s);
    // The uploads' source, since the masters are not there to copy from.
    m.add(Host, "weights of the disk stages streamed to the device, pinned (compute dtype)",
          on_disk * s.compute_bytes);
  }
  // Clipping needs the global gradient norm before any update, so every
  // gradient is held until backward ends.
  m.add(Host, "gradients, pinned", n * s.compute_bytes);
  return m;
}

// The lm_head weight gradient's bytes: the fused head's (a GPU's default,
// ops/classifier.h) has the padded rows.
int64_t lm_head_gradient_bytes(const models::ModelConfig& c, int64_t cb, bool on_gpu) {
  if (!on_gpu || !ops::fused_lm_head_enabled()) return c.vocab_size * c.hidden_size * cb;
  const int64_t padded =
      (c.vocab_size + ops::kLmHeadPadVocabTo - 1) / ops::kLmHeadPadVocabTo * ops::kLmHeadPadVocabTo;
  return padded * c.hidden_size * cb;
}

}  // namespace

MemoryBudget resident_bytes_needed(const models::ModelConfig& c, const TrainSizes& s,
                                   int64_t micro_batch, bool on_gpu) {
  LT_CHECK(s.batch_size > 0 && s.seq_len > 0 && micro_batch > 0,
           "memory budget: batch size, micro-batch and sequence length must be > 0");
  LT_CHECK(s.compute_bytes == kBf16 || s.compute_bytes == kFp32,
           "memory budget: the resident executor computes in bf16 or f32");
  const int64_t n = c.num_parameters();
  const int64_t cb = s.compute_bytes;
  MemoryBudget m;
  using enum MemorySpace;
  m.add(Gpu, "master weights (fp32)", n * kFp32);
  if (cb != kFp32) m.add(Gpu, "compute copy of the weights (bf16)", n * cb);
  // The executor drops every .grad after the update (resident.cpp), so
  // with one micro-batch a step the backward builds the gradients while it
  // frees the blocks' saved tensors: at its start all saved tensors and no
  // block gradient are alive, at the last block's backward (the graph's
  // peak but for the head step) the lm_head's gradient and that block's,
  // at its end every gradient and about one block's saved tensors; the
  // larger is the peak. With several micro-batches the gradients of the
  // first stay through the others. (Counting every gradient beside every
  // saved tensor put the Qwen2.5-0.5B recipe at 29.9 GB planned against
  // 23.8 GB measured.)
  const bool one_micro_batch = micro_batch >= s.batch_size;
  const int64_t saved = c.num_hidden_layers *
                        block_saved_bytes(c, std::min(micro_batch, s.batch_size) * s.seq_len, cb);
  const int64_t block_saved = saved / std::max<int64_t>(1, c.num_hidden_layers);
  const int64_t grads = n * cb;
  // At the last block's backward: the lm_head's, down_proj's weight's and
  // a few vectors' (its bias, the final norm's).
  const int64_t early_grads =
      lm_head_gradient_bytes(c, cb, on_gpu) + (c.intermediate_size + 3) * c.hidden_size * cb;
  m.add(Gpu,
        one_micro_batch ? "gradients (compute dtype) beyond the saved tensors they replace"
                        : "gradients (compute dtype)",
        one_micro_batch ? std::max(early_grads, grads - (saved - block_saved)) : grads);
  add_optimizer_states(m, Gpu, n, s);
  add_graph_of_one_micro_batch(m, c, s, micro_batch, on_gpu,
                               /*lm_head_gradient_counted=*/one_micro_batch);
  return m;
}

void add_graph_of_one_micro_batch(MemoryBudget& m, const models::ModelConfig& c,
                                  const TrainSizes& s, int64_t micro_batch, bool on_gpu,
                                  bool lm_head_gradient_counted) {
  using enum MemorySpace;
  const int64_t cb = s.compute_bytes;
  const int64_t tokens = std::min(micro_batch, s.batch_size) * s.seq_len;
  const int64_t h = c.hidden_size;
  const int64_t v = c.vocab_size;
  m.add(Gpu, "token ids and targets of the batch (i64)", 2 * s.batch_size * s.seq_len * kTokenId);
  // models::CausalLM::context's cos and sin, f64, for half a head's width.
  if (!c.is_gpt2())
    m.add(Gpu, "the rope table (f64)",
          2 * models::rope_table_positions(s.seq_len) * (c.head_dim / 2) * 8);
  m.add(Gpu, "saved tensors of every block, one micro-batch",
        c.num_hidden_layers * block_saved_bytes(c, tokens, cb));
  // Beside them the graph peaks either in the head's step or in the last
  // block's backward, once the head's tensors are freed: the larger of the
  // two's transients. The head's: the final norm's input and output (and
  // statistics), and the weight gradient it makes unless counted already.
  const int64_t rows = std::min(tokens, loss_chunk_rows(v, on_gpu));
  const int64_t norm_statistics = (c.is_gpt2() ? 2 : 1) * kFp32;
  const int64_t lm_head_gradient = lm_head_gradient_bytes(c, cb, on_gpu);
  int64_t head =
      tokens * (2 * h * cb + norm_statistics) + (lm_head_gradient_counted ? 0 : lm_head_gradient);
  std::string head_parts;
  if (on_gpu && ops::fused_lm_head_enabled()) {
    // ops/classifier.h: a chunk's logits in the compute dtype over the
    // padded vocabulary, the hidden's gradient made in the forward, and a
    // padded copy of the weight when the vocabulary needs padding.
    const int64_t padded = lm_head_gradient / (h * cb);
    head += rows * padded * cb + tokens * h * cb + (padded != v ? padded * h * cb : 0);
    head_parts = "the fused head's chunk of logits and gradients";
  } else {
    // autograd/fn_lm_loss.cpp: a loss chunk's fp32 logits with their
    // gradient written over them, the chunk's hidden gradient on its way
    // into the whole hidden gradient, and each row's log-sum-exp.
    head += rows * v * kFp32 + rows * h * cb + tokens * (h * cb + kFp32);
    head_parts = "a loss chunk's logits, the hidden's and lm_head's gradients";
  }
  const int64_t block = block_backward_elements_per_token(c) * tokens * cb;
  m.add(Gpu,
        fmt::format("the larger transients: the head step's ({}, the final norm's input and "
                    "output; {:.3f} GB) or the last block's backward (its MLP's activation "
                    "gradients; {:.3f} GB)",
                    head_parts, static_cast<double>(head) / 1e9, static_cast<double>(block) / 1e9),
        std::max(head, block));
}

DiskStages disk_stages_of(const models::ModelConfig& c, const TrainSizes& s) {
  const int stage_count = static_cast<int>(c.num_hidden_layers) + 2;
  LT_CHECK(s.states_on_disk.empty() || static_cast<int>(s.states_on_disk.size()) == stage_count,
           "memory budget: states_on_disk names ", s.states_on_disk.size(),
           " stages, the model has ", stage_count);
  DiskStages d;
  for (int stage = 0; stage < static_cast<int>(s.states_on_disk.size()); ++stage) {
    if (!s.states_on_disk[static_cast<size_t>(stage)]) continue;
    d.sizes.push_back(stage_parameters(c, stage));
    d.parameters += d.sizes.back();
    ++d.count;
  }
  return d;
}

void add_disk_stages(MemoryBudget& m, DiskStages disk, const TrainSizes& s) {
  using enum MemorySpace;
  m.add(Disk, fmt::format("master weights (fp32) of {} stages", disk.count),
        disk.parameters * kFp32);
  add_optimizer_states(m, Disk, disk.parameters, s);
  // The largest disk stages' states, in host memory around their updates.
  std::sort(disk.sizes.rbegin(), disk.sizes.rend());
  disk.sizes.resize(std::min<size_t>(disk.sizes.size(), kStagesOfStatesInFlight));
  int64_t in_flight = 0;
  for (int64_t e : disk.sizes) in_flight += e;
  m.add(Host,
        fmt::format("master weights and optimizer states of {} disk stages in flight",
                    disk.sizes.size()),
        master_and_state_bytes(in_flight, s));
}

MemoryBudget offload_device_weights(const models::ModelConfig& c, const TrainSizes& s,
                                    double zenflow_topk) {
  const int64_t n = c.num_parameters();
  const int64_t cb = s.compute_bytes;
  MemoryBudget m;
  using enum MemorySpace;
  m.add(Gpu, "resident weights (compute dtype)", n * cb);
  m.add(Gpu, "gradients (compute dtype)", n * cb);
  if (zenflow_topk > 0) {
    const auto selected = static_cast<int64_t>(std::ceil(zenflow_topk * static_cast<double>(n)));
    m.add(Gpu, "ZenFlow's device columns: f32 master, m and v", selected * 3 * kFp32);
  }
  return m;
}

MemoryBudget offload_bytes_needed(const models::ModelConfig& c, const TrainSizes& s,
                                  int64_t micro_batch, double zenflow_topk) {
  LT_CHECK(s.batch_size > 0 && s.seq_len > 0 && micro_batch > 0,
           "memory budget: batch size, micro-batch and sequence length must be > 0");
  const int64_t n = c.num_parameters();
  const int64_t cb = s.compute_bytes;
  MemoryBudget m = offload_device_weights(c, s, zenflow_topk);
  using enum MemorySpace;
  add_graph_of_one_micro_batch(m, c, s, micro_batch, s.on_gpu,
                               /*lm_head_gradient_counted=*/false);
  // exec.state_placement (Note [Offload states on disk]).
  const DiskStages disk = disk_stages_of(c, s);
  const std::string of_host =
      disk.count > 0
          ? fmt::format(" of {} stages", static_cast<int>(c.num_hidden_layers) + 2 - disk.count)
          : std::string();
  m.add(Host, "master weights (fp32)" + of_host, (n - disk.parameters) * kFp32);
  add_optimizer_states(m, Host, n - disk.parameters, s);
  if (s.on_gpu) m.add(Host, "bf16 shadows the update writes for the upload, pinned", n * kBf16);
  if (disk.count > 0) {
    add_disk_stages(m, disk, s);
    // The stand-in's upload source (a GPU's is the bf16 shadow above).
    if (!s.on_gpu)
      m.add(Host, "weights of the disk stages the device uploads (compute dtype)",
            disk.parameters * s.compute_bytes);
  }
  m.add(Host,
        zenflow_topk > 0 ? "gradient slabs, two windows (compute dtype)"
                         : "gradient slabs (compute dtype)",
        (zenflow_topk > 0 ? 2 : 1) * n * cb);
  return m;
}

namespace {

int disk_transit_buffers_of(const Schedule& schedule, const StagePlan& plan) {
  const auto& place = schedule.boundaries;
  const int disk = static_cast<int>(std::count(place.begin(), place.end(), Placement::Disk));
  // Backward: disk boundaries whose read has started and whose backward has
  // not yet consumed them (the executor frees their host buffers then).
  int reading = 0, peak = 0;
  for (size_t u = 0; u < plan.uses.size(); ++u) {
    reading += static_cast<int>(plan.prefetches[u].disk_reads.size());
    peak = std::max(peak, reading);
    for (int consumed : plan.after[u].drop)
      if (place[consumed] == Placement::Disk) --reading;
  }
  // Forward: the one being copied out and the two the disk may still be
  // writing (a third write waits for the first); backward: those read, and
  // the last two writes, which may still be pending.
  return std::min(disk, std::max(3, peak + 2));
}

}  // namespace

BoundaryPeak device_boundary_peak(const Schedule& schedule, int num_blocks) {
  const StagePlan plan = plan_stage(schedule, num_blocks);
  return boundary_peak_of(schedule, device_holds(plan, false), num_blocks);
}

int disk_transit_buffers(const Schedule& schedule, int num_blocks) {
  return disk_transit_buffers_of(schedule, plan_stage(schedule, num_blocks));
}

std::vector<HeldBytes> held_bytes(const models::ModelConfig& c, const TrainSizes& s,
                                  const Schedule& schedule) {
  const int L = static_cast<int>(c.num_hidden_layers);
  const StagePlan plan = plan_stage(schedule, L);
  std::vector<HeldBytes> out;
  for (const UseHolds& use : device_holds(plan, c.tie_word_embeddings)) {
    HeldBytes b{token_bytes(s), token_bytes(s)};
    for (const Hold& h : use.at_start) b.at_start += hold_bytes(c, s, h, plan.on_device);
    for (const Hold& h : use.at_end) b.at_end += hold_bytes(c, s, h, plan.on_device);
    out.push_back(b);
  }
  return out;
}

int longest_recompute_run(const Schedule& schedule) {
  int longest = 0, run = 0;
  for (Placement p : schedule.boundaries) {
    run = p == Placement::Recompute ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return longest;
}

MemoryBudget bytes_needed(const models::ModelConfig& c, const TrainSizes& s,
                          const Schedule& schedule) {
  const int L = static_cast<int>(c.num_hidden_layers);
  validate(schedule, L, "memory budget");
  // What the executor runs (streaming.cpp) is what is counted.
  const StagePlan plan = plan_stage(schedule, L);
  MemoryBudget m = fixed_bytes_of(c, s, schedule.chunk_sequences, plan);
  const int64_t a = boundary_bytes(c, s);
  int64_t host = 0, disk = 0;
  for (Placement p : schedule.boundaries) {
    host += p == Placement::Host;
    disk += p == Placement::Disk;
  }
  using enum MemorySpace;
  const BoundaryPeak peak =
      boundary_peak_of(schedule, device_holds(plan, c.tie_word_embeddings), L);
  const auto count = [](int n) { return " (" + std::to_string(n) + ")"; };
  m.add(Gpu, "boundaries kept on the device, at the peak" + count(peak.kept), peak.kept * a);
  m.add(Gpu, "recomputed boundaries, at the peak" + count(peak.recomputed), peak.recomputed * a);
  m.add(Gpu, "offloaded boundaries in use or in transit, at the peak" + count(peak.offloaded),
        peak.offloaded * a);
  m.add(Gpu, "boundary gradient (whole batch)" + count(peak.gradient), peak.gradient * a);
  m.add(Host, "boundaries on the host" + count(static_cast<int>(host)) + ", pinned", host * a);
  // Disk boundaries pass through host buffers (disk_transit_buffers).
  const int64_t disk_buffers = disk_transit_buffers_of(schedule, plan);
  m.add(Host, "disk boundaries in transit" + count(static_cast<int>(disk_buffers)),
        disk_buffers * a);
  const int64_t a_disk = (a + kDiskAlign - 1) / kDiskAlign * kDiskAlign;
  m.add(Disk, "boundaries on disk" + count(static_cast<int>(disk)), disk * a_disk);
  return m;
}

}  // namespace lt::exec
