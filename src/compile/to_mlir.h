#pragma once
// KernelGraph -> MLIR (text) on memrefs, with linalg.generic, arith and
// math: the form compile/jit.cpp lowers to LLVM. Text, so that this file
// needs no MLIR headers (they cost a minute a file to compile) and the
// kernel can be read, or fed to mlir-opt, as it is.
//
// The function is
//   func.func @<name>(%rows: index, %cols: index, <inputs>, <outputs>)
// with a Full value as memref<?x?xT> ([rows, cols], row-major), a Row value
// as memref<?xT> ([rows]) and a Col value as memref<?xT> ([cols]); T is f32
// or bf16 as the graph stores it.
//
// Reductions run in passes: pass k computes every reduction whose operand
// needs reductions of passes before k only, into an f32 [rows] buffer, in
// one loop nest over [rows, cols] (scf.for, the accumulators in registers:
// sum, or max from -inf, in column order). A last pass writes the full outputs (one generic over
// [rows, cols]) and the row outputs (one generic over [rows]). Values
// between ops are recomputed in each pass that needs them, never stored.
#include <string>

#include "compile/graph.h"

namespace lt::compile {

std::string to_mlir(const KernelGraph& graph, const std::string& function_name);

}  // namespace lt::compile
