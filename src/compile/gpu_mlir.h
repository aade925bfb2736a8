#pragma once
// KernelGraph -> one CUDA kernel written in MLIR's GPU dialect (text, no
// MLIR headers), which compile/ptx.h lowers to PTX. The kernel is written
// directly as a gpu.func with a fixed argument list, so that a launcher
// needs no MLIR host code (Debian ships none of MLIR's CUDA runtime):
//
//   lt_kernel(i64 rows, i64 cols, <each input>, <each output>)
//
// each buffer a 1-D memref descriptor of five parameters, in order:
// allocated pointer, aligned pointer, offset (i64, 0), size (i64, its
// element count), stride (i64, 1). A Full value is [rows * cols] row-major,
// a Row value [rows], a Col value [cols]; elements as the graph stores them
// (f32 or bf16). compile/gpu_kernel.h fills it.
//
// Two forms, by what the graph needs:
// - Elementwise (no reduction, no row output): a grid-stride loop over the
//   rows * cols elements, kGpuThreadsPerBlock threads a block. With
//   `elements_per_thread` V > 1 each step of a block covers V * threads
//   elements, thread t the elements t, t + threads, ...: a whole step loads
//   all V elements' full inputs before it computes and stores any (stores
//   may alias later loads, so nothing else would let the loads overlap),
//   the last, partial step checks each element. More bytes in flight per
//   thread is what a memory-bound kernel of 2-byte elements needs.
//   Packed (`packed`, V > 1): thread t of the grid owns the V consecutive
//   elements V t, ..., V t + V - 1 (a grid-stride loop over such packs),
//   and loads and stores each Full buffer's V elements as one vector (16
//   bytes for V = 8 bf16 values: the widest load a thread makes, as the
//   hand-written kernels' packs). It runs when every Full buffer is
//   aligned to the vector's size and cols is a multiple of V (a pack then
//   lies in one row); otherwise the kernel takes the one-element loop, so
//   any arguments are correct.
// - RowPerBlock (a reduction or a row output): block b owns row b. Each
//   reduction pass (as in compile/to_mlir.h) is a strided loop of the
//   block's threads over the columns, then a tree: warp shuffles, one
//   partial per warp in shared memory, summed or maxed in warp order by
//   every thread. The full outputs follow in one strided loop; thread 0
//   writes the row outputs. Nothing is allocated: the reduced values stay
//   in registers. Measured on the H200 (bf16, 2026-12-03): a warp a row
//   instead, chosen by cols in the same kernel, ran GPT-2's LayerNorm at
//   65536 x 768 in 0.019 GPU-ms per 1k tokens against 0.030, but made the
//   LayerNorm at 16384 x 4096 0.123 ms against 0.109 with the block path
//   alone (both paths' registers), and at 4096 columns a warp a row was
//   1.6-2.2x slower; so one block a row. Loading 4 or 8 columns a thread
//   before adding any (the selects of a row's last columns beside them)
//   was slower still on the H200 (2026-12-03): softmax at 16384 x 4096
//   0.161 -> 0.219 ms, GPT-2's LayerNorm 0.154 -> 0.249 (4) and 0.369 (8):
//   ptxas already unrolls the plain loop and overlaps its loads.
// - ColSums (an output is a col_sum, graph.h): of gpu_col_sum_blocks(rows)
//   blocks, block b owns the b-th range of ceil(rows / blocks) rows (the
//   kernel reads the blocks from its grid), and each of its threads
//   kGpuColSumSlots columns of a tile of kGpuColSumSlots * threads columns
//   (thread t the columns t, t + threads, ...: coalesced). For each row in
//   order, the block takes the row's reductions, thread 0 writes the row
//   outputs, and each thread computes its columns' full outputs (stored)
//   and adds their col-sum terms to accumulators in registers. The
//   reductions come by row groups: for each kGpuThreadsPerBlock / 32 rows,
//   warp w reduces the group's row w alone (lanes over the columns, then
//   shuffles) into shared memory, and after one barrier the block reads
//   them row by row. A block-wide tree per pass per row (two barriers
//   each) left a norm's backward waiting on latency: GPT-2's
//   residual + LayerNorm backward ran at 19% of the copy rate. So a chain
//   reads its inputs once for its full outputs and its col sums. Past the
//   last row the block writes its f32 partials, row b of a [blocks, cols]
//   buffer in place of each col-sum output, and a second kernel of the
//   module, kGpuColSumEntry(blocks, cols, partials, out), sums each
//   column's partials in block order (compile/gpu_kernel.h launches both).
//   Every addition's order depends on rows and cols only, never on timing:
//   no atomics, and two runs give the same bits. Rows wider than a tile
//   take more tiles, each computing the rows' reductions again.
#include <cstdint>
#include <string>
#include <vector>

