// exec::bytes_needed against counts worked out by hand for a tiny Llama.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/random.h"
#include "exec/memory_budget.h"
#include "exec/resident.h"
#include "exec/stand_in_device.h"
#include "exec/streaming.h"
#include "models/causal_lm.h"
#include "models/config.h"
#include "optim/adamw.h"
#include "plan/tiny_model.h"
#include "support/random_batch.h"
#include "support/scoped_env.h"

namespace lt::exec {
namespace {

models::ModelConfig tiny() {
  return testing::tiny_llama();
}

// By hand:
//   block: q 64*64 + k, v 2*64*32 + o 64*64 + gate, up, down 3*64*128 + 2 norms 2*64
//        = 4096 + 4096 + 4096 + 24576 + 128 = 36992
//   edge: embedding 100*64 + lm_head 100*64 + final norm 64 = 12864
//   N = 2 * 36992 + 12864 = 86848
constexpr int64_t kBlock = 36992, kEdge = 12864, kN = 86848;
// B = 2, T = 8: a boundary is 2 * 8 * 64 * 2 = 2048 bytes.
constexpr int64_t kBoundary = 2048;
// GPU, micro-batch 1 (8 tokens), bf16: the largest sum over the stage
// uses of the weight slots, the gradients alive and the working set, plus
// the token ids and targets (2 * 16 tokens * 8 B = 256). Parameters: block
// 36992, embed 6400, head 6464 (final norm and the untied lm_head).
// Working sets: a block's backward 2 * (4*64 + 2*64 + 2*32 + 4*128 = 960)
// * 8 tokens * 2 B = 30720; the head step's 8 * 100 * 2 (logits, their
// gradient over them, 8 rows: fewer than a GPU chunk of 2^28 / 100) +
// 100 * 64 * 2 (the lm_head weight gradient's sum) + (3 * 8 + 8) * 64 * 2
// ([tokens x hidden] tensors) = 18496. Per use (slots, gradients):
//   a block's forward   (36992 + 36992, 0)                    * 2 + 30720 = 178688
//   the head step       (6464 + 36992, 6464)                  * 2 + 18496 = 118336
//   block 1's backward  (36992 + 36992, 36992 + 6464)         * 2 + 30720 = 265600
//   block 0's backward  (36992 + 6400, 36992 + 36992 + 6464)  * 2 + 30720 = 278400
//   the embed backward  (6400 + 36992, 6400 + 36992 + 36992)  * 2 + 1024  = 248576
// The peak is block 0's backward: slots 86784, gradients 160896.
constexpr int64_t kGpuFixed = 86784 + 160896 + 256 + 30720;
// Host: master 4 + m, v 8 + pinned bf16 weights 2 + pinned bf16 grads 2 = 16 B/param.
constexpr int64_t kHostFixed = 16 * kN;

Schedule schedule(std::vector<Placement> b) {
  Schedule s;
  s.batch_size = 2;
  s.chunk_sequences = 1;
  s.boundaries = std::move(b);
  return s;
}

TEST(MemoryBudget, ParameterSplit) {
  EXPECT_EQ(block_parameters(tiny()), kBlock);
  EXPECT_EQ(edge_parameters(tiny()), kEdge);
  EXPECT_EQ(tiny().num_parameters(), kN);
  EXPECT_EQ(boundary_bytes(tiny(), {2, 8}), kBoundary);
}

TEST(MemoryBudget, AllOnGpu) {
  const auto m =
      bytes_needed(tiny(), {2, 8}, schedule({Placement::Gpu, Placement::Gpu, Placement::Gpu}));
  // The peak is the head step: the three boundaries and the gradient the
  // head hands to backward (dy).
  EXPECT_EQ(m.bytes(MemorySpace::Gpu), kGpuFixed + 4 * kBoundary);
  EXPECT_EQ(m.bytes(MemorySpace::Host), kHostFixed);
  EXPECT_EQ(m.bytes(MemorySpace::Disk), 0);
}

TEST(MemoryBudget, RecomputeNeedsItsBuffer) {
  const auto m = bytes_needed(tiny(), {2, 8},
                              schedule({Placement::Gpu, Placement::Recompute, Placement::Gpu}));
  // Forward of block 1 holds boundaries 0 (kept), 1 (its input, to be
  // dropped) and 2 (its output); later points hold no more: the head has
  // 0, 2 and dy, the recompute 0, 1 and dy.
  EXPECT_EQ(m.bytes(MemorySpace::Gpu), kGpuFixed + 3 * kBoundary);
  EXPECT_EQ(m.bytes(MemorySpace::Host), kHostFixed);
}

TEST(MemoryBudget, HostAndDiskPlacements) {
  const auto host =
      bytes_needed(tiny(), {2, 8}, schedule({Placement::Gpu, Placement::Host, Placement::Gpu}));
  // The head step holds 0, 2, dy, and boundary 1 fetched back for the
  // backward of block 1 that comes next; the boundary itself on the host.
  EXPECT_EQ(host.bytes(MemorySpace::Gpu), kGpuFixed + 4 * kBoundary);
  EXPECT_EQ(host.bytes(MemorySpace::Host), kHostFixed + kBoundary);
  const auto disk =
      bytes_needed(tiny(), {2, 8}, schedule({Placement::Gpu, Placement::Disk, Placement::Gpu}));
  EXPECT_EQ(disk.bytes(MemorySpace::Gpu), kGpuFixed + 4 * kBoundary);
  EXPECT_EQ(disk.bytes(MemorySpace::Host), kHostFixed + kBoundary);  // its buffer in transit
  EXPECT_EQ(disk.bytes(MemorySpace::Disk), 4096);  // 2048 padded to O_DIRECT's 4 KiB
}

TEST(MemoryBudget, EightBitStatesAndWholeBatchChunks) {
  TrainSizes sizes{2, 8, OptimizerStates::EightBit};
  Schedule s = schedule({Placement::Gpu, Placement::Gpu, Placement::Gpu});
  s.chunk_sequences = 0;  // the whole batch: 16 tokens
  const auto m = bytes_needed(tiny(), sizes, s);
  // m, v: 1 B each per parameter + an fp32 scale per 2048 for each:
  // ceil(86848 / 2048) = 43 blocks -> 2 * 86848 + 2 * 43 * 4 = 174040.
  EXPECT_EQ(m.bytes(MemorySpace::Host), (4 + 2 + 2) * kN + 174040);
  // Block 0's backward again, with the block's working set for 16 tokens:
  // 2 * 960 * 16 * 2 = 61440.
  EXPECT_EQ(m.bytes(MemorySpace::Gpu), 86784 + 160896 + 256 + 61440 + 4 * kBoundary);
}

// The head's working set, by hand, where it is the larger one (a huge
// vocabulary, 2^28 / vocab = 16 loss rows on a GPU): L = a loss chunk's
// logits, their gradient written over them (16 x v x 2 B), W =
// lm_head_loss's weight-gradient sum (v x 64 x 2 B = 4L), which the GEMM
// adds each loss chunk into and the engine adds into the W the "gradients"
// item counts in place; plus the head's [tokens x hidden] tensors, 3 per
// token of the chunk and one per loss row. However many chunks and loss
// chunks: L + W.
TEST(MemoryBudget, LossChunksOfAGpuAndTheirWeightGradients) {
  models::ModelConfig big_vocab = tiny();
  big_vocab.vocab_size = int64_t{1} << 24;
  const auto item = [](const MemoryBudget& m, const std::string& what) {
    for (const auto& i : m.items)
      if (i.space == MemorySpace::Gpu && i.what.rfind(what, 0) == 0) return i.bytes;
    return int64_t{-1};
  };
  const int64_t v = int64_t{1} << 24, L = 16 * v * 2, W = v * 64 * 2;
  const TrainSizes two_seqs{2, 16, OptimizerStates::Fp32};
  // The whole batch in one chunk of one loss chunk.
  EXPECT_EQ(item(fixed_bytes(big_vocab, {1, 16}, 1), "working set"),
            L + W + (3 * 16 + 16) * 64 * 2);
  // Two chunks of one loss chunk each.
  EXPECT_EQ(item(fixed_bytes(big_vocab, two_seqs, 1), "working set"),
            L + W + (3 * 16 + 16) * 64 * 2);
  // One chunk of 32 tokens, two loss chunks.
  EXPECT_EQ(item(fixed_bytes(big_vocab, two_seqs, 2), "working set"),
            L + W + (3 * 32 + 16) * 64 * 2);
  // Both: two chunks of two loss chunks.
  EXPECT_EQ(item(fixed_bytes(big_vocab, {4, 16}, 2), "working set"),
            L + W + (3 * 32 + 16) * 64 * 2);
}

// The fused head (the default on a GPU) pads a vocabulary that is not a
// multiple of 128 and holds a padded copy of the weight beside the padded
// gradient; the chunked head (LT_LM_HEAD=unfused) holds neither.
TEST(MemoryBudget, TheFusedHeadCountsItsPaddedWeightCopy) {
  models::ModelConfig odd_vocab = tiny();
  const int64_t v = (int64_t{1} << 24) + 1, padded = (int64_t{1} << 24) + 128;
  odd_vocab.vocab_size = v;
  const auto working_set = [](const MemoryBudget& m) {
    for (const auto& i : m.items)
      if (i.space == MemorySpace::Gpu && i.what.rfind("working set", 0) == 0) return i.bytes;
    return int64_t{-1};
  };
  const int64_t rows = std::min<int64_t>(16, (int64_t{1} << 28) / v);
  const int64_t chunked = rows * v * 2 + v * 64 * 2 + (3 * 16 + rows) * 64 * 2;
  {
    const lt::testing::ScopedEnv unfused("LT_LM_HEAD", "unfused");
    EXPECT_EQ(working_set(fixed_bytes(odd_vocab, {1, 16}, 1)), chunked);
  }
  const lt::testing::ScopedEnv fused("LT_LM_HEAD", nullptr);
  EXPECT_EQ(working_set(fixed_bytes(odd_vocab, {1, 16}, 1)),
            chunked + padded * 64 * 2 + (padded - v) * 64 * 2);
}

// With working sets measured near nothing (1 byte per sequence, 2 with the
// margin), the peak use is the embed stage's backward (bf16, micro-batch 1,
// parameters as above): slots embed + block 0 (6400 + 36992), gradients
// its own + blocks 0 and 1 downloading (6400 + 2 * 36992), and its working
// set, the chunk's [tokens x hidden] gradient (8 * 64 * 2 = 1024) and, in
// several chunks, the dense embedding gradient (6400 * 2) made beside the
// earlier chunks' .grad.
TEST(MemoryBudget, TheEmbedBackwardHoldsADenseGradientPerLaterChunk) {
  const auto at = [](int64_t batch) {
    TrainSizes sizes{batch, 8, OptimizerStates::Fp32, 2};
    sizes.measured_block_backward = {0, 1};
    sizes.measured_head_step = {0, 1};
    return fixed_bytes(tiny(), sizes, 1).bytes(MemorySpace::Gpu);
  };
  const int64_t held = (6400 + 36992 + 6400 + 2 * 36992) * 2;
  EXPECT_EQ(at(1), held + 1024 + 2 * 8 * 8);              // one chunk
  EXPECT_EQ(at(2), held + 6400 * 2 + 1024 + 2 * 16 * 8);  // two chunks
}

// The CPU stand-in computes in f32: every device term doubles but the ids.
TEST(MemoryBudget, StandInComputesInF32) {
  TrainSizes sizes{2, 8, OptimizerStates::Fp32, 4, {}, {}, 2048, false};
  const auto m =
      bytes_needed(tiny(), sizes, schedule({Placement::Gpu, Placement::Gpu, Placement::Gpu}));
  EXPECT_EQ(boundary_bytes(tiny(), sizes), 2 * kBoundary);
  EXPECT_EQ(m.bytes(MemorySpace::Gpu), 2 * (86784 + 160896 + 30720) + 256 + 4 * 2 * kBoundary);
  EXPECT_EQ(m.bytes(MemorySpace::Host), (4 + 8 + 2 + 4) * kN);
}

// The resident executor on a GPU (bf16 compute copy beside f32 masters),
// micro-batch 1 of 8 tokens (two micro-batches a step, so the first's
// gradients stay through the second's backward), by hand:
//   masters 4 B + compute copy 2 B + bf16 gradients 2 B + AdamW m, v 8 B
//     = 16 B x 86848 = 1389568
//   token ids and targets of the whole batch: 2 * 16 tokens * 8 B = 256
//   the rope table: cos and sin for 256 positions x 8 frequencies in f64,
//     32768
//   saved per token (SwiGLU): 4*64 + 2*64 + 2*32 + 3*128 = 832 elements,
//     and 2 norms' rstd + 4 heads' log-sum-exp in f32 = 24 B;
//     2 blocks x (832 x 2 + 24) x 8 tokens = 27008
//   the larger transients: the head step's, the final norm's input and
//     output and rstd 8 * (2 * 64 * 2 + 4) = 2080 and the fused head (the
//     default on a GPU), the vocabulary 100 padded to 128: a chunk's
//     logits 8 * 128 * 2 = 2048, the hidden's gradient 8 * 64 * 2 = 1024,
//     the weight gradient and the padded weight copy 2 * 128 * 64 * 2 =
//     32768; more than the last block's backward's (64 + 2 * 128) * 8 * 2
//     = 5120
TEST(MemoryBudget, ResidentOnAGpu) {
  const lt::testing::ScopedEnv fused("LT_LM_HEAD", nullptr);
  const auto m = resident_bytes_needed(tiny(), {2, 8}, 1, /*on_gpu=*/true);
  EXPECT_EQ(m.bytes(MemorySpace::Gpu), 16 * kN + 256 + 32768 + 27008 + 2080 + 2048 + 1024 + 32768);
  EXPECT_EQ(m.bytes(MemorySpace::Host), 0);
  // The unfused head: a loss chunk's fp32 logits 8 * 100 * 4 = 3200, the
  // chunk's hidden gradient 8 * 64 * 2 = 1024, the whole hidden gradient
  // and the rows' log-sum-exp 8 * (64 * 2 + 4) = 1056, and lm_head_loss's
  // weight-gradient sum 100 * 64 * 2 = 12800.
  const lt::testing::ScopedEnv unfused("LT_LM_HEAD", "unfused");
  EXPECT_EQ(resident_bytes_needed(tiny(), {2, 8}, 1, /*on_gpu=*/true).bytes(MemorySpace::Gpu),
            16 * kN + 256 + 32768 + 27008 + 2080 + 3200 + 1024 + 1056 + 12800);
}

// On the CPU in f32, no compute copy (the masters compute), micro-batch 2
// (16 tokens, the whole batch): masters 4 B and m, v 8 B x N; 256 for the
// ids and 32768 for the rope table; saved tensors 2 x (832 x 4 + 24) x 16 = 107264; the head step's
// transients, 16 x (2 x 64 x 4 + 4) (final norm) + 16 x 100 x 4 (logits)
// + 16 x 64 x 4 (the chunk's hidden gradient) + 16 x (64 x 4 + 4) (the
// hidden gradient, the rows' log-sum-exp) = 22912, more than the last
// block's backward's (64 + 2 x 128) x 16 x 4 = 20480. One micro-batch a
// step: the gradients (4 B x N = 347392) are built while the backward
// frees all but one block's saved tensors, so they add 347392 - 53632 =
// 293760 at the peak (more than the lm_head's, down_proj's and a few
// vectors' alive in the last block's backward, 4 x (6400 + 131 x 64); the
// weight-gradient sum is the lm_head's). 8-bit states instead of fp32: 174040 bytes for m and v
// (see above).
TEST(MemoryBudget, ResidentOnTheCpuAndWithEightBitStates) {
  const int64_t activations = 256 + 32768 + 107264 + 22912 + 293760;
  EXPECT_EQ(resident_bytes_needed(tiny(), {2, 8, OptimizerStates::Fp32, 4}, 2, false)
                .bytes(MemorySpace::Gpu),
            12 * kN + activations);
  EXPECT_EQ(resident_bytes_needed(tiny(), {2, 8, OptimizerStates::EightBit, 4}, 2, false)
                .bytes(MemorySpace::Gpu),
            4 * kN + 174040 + activations);
  // A micro-batch larger than the batch is the batch.
  EXPECT_EQ(resident_bytes_needed(tiny(), {2, 8, OptimizerStates::Fp32, 4}, 5, false)
                .bytes(MemorySpace::Gpu),
            12 * kN + activations);
}

// Boundaries the executor holds, walked by hand over its stage uses, for
// L = 3 and G H H G (interior boundaries on the host). Uses: forward 0..3,
// head, backward 3, 2, 1, 0.
//   forward 2: 0 (kept), 1 (input, copied out), 2 (output)       = 3
//   head: 0, 3, dy, and 2 fetched for backward 3                  = 4
//   backward 3: 0, 2 (input), dy, and 1 fetched for backward 2    = 4
//   backward 2: 0, 1, dy (2 freed after backward 3)               = 3
// The first point of 4 is the head: kept 0 and 3, offloaded 2, dy.
TEST(MemoryBudget, BoundaryPeakWalkedByHand) {
  using P = Placement;
  const Schedule s = schedule({P::Gpu, P::Host, P::Host, P::Gpu});
  const BoundaryPeak p = device_boundary_peak(s, 3);
  EXPECT_EQ(p.total(), 4);
  EXPECT_EQ(p.kept, 2);
  EXPECT_EQ(p.offloaded, 1);
  EXPECT_EQ(p.gradient, 1);
  EXPECT_EQ(p.recomputed, 0);
  // G R R G (L = 3): forward 2 holds 0, 1 and 2 (3); the head 0, 3, dy (3);
  // recomputing 1 and 2 for backward 3: 0, 1, 2, dy = 4, the peak.
  const BoundaryPeak r =
      device_boundary_peak(schedule({P::Gpu, P::Recompute, P::Recompute, P::Gpu}), 3);
  EXPECT_EQ(r.total(), 4);
  EXPECT_EQ(r.kept, 1);
  EXPECT_EQ(r.recomputed, 2);
  EXPECT_EQ(r.gradient, 1);
}

// The bound the planner holds back (kMaxTransientBoundaries) against every
// schedule with boundaries 0 and L on the GPU, L <= 6, by brute force; some
// schedule reaches it, so it is not looser than needed.
TEST(MemoryBudget, TransientBoundariesBoundEverySchedule) {
  const Placement all[] = {Placement::Gpu, Placement::Host, Placement::Disk, Placement::Recompute};
  int worst = -1;
  for (int L = 1; L <= 6; ++L) {
    int combos = 1;
    for (int i = 1; i < L; ++i) combos *= 4;
    for (int code = 0; code < combos; ++code) {
      std::vector<Placement> b(static_cast<size_t>(L) + 1, Placement::Gpu);
      for (int i = 1, rest = code; i < L; ++i, rest /= 4) b[i] = all[rest % 4];
      const Schedule s = schedule(b);
      const int gpu = static_cast<int>(std::count(b.begin(), b.end(), Placement::Gpu));
      const int over = device_boundary_peak(s, L).total() - gpu - longest_recompute_run(s);
      ASSERT_LE(over, kMaxTransientBoundaries) << "L " << L << " schedule " << code;
      worst = std::max(worst, over);
    }
  }
  EXPECT_EQ(worst, kMaxTransientBoundaries);
}

// Read windows bring boundaries back earlier, and the walk holds them for
// as long. G H H G (L = 3) with boundary 1's upload at the head (window 3)
// instead of one use ahead (at backward 3): the head step holds 0, 3, dy,
// boundary 2 (fetched for backward 3) and boundary 1: 5 instead of 4.
TEST(MemoryBudget, ReadWindowsHoldBoundariesLonger) {
  using P = Placement;
  Schedule s = schedule({P::Gpu, P::Host, P::Host, P::Gpu});
  EXPECT_EQ(device_boundary_peak(s, 3).total(), 4);
  s.read_windows = {-1, 3, -1, -1};
  const BoundaryPeak p = device_boundary_peak(s, 3);
  EXPECT_EQ(p.kept, 2);
  EXPECT_EQ(p.offloaded, 2);
  EXPECT_EQ(p.gradient, 1);
  EXPECT_EQ(p.total(), 5);
}

// Disk boundaries' host buffers: L = 8, seven interior disk boundaries. By
// default the backward holds three read back at once (the one in use, the
// one uploaded one use ahead, the one read two ahead), plus two writes that
// may be pending: 5. With every read started at the head, all seven.
TEST(MemoryBudget, DiskTransitFollowsTheReadWindows) {
  std::vector<Placement> place(9, Placement::Disk);
  place.front() = place.back() = Placement::Gpu;
  Schedule s = schedule(place);
  EXPECT_EQ(disk_transit_buffers(s, 8), 5);
  s.read_windows.assign(9, 8);
  s.read_windows.front() = s.read_windows.back() = -1;
  EXPECT_EQ(disk_transit_buffers(s, 8), 7);
  // Each read in the window just before its use: the one in use and the
  // one read ahead, with two writes pending.
  for (int i = 1; i < 8; ++i) s.read_windows[i] = i + 1;
  EXPECT_EQ(disk_transit_buffers(s, 8), 4);
}

// fixed_bytes counts the all-GPU schedule's uses for any schedule the
// planner may choose (boundary 0 kept): every such schedule's own count of
// weight slots, gradients and working set (bytes_needed walks its own stage
// plan) is the same, by brute force over L <= 5, tied and untied.
TEST(MemoryBudget, FixedBytesHoldForEveryScheduleThatKeepsBoundaryZero) {
  const Placement all[] = {Placement::Gpu, Placement::Host, Placement::Disk, Placement::Recompute};
  for (bool tied : {false, true}) {
    for (int L = 1; L <= 5; ++L) {
      models::ModelConfig c = tiny();
      c.num_hidden_layers = L;
      c.tie_word_embeddings = tied;
      const TrainSizes sizes{4, 8, OptimizerStates::Fp32, 2};
      const MemoryBudget fixed = fixed_bytes(c, sizes, 1);
      int combos = 1;
      for (int i = 1; i <= L; ++i) combos *= 4;
      for (int code = 0; code < combos; ++code) {
        Schedule s = schedule(std::vector<Placement>(static_cast<size_t>(L) + 1, Placement::Gpu));
        s.batch_size = 4;
        for (int i = 1, rest = code; i <= L; ++i, rest /= 4) s.boundaries[i] = all[rest % 4];
        const MemoryBudget own = bytes_needed(c, sizes, s);
        ASSERT_GE(own.items.size(), fixed.items.size());
        for (size_t k = 0; k < fixed.items.size(); ++k) {
          ASSERT_EQ(own.items[k].what, fixed.items[k].what) << "L " << L << " code " << code;
          ASSERT_EQ(own.items[k].bytes, fixed.items[k].bytes) << "L " << L << " code " << code;
        }
      }
    }
  }
}

TEST(MemoryBudget, LongestRecomputeRun) {
  using P = Placement;
  EXPECT_EQ(longest_recompute_run(
                schedule({P::Gpu, P::Recompute, P::Recompute, P::Host, P::Recompute, P::Gpu})),
            2);
}

// The boundary walk against the executor itself, on the stand-in: a model
// whose boundaries dwarf everything else (hidden 48, 128 sequences of 32
// tokens: a boundary is 786 KB in f32, while weight slots, gradients, ids
// and one sequence's working set come to about 300 KB). The measured
// device peak must then lie in [walk x boundary, (walk + 1) x boundary):
// the walk counts every boundary-sized buffer the executor holds at its
// worst point, and none it does not.
TEST(MemoryBudget, BoundaryWalkMatchesTheExecutorsPeak) {
  using P = Placement;
  models::ModelConfig config = models::ModelConfig::from_json_text(
      R"({"model_type": "llama", "hidden_size": 48, "num_hidden_layers": 5,
          "num_attention_heads": 6, "num_key_value_heads": 2, "intermediate_size": 37,
          "vocab_size": 97, "tie_word_embeddings": false})",
      "walk");
  const int64_t rows = 128, seq = 32;
  Generator gen(5);
  std::vector<int64_t> ids(static_cast<size_t>(rows * seq));
  for (auto& id : ids) id = static_cast<int64_t>(gen.below(97));
  data::Batch batch;
  batch.ids = Tensor::from_vector(ids, {rows, seq});
  batch.targets = models::shift_targets(batch.ids);
  batch.tokens = rows * seq;
  batch.target_count = models::count_targets(batch.targets);
  const int64_t boundary = boundary_bytes(config, {rows, seq, OptimizerStates::Fp32, 4});
  const std::string spill = ::testing::TempDir() + "lt_walk_spill";
  std::filesystem::create_directories(spill);
  // The last two fuse the last 2 and the last 4 blocks with the head (Note
  // [The fused tail]).
  const std::vector<std::vector<P>> schedules = {
      {P::Gpu, P::Gpu, P::Gpu, P::Gpu, P::Gpu, P::Gpu},
      {P::Gpu, P::Host, P::Host, P::Host, P::Host, P::Gpu},
      {P::Gpu, P::Recompute, P::Recompute, P::Recompute, P::Recompute, P::Gpu},
      {P::Gpu, P::Host, P::Recompute, P::Disk, P::Recompute, P::Gpu},
      {P::Gpu, P::Recompute, P::Host, P::Gpu, P::Disk, P::Gpu},
      {P::Gpu, P::Gpu, P::Gpu, P::Gpu, P::Gpu, P::Gpu},
      {P::Gpu, P::Recompute, P::Gpu, P::Recompute, P::Recompute, P::Gpu}};
  for (size_t k = 0; k < schedules.size(); ++k) {
    Schedule s;
    s.chunk_sequences = 1;
    s.boundaries = schedules[k];
    if (k + 2 == schedules.size()) s.tail_blocks = 2;
    if (k + 1 == schedules.size()) s.tail_blocks = 4;
    const int walk = device_boundary_peak(s, 5).total();
    SCOPED_TRACE(to_json(s).dump() + " walk " + std::to_string(walk));
    models::CausalLM model = models::CausalLM::random(config, gen);
    optim::AdamW adam(model.parameters(), optim::AdamWOptions{});
    StreamingOptions o;
    o.schedule = s;
    o.disk.directory = spill;
    StreamingExecutor streaming(model, adam, std::make_unique<StandInDevice>(), o);
    const int64_t peak = streaming.step({batch}, {}).peak_bytes.at("device");
    streaming.sync();
    EXPECT_GE(peak, walk * boundary);
    EXPECT_LT(peak, (walk + 1) * boundary);
  }
  std::filesystem::remove_all(spill);
}

