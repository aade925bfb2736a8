#include "exec/memory_budget.h"

#include <algorithm>

#include "core/error.h"

namespace lt::exec {

namespace {

constexpr int64_t kBf16 = 2;
constexpr int64_t kFp32 = 4;
// The head computes the loss over chunks of this many tokens, so that full
// logits never exist at once; each chunk holds fp32 logits and their
// gradient (DESIGN.md, "Numerics").
constexpr int64_t kLossChunkTokens = 1024;
// adamw8bit: one fp32 scale per block of 2048 elements, for m and for v.
constexpr int64_t kEightBitBlock = 2048;
// Disk offload writes in 4 KiB-aligned units (O_DIRECT).
constexpr int64_t kDiskAlign = 4096;

// Elements a block saves per token for its backward, llama-style (gpt2 is
// close enough: it has no gate, but a 4x FFN): the block input and the
// normed input (2h), q, k, v after RoPE and the attention output
// (2q + 2kv), the residual after attention and its normed copy (2h), and
// gate, up, act(gate) and act(gate)*up (4 ffn). qk-norm saves q and k
// before their norm too. Attention scores are never stored (the attention
// kernels recompute them), the softmax statistics are negligible.
int64_t block_saved_elements_per_token(const models::ModelConfig& c) {
  const int64_t q = c.num_attention_heads * c.head_dim;
  const int64_t kv = c.num_key_value_heads * c.head_dim;
  int64_t n = 4 * c.hidden_size + 2 * q + 2 * kv + 4 * c.intermediate_size;
  if (c.qk_norm) n += q + kv;
  return n;
}

}  // namespace

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

int64_t edge_parameters(const models::ModelConfig& c) {
  const int64_t embed = c.vocab_size * c.hidden_size;
  const int64_t positions = c.is_gpt2() ? c.max_position_embeddings * c.hidden_size : 0;
  const int64_t final_norm = c.is_gpt2() ? 2 * c.hidden_size : c.hidden_size;
  const int64_t head = c.tie_word_embeddings ? 0 : c.vocab_size * c.hidden_size;
  return embed + positions + final_norm + head;
}

int64_t block_parameters(const models::ModelConfig& c) {
  LT_CHECK(c.num_hidden_layers > 0, "memory budget: the model has no layers");
  return (c.num_parameters() - edge_parameters(c)) / c.num_hidden_layers;
}

int64_t boundary_bytes(const models::ModelConfig& c, const TrainSizes& s) {
  return s.batch_size * s.seq_len * c.hidden_size * kBf16;
}

MemoryBudget fixed_bytes(const models::ModelConfig& c, const TrainSizes& s, int64_t micro_batch) {
  LT_CHECK(s.batch_size > 0 && s.seq_len > 0,
           "memory budget: batch size and sequence length must be > 0");
  const int64_t chunk = micro_batch > 0 ? std::min(micro_batch, s.batch_size) : s.batch_size;
  const int64_t chunk_tokens = chunk * s.seq_len;
  const int64_t n = c.num_parameters();
  const int64_t block = block_parameters(c);
  const int64_t edge = edge_parameters(c);
  MemoryBudget m;
  using enum MemorySpace;
  // GPU. One block computes while the next one's weights arrive.
  m.add(Gpu, "block weights, double buffer (bf16)", 2 * block * kBf16);
  // One block's gradients fill while the previous block's drain to the host.
  m.add(Gpu, "block gradients, double buffer (bf16)", 2 * block * kBf16);
  m.add(Gpu, "embedding, final norm and lm_head, resident (bf16)", edge * kBf16);
  m.add(Gpu, "embedding and lm_head gradients (bf16)", edge * kBf16);
  // A block's saved tensors for one micro-batch, and as much again for the
  // gradients alive during its backward (an estimate, not a measurement).
  m.add(Gpu, "block working set, one micro-batch (bf16, saved tensors x2)",
        2 * block_saved_elements_per_token(c) * chunk_tokens * kBf16);
  m.add(Gpu, "loss working set (fp32 logits + gradient, one chunk)",
        2 * std::min(kLossChunkTokens, chunk_tokens) * c.vocab_size * kFp32);
  // Host.
  m.add(Host, "master weights (fp32)", n * kFp32);
  if (s.optimizer == OptimizerStates::Fp32)
    m.add(Host, "AdamW m and v (fp32)", 2 * n * kFp32);
  else
    m.add(Host, "AdamW m and v (8-bit codes + fp32 block scales)",
          2 * n + 2 * ((n + kEightBitBlock - 1) / kEightBitBlock) * kFp32);
  m.add(Host, "weights streamed to the GPU, pinned (bf16)", n * kBf16);
  // Clipping needs the global gradient norm before any update, so every
  // gradient is held until backward ends.
  m.add(Host, "gradients, pinned (bf16)", n * kBf16);
  return m;
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
  validate(schedule, static_cast<int>(c.num_hidden_layers), "memory budget");
  MemoryBudget m = fixed_bytes(c, s, schedule.micro_batch);
  const int64_t a = boundary_bytes(c, s);
  int64_t gpu = 0, host = 0, disk = 0;
  for (Placement p : schedule.boundaries) {
    gpu += p == Placement::Gpu;
    host += p == Placement::Host;
    disk += p == Placement::Disk;
  }
  using enum MemorySpace;
  m.add(Gpu, "kept boundaries (" + std::to_string(gpu) + ")", gpu * a);
  // Backward rematerializes a recomputed run all at once, from the kept
  // boundary before it, and holds it while it walks back through the run.
  const int run = longest_recompute_run(schedule);
  m.add(Gpu, "recompute buffer (" + std::to_string(run) + " boundaries)", run * a);
  // An offloaded boundary occupies the GPU while it is copied out in
  // forward and once it is back for backward: one at a time.
  if (host + disk > 0) m.add(Gpu, "offload staging (one boundary)", a);
  m.add(Host, "boundaries on the host (" + std::to_string(host) + ", pinned)", host * a);
  // A disk boundary passes through a pinned host buffer on its way.
  if (disk > 0) m.add(Host, "disk staging (one boundary, pinned)", a);
  const int64_t a_disk = (a + kDiskAlign - 1) / kDiskAlign * kDiskAlign;
  m.add(Disk, "boundaries on disk (" + std::to_string(disk) + ")", disk * a_disk);
  return m;
}

}  // namespace lt::exec
