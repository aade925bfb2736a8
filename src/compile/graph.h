#pragma once
// The fusion compiler's IR (issue 24): a small expression graph of
// elementwise ops and reductions along the last axis, which compile/lower.h
// turns into one kernel.
//
// Every value has a shape class over one [rows, cols] iteration space:
//   Full   [rows, cols]  a tensor viewed as rows of `cols` elements
//   Row    [rows]        one value per row (a row sum, a saved rstd)
//   Col    [cols]        one value per column (a norm's weight)
//   Scalar               a constant
// rows and cols are not part of the graph: a compiled kernel runs on any
// [rows, cols] (the "shape class" of the cache key is the classes above).
//
// Arithmetic is f32 whatever the storage type (as the hand-written CPU
// kernels compute half-precision data): an input stored as bf16 is widened
// when read, an output stored as bf16 is rounded when written, and a Cast
// to bf16 rounds in the middle of the chain (round to nearest even); f16
// (IEEE half: 11 significant bits, subnormals below 2^-14, inf from 65520)
// likewise. Inputs and outputs may also be stored as u8 or i8 (8-bit
// codes, such as 8-bit AdamW's states, or int8 values with a scale the
// graph multiplies by): read as the integer's f32 value; written as the
// integer part of the value (toward zero), which must lie in [0, 256) for
// u8 and (-129, 128) for i8 (the graph rounds and clamps it first).
//
// A Lookup reads a small constant f32 table (the graph's, compiled into the
// kernel as a global constant) at an index: table[trunc(index)], the index
// clamped to [0, size - 1] (a NaN index reads table[0]), so that no index
// reads outside the table.
//
// A ColSum sums a Full value over the rows into a Col value: a backward
// kernel's gradient of a [cols] input (a bias, a norm's weight), summed in
// the kernel rather than written per element and summed after. It is an
// output only (f32, read by no other op), so a kernel finishes its rows
// before any col sum is complete; each backend sums in a fixed order
// (compile/to_mlir.h, compile/gpu_mlir.h), so results repeat bit for bit.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace lt::compile {

enum class ShapeClass : uint8_t { Scalar, Row, Col, Full };

enum class OpKind : uint8_t {
  Input,     // inputs()[input_index]
  Constant,  // `constant`
  Cols,      // the number of columns, as a float (for means)
  Add,
  Sub,
  Mul,
  Div,
  Max,
  Less,    // 1 where a < b, else 0
  Select,  // b where a != 0, else c
  Neg,
  Abs,
  Exp,
  Log,
  Tanh,
  Sqrt,
  Rsqrt,
  Sigmoid,
  Erf,
  Cast,    // rounds to `dtype` (bf16 or f16) or keeps f32
  RowSum,  // Full -> Row, summed in order along the row
  RowMax,  // Full -> Row
  Lookup,  // tables()[table] at index a (see the top of this file)
  ColSum,  // Full -> Col, summed over the rows: an output only (see above)
};

const char* op_name(OpKind op);
const char* shape_class_name(ShapeClass shape);
// A row reduction (RowSum, RowMax): computed in a pass before the values
// that read it. ColSum is not one: it is summed along with the outputs.
bool is_reduction(OpKind op);

struct Value {
  int32_t id = -1;
};

struct Node {
  OpKind op = OpKind::Constant;
  int32_t a = -1, b = -1, c = -1;  // operand node ids (-1: none)
  ShapeClass shape = ShapeClass::Scalar;
  DType dtype = DType::F32;  // Input: storage type; Cast: target type
  int32_t input_index = -1;  // Input only
  double constant = 0.0;     // Constant only
  int32_t table = -1;        // Lookup only: tables()[table]
};

// Where a Full buffer keeps element (row, col) of the iteration space:
//   at entry(row) * pitch * cols + col, entry(row) = (row / group) % period
// (no % when period is 0). The identity (pitch 1, group 1, period 0) is a
// dense [rows, cols] buffer. pitch 2 reads or writes every other run of
// cols elements: the halves of RoPE's head vectors, in place in [..., 2
// cols] rows. group and period read a small table once per row group:
// RoPE's [T, cols] cos/sin tables for rows laid out (batch, position,
// head), group = heads, period = T. Compile-time constants: part of the key.
struct RowMap {
  int64_t pitch = 1;
  int64_t group = 1;
  int64_t period = 0;
  bool identity() const { return pitch == 1 && group == 1 && period == 0; }
  bool operator==(const RowMap&) const = default;
};
// The buffer entry of `row` (see RowMap) and the element index of (row, col).
int64_t mapped_row(const RowMap& map, int64_t row);
// The entries `rows` rows read: ceil(rows / group), at most period.
int64_t mapped_entries(const RowMap& map, int64_t rows);
int64_t mapped_index(const RowMap& map, int64_t row, int64_t col, int64_t cols);
// The elements a buffer so mapped spans for `rows` rows: from element 0
// to the last one read, (entries - 1) * pitch * cols + cols.
int64_t mapped_span(const RowMap& map, int64_t rows, int64_t cols);

struct InputSpec {
  ShapeClass shape;
  DType dtype;   // F32, BF16, F16, U8 or I8
  RowMap map{};  // Full inputs only (mapped_input)
};
struct OutputSpec {
  int32_t node;
  DType dtype;        // F32, BF16, F16, U8 or I8: the stored type
  int32_t over = -1;  // written over inputs()[over] (output_over), else -1
  int64_t pitch = 1;  // Full outputs: RowMap::pitch (output_pitched)
};