// resident_bytes_needed against the host allocator's measured peak in a
// step of the resident executor on the CPU (whose host memory check counts
// with it, train/run_plan.cpp), one micro-batch of 4 and of 64 sequences
// of 32 tokens, for the tiny Llama, whose peak is the head step (a loss
// chunk's logits are 100 floats a token), and for a variant with a wider
// MLP (FFN 512), whose peak is its last block's backward. The count must
// cover the peak, and may exceed it by 2% at most: beside the head step it
// counts down_proj's weight gradient, which only the last block's backward
// makes (0.9% at 4 sequences, 0.3% at 64); the last block's backward it
// counts to within a few vectors. The count of f45b01c (one block's saved
// tensors more for a block's backward, beside every head transient) ran
// 7-32% high here.
TEST(MemoryBudget, ResidentCountCoversTheMeasuredPeakClosely) {
  const models::ModelConfig head_peaks = tiny();
  const models::ModelConfig block_peaks = models::ModelConfig::from_json_text(
      R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
          "vocab_size": 100, "tie_word_embeddings": false})",
      "wide");
  const int64_t seq = 32;
  for (const models::ModelConfig* config : {&head_peaks, &block_peaks}) {
    for (const int64_t rows : {4, 64}) {
      SCOPED_TRACE(fmt::format("FFN {}, {} sequences", config->intermediate_size, rows));
      // What the process held before (other tests' leftovers) is no part
      // of this step's peak.
      const int64_t before = cpu_allocator().stats().current_bytes;
      Generator gen(7);
      const data::Batch batch = lt::testing::random_token_batch(gen, rows, seq, 100);
      models::CausalLM model = models::CausalLM::random(*config, gen);
      optim::AdamW adam(model.parameters(), optim::AdamWOptions{});
      ResidentExecutor resident(model, adam);
      StepOptions options;
      options.lr = 1e-3;
      const int64_t measured = resident.step({batch}, options).peak_bytes.at("host") - before;
      const int64_t counted =
          resident_bytes_needed(*config, {rows, seq, OptimizerStates::Fp32, 4}, rows, false)
              .bytes(MemorySpace::Gpu);
      std::printf("FFN %lld, %lld sequences: counted %lld bytes, measured peak %lld\n",
                  static_cast<long long>(config->intermediate_size), static_cast<long long>(rows),
                  static_cast<long long>(counted), static_cast<long long>(measured));
      EXPECT_GE(counted, measured);
      EXPECT_LE(static_cast<double>(counted), 1.02 * static_cast<double>(measured));
    }
  }
}

}  // namespace
}  // namespace lt::exec
