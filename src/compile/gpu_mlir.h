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
//   in registers.
#include <cstdint>
#include <string>

#include "compile/graph.h"

namespace lt::compile {

enum class GpuLaunchForm : uint8_t { Elementwise, RowPerBlock };

// 256 threads: 8 warps, enough columns in flight per row for rows of a few
// thousand elements, and few enough partials (8) for one warp to combine.
inline constexpr int kGpuThreadsPerBlock = 256;
// Per buffer in the kernel's parameters (the memref descriptor above).
inline constexpr int kGpuParamsPerBuffer = 5;
inline constexpr const char* kGpuEntry = "lt_kernel";

GpuLaunchForm gpu_launch_form(const KernelGraph& graph);
const char* gpu_launch_form_name(GpuLaunchForm form);

// A module holding gpu.module @lt_kernels with the kernel kGpuEntry.
std::string to_gpu_mlir(const KernelGraph& graph, int elements_per_thread = 1, bool packed = false);

}  // namespace lt::compile