// Built with the methods below, which check operands as they go (an error
// names the op and what was wrong); nodes only refer to earlier nodes, so
// the node order is a topological order.
class KernelGraph {
 public:
  Value input(ShapeClass shape, DType dtype);
  // A Full input read through `map` (RowMap) instead of densely.
  Value mapped_input(DType dtype, RowMap map);
  Value constant(double value);
  Value cols();

  Value add(Value a, Value b) { return binary(OpKind::Add, a, b); }
  Value sub(Value a, Value b) { return binary(OpKind::Sub, a, b); }
  Value mul(Value a, Value b) { return binary(OpKind::Mul, a, b); }
  Value div(Value a, Value b) { return binary(OpKind::Div, a, b); }
  Value max(Value a, Value b) { return binary(OpKind::Max, a, b); }
  Value less(Value a, Value b) { return binary(OpKind::Less, a, b); }
  // where(condition != 0, if_true, if_false)
  Value select(Value condition, Value if_true, Value if_false);
  Value neg(Value a) { return unary(OpKind::Neg, a); }
  Value abs(Value a) { return unary(OpKind::Abs, a); }
  Value exp(Value a) { return unary(OpKind::Exp, a); }
  Value log(Value a) { return unary(OpKind::Log, a); }
  Value tanh(Value a) { return unary(OpKind::Tanh, a); }
  Value sqrt(Value a) { return unary(OpKind::Sqrt, a); }
  Value rsqrt(Value a) { return unary(OpKind::Rsqrt, a); }
  Value sigmoid(Value a) { return unary(OpKind::Sigmoid, a); }
  Value erf(Value a) { return unary(OpKind::Erf, a); }
  Value cast(Value a, DType dtype);
  Value row_sum(Value a) { return reduce(OpKind::RowSum, a); }
  Value row_max(Value a) { return reduce(OpKind::RowMax, a); }
  Value row_mean(Value a) { return div(row_sum(a), cols()); }
  // The sum over the rows of a Full value, for output() only (see the top).
  Value col_sum(Value a);
  // table[index] (see the top of this file). A table equal to one the
  // graph holds already is shared. 1 to kMaxTableSize values.
  Value lookup(std::span<const float> table, Value index);

  // An output of shape class Full or Row, stored as `dtype`, or a col_sum
  // (Col), stored as f32.
  void output(Value v, DType dtype);
  // A Full output written every `pitch` runs of cols (RowMap::pitch).
  void output_pitched(Value v, DType dtype, int64_t pitch);
  // A Full output written over `input` (a Full input of the same stored
  // type) instead of a buffer of its own: the kernel takes no parameter
  // for it, and each element is read (in every pass) before it is written.
  // In place, the kernel keeps one pointer per buffer, so the CPU's loops
  // still vectorize (two pointers to one buffer would take the scalar loop).
  void output_over(Value v, Value input);

  // Node `n` of graph `from` (any op but Input) added to this graph, its
  // operands `operand(n.a)`, `operand(n.b)`, `operand(n.c)` (asked only for
  // those it has, in that order), a lookup's table copied from `from`: for
  // passes that rebuild a graph op by op.
  Value copy_op(const KernelGraph& from, const Node& n,
                const std::function<Value(int32_t)>& operand);

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int32_t id) const { return nodes_.at(static_cast<size_t>(id)); }
  const std::vector<InputSpec>& inputs() const { return inputs_; }
  const std::vector<OutputSpec>& outputs() const { return outputs_; }
  const std::vector<std::vector<float>>& tables() const { return tables_; }
  // Whether an output is a col_sum (such kernels take a form of their own).
  bool has_col_sums() const;

  // The expression, the dtypes and the shape classes as one line of text:
  // two graphs with the same key compile to the same kernel (the cache key).
  // It holds every table's values, exactly: two tables never share a key.
  std::string key() const;

 private:
  Value binary(OpKind op, Value a, Value b);
  Value unary(OpKind op, Value a);
  Value reduce(OpKind op, Value a);
  Value push(Node node);
  const Node& checked(Value v, const char* what) const;

  std::vector<Node> nodes_;
  std::vector<InputSpec> inputs_;
  std::vector<OutputSpec> outputs_;
  std::vector<std::vector<float>> tables_;
};

// Per node of `graph`: whether one of `roots` (node ids) depends on it, the
// roots included, through the nodes' operands; the operands of a node for
// which `stop` holds (when given) are not followed.
std::vector<bool> depended_on(const KernelGraph& graph, const std::vector<int32_t>& roots,
                              const std::function<bool(const Node&)>& stop = {});
// The Full inputs among `marked` nodes (depended_on's answer), in node order.
std::vector<int32_t> full_inputs_among(const KernelGraph& graph, const std::vector<bool>& marked);

// Tables are small: each is compiled into the kernel, and its values into
// the cache key.
inline constexpr size_t kMaxTableSize = 4096;

// The class of an elementwise op's result: Row with Col is Full.
ShapeClass broadcast_shape(ShapeClass a, ShapeClass b);

}  // namespace lt::compile
