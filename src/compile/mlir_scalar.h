#pragma once
// One node's f32 arithmetic as lines of MLIR text (arith and math), shared
// by the CPU writer (compile/to_mlir.h, inside linalg.generic bodies) and
// the GPU writer (compile/gpu_mlir.h, inside a kernel's loops), so that
// both compute every op alike. Text only: no MLIR headers.
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "compile/graph.h"

namespace lt::compile {

class ScalarWriter {
 public:
  // Lines go to `out`, each starting with `indent`. `graph` gives the
  // lookup tables' sizes (the tables are mlir_table_globals').
  ScalarWriter(const KernelGraph& graph, std::ostream& out, std::string indent)
      : graph_(graph), out_(out), indent_(std::move(indent)) {}

  void set_indent(std::string indent) { indent_ = std::move(indent); }
  // Lets LLVM fuse a multiply and an add into one FMA (one rounding
  // instead of two, so within the interpreter's bound; compile/interpret.h).
  // The GPU writer turns it on: its elementwise chains are bound by
  // instructions as much as by bytes (GELU: 45 a bf16 element without).
  void set_contract(bool contract) { contract_ = contract; }
  // The GPU writer's: sigmoid through PTX's approximations, one SFU
  // instruction each for 2^x (ex2.approx.ftz) and 1/x (rcp.approx.ftz),
  // where libdevice's expf and an IEEE division take some twenty (the
  // error is within interpret.cpp's sigmoid bound, which says how), and a
  // division as a product with rcp.approx.ftz of the divisor, scaled into
  // ftz's range where it lies outside (approximate_division; interpret.cpp's
  // Div bound counts its 1 ulp and the product's rounding).
  void set_nvvm_approximations(bool on) { nvvm_approximations_ = on; }
  std::ostream& line() { return out_ << indent_; }

  // A new SSA name (%v<n>), unique within this writer.
  std::string fresh() { return "%v" + std::to_string(counter_++); }
  std::string constant(double value);

  // `n`'s op on its operands' f32 values (`a`, `b`, `c` as `n` has them).
  // Inputs, reductions and Cols are the callers' (a load, an accumulated
  // value, a hoisted count): calling this for them throws.
  std::string op(const Node& n, const std::string& a, const std::string& b, const std::string& c);

  // The f32 value of `n`: a leaf's (an input, widened from its stored
  // type, or a reduction's value) from `leaf`, a constant, the column
  // count (`cols_f32`), or its op on its operands' values from `operand`,
  // asked in order (a, b, c), each writing its own lines first.
  std::string value(const Node& n, const std::function<std::string()>& leaf,
                    const std::function<std::string(int32_t)>& operand,
                    const std::string& cols_f32);

  // f32 to a stored type and back (no-ops for f32).
  std::string narrow(const std::string& v, DType dtype);
  std::string widen(const std::string& v, DType dtype);

 private:
  std::string unary(const char* mlir_op, const std::string& a);
  // `fusable`: a multiply or an add, which set_contract lets LLVM fuse.
  std::string binary(const char* mlir_op, const std::string& a, const std::string& b,
                     bool fusable = false);
  std::string lookup(int32_t table, const std::string& index);
  std::string sigmoid(const std::string& a);
  std::string approximate_division(const std::string& a, const std::string& b);
  // An NVVM intrinsic of one f32 argument (the GPU writer's only).
  std::string nvvm_intrinsic(const char* name, const std::string& a);

  const KernelGraph& graph_;
  std::ostream& out_;
  std::string indent_;
  int counter_ = 0;
  bool contract_ = false;
  bool nvvm_approximations_ = false;
};

// "f32" or "bf16": the MLIR element type a value is stored as.
const char* mlir_element_type(DType dtype);

// An f32 constant as MLIR's exact hexadecimal form (0x3F800000 for 1.0).
std::string mlir_f32_literal(double value);

// The graph's lookup tables as private constant memref.globals, one line
// each, @lt_table<k> of type mlir_table_type: for the top of a module (the
// CPU's) or of a gpu.module.
std::string mlir_table_globals(const KernelGraph& graph, const std::string& indent);
std::string mlir_table_type(size_t size);

// Per node, the reduction pass both writers compute it in: for a
// reduction, 1 + the latest pass among the reductions its operand needs;
// for another node, that latest pass (0: it needs none). Pass k's
// reductions read only values of passes before k.
std::vector<int> reduction_passes(const KernelGraph& graph);

}  // namespace lt::compile