#include "compile/graph.h"

namespace lt::compile {

enum class GpuLaunchForm : uint8_t { Elementwise, RowPerBlock, ColSums };

// The columns a lane loads before adding any in a warp's reduction pass
// (ColSums' row groups). At 8, GPT-2's residual + LayerNorm backward
// (seven inputs) went from 0.136 to 0.199 GPU-ms per 1k tokens while the
// LayerNorm's alone went from 0.111 to 0.069: its registers no longer let
// three blocks share an SM.
inline constexpr int kGpuWarpPassColumns = 4;

// 256 threads: 8 warps, enough columns in flight per row for rows of a few
// thousand elements, and few enough partials (8) for one warp to combine.
inline constexpr int kGpuThreadsPerBlock = 256;
// Per buffer in the kernel's parameters (the memref descriptor above).
inline constexpr int kGpuParamsPerBuffer = 5;
inline constexpr const char* kGpuEntry = "lt_kernel";

// The ColSums form (above). 4 columns a thread: a tile of 1024 holds
// GPT-2's rows of 768; wider rows take more tiles (the 3B's 3072: 3), each
// computing the row's reductions again, mostly from L1 (the block's row
// was just read). Each slot's loads and running sums are registers:
// LayerNorm's and RMSNorm's backward take 72 at 4 slots, 91-111 at 8
// (ptxas, sm_90), so 3 and 2 blocks of 256 threads an SM.
inline constexpr int kGpuColSumSlots = 4;
// At most 3 blocks per SM of an H200 (132 SMs), so they run in one wave,
// not one and a third. The kernel asks ptxas for that residency
// (nvvm.minctasm, PTX's .minnctapersm, with .maxntid 256): at most 80
// registers a thread. With the row groups the norms' backward took 88
// (LayerNorm) and 101 (residual + RMSNorm), 2 blocks an SM, so 396
// blocks ran in a wave and a half; held to 80, the LayerNorm's spills
// nothing and the RMSNorm's 96 bytes. At most one block per 16 rows: the
// partials stay under about 1/16 of the [rows, cols] they sum, and few
// enough for the second kernel to add in a few steps.
inline constexpr int kGpuColSumBlocksPerSm = 3;
inline constexpr int64_t kGpuColSumMostBlocks = kGpuColSumBlocksPerSm * 132;
inline constexpr int64_t kGpuColSumLeastRows = 16;
// The second kernel: blocks of 32 columns x 8 lanes (lane y adds the
// partials y, y + 8, ... in order; then the 8 lanes' sums in lane order).
inline constexpr const char* kGpuColSumEntry = "lt_col_sum";
inline constexpr int kGpuColSumColumnsPerBlock = 32;
// The blocks of the ColSums form for `rows` rows: by rows alone, so every
// run adds in the same order. ceil(rows / max(16, ceil(rows / 396))).
int64_t gpu_col_sum_blocks(int64_t rows);
// Which of the kernel's buffers (inputs, then the outputs that have one)
// are col sums: the partials the first kernel writes.
std::vector<size_t> gpu_col_sum_buffers(const KernelGraph& graph);

GpuLaunchForm gpu_launch_form(const KernelGraph& graph);
const char* gpu_launch_form_name(GpuLaunchForm form);

// How the forms above lay out a thread's work; each choice adds its terms
// in the same order as the default, so it changes speed, not results.
struct GpuForms {
  // Elements each thread of an elementwise kernel loads before it computes
  // (1 to 16).
  int elements_per_thread = 1;
  // The elementwise form's packed variant: each thread's
  // elements_per_thread elements are consecutive, loaded and stored as one
  // vector.
  bool packed = false;
  // The ColSums form's rows an iteration (1 to 8), their loads issued
  // together. Only where the graph has no row reductions: with the row
  // groups' statistics, two rows under the 80-register cap spill, and on
  // the H200 (2026-12-03) GPT-2's LayerNorm backward went from 0.344 to
  // 0.375 ms and the 3B's residual + RMSNorm backward from 0.255 to 0.305,
  // where GPT-2's bias + GELU backward went from 0.575 to 0.492.
  int col_sum_rows = 1;
};

// The part of `forms` that applies to `graph`'s launch form (the rest
// reset to the defaults): what its kernel and its cache key depend on.
GpuForms gpu_forms_for(const KernelGraph& graph, const GpuForms& forms);

// A module holding gpu.module @lt_kernels with the kernel kGpuEntry.
std::string to_gpu_mlir(const KernelGraph& graph, const GpuForms& forms = {});

}  // namespace lt::compile
