#include "compile/graph.h"

#include <algorithm>
#include <bit>
#include <cstdio>

#include "core/error.h"

namespace lt::compile {

const char* op_name(OpKind op) {
  switch (op) {
    case OpKind::Input:
      return "input";
    case OpKind::Constant:
      return "const";
    case OpKind::Cols:
      return "cols";
    case OpKind::Add:
      return "add";
    case OpKind::Sub:
      return "sub";
    case OpKind::Mul:
      return "mul";
    case OpKind::Div:
      return "div";
    case OpKind::Max:
      return "max";
    case OpKind::Less:
      return "less";
    case OpKind::Select:
      return "select";
    case OpKind::Abs:
      return "abs";
    case OpKind::Erf:
      return "erf";
    case OpKind::Neg:
      return "neg";
    case OpKind::Exp:
      return "exp";
    case OpKind::Log:
      return "log";
    case OpKind::Tanh:
      return "tanh";
    case OpKind::Sqrt:
      return "sqrt";
    case OpKind::Rsqrt:
      return "rsqrt";
    case OpKind::Sigmoid:
      return "sigmoid";
    case OpKind::Cast:
      return "cast";
    case OpKind::RowSum:
      return "row_sum";
    case OpKind::RowMax:
      return "row_max";
    case OpKind::Lookup:
      return "lookup";
    case OpKind::ColSum:
      return "col_sum";
  }
  return "?";
}

const char* shape_class_name(ShapeClass shape) {
  switch (shape) {
    case ShapeClass::Scalar:
      return "scalar";
    case ShapeClass::Row:
      return "row";
    case ShapeClass::Col:
      return "col";
    case ShapeClass::Full:
      return "full";
  }
  return "?";
}

bool is_reduction(OpKind op) {
  return op == OpKind::RowSum || op == OpKind::RowMax;
}

ShapeClass broadcast_shape(ShapeClass a, ShapeClass b) {
  if (a == b) return a;
  if (a == ShapeClass::Scalar) return b;
  if (b == ShapeClass::Scalar) return a;
  return ShapeClass::Full;  // Row with Col, or either with Full
}

namespace {
void check_storage_dtype(DType dtype, const char* what) {
  LT_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16, "compile: ", what,
           " must be f32, bf16 or f16, got ", dtype_name(dtype));
}
// Inputs and outputs may also hold 8-bit codes.
void check_buffer_dtype(DType dtype, const char* what) {
  LT_CHECK(dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16 ||
               dtype == DType::U8 || dtype == DType::I8,
           "compile: ", what, " must be stored as f32, bf16, f16, u8 or i8, got ",
           dtype_name(dtype));
}
}  // namespace

Value KernelGraph::push(Node node) {
  for (int32_t operand : {node.a, node.b, node.c}) {
    LT_CHECK(operand < 0 || nodes_[static_cast<size_t>(operand)].op != OpKind::ColSum,
             "compile: a col_sum is an output only; ", op_name(node.op), " cannot read it");
  }
  nodes_.push_back(node);
  return Value{static_cast<int32_t>(nodes_.size() - 1)};
}

const Node& KernelGraph::checked(Value v, const char* what) const {
  LT_CHECK(v.id >= 0 && static_cast<size_t>(v.id) < nodes_.size(), "compile: the operand of ", what,
           " is not a value of this graph (id ", v.id, ")");
  return nodes_[static_cast<size_t>(v.id)];
}

Value KernelGraph::input(ShapeClass shape, DType dtype) {
  LT_CHECK(shape != ShapeClass::Scalar, "compile: an input is full, row or col, not scalar");
  check_buffer_dtype(dtype, "an input");
  Node n;
  n.op = OpKind::Input;
  n.shape = shape;
  n.dtype = dtype;
  n.input_index = static_cast<int32_t>(inputs_.size());
  inputs_.push_back({shape, dtype});
  return push(n);
}

Value KernelGraph::mapped_input(DType dtype, RowMap map) {
  LT_CHECK(map.pitch >= 1 && map.group >= 1 && map.period >= 0,
           "compile: a row map needs pitch >= 1, group >= 1 and period >= 0, got ", map.pitch, ", ",
           map.group, ", ", map.period);
  const Value v = input(ShapeClass::Full, dtype);
  inputs_.back().map = map;
  return v;
}

int64_t mapped_row(const RowMap& map, int64_t row) {
  const int64_t entry = row / map.group;
  return map.period > 0 ? entry % map.period : entry;
}

int64_t mapped_index(const RowMap& map, int64_t row, int64_t col, int64_t cols) {
  return mapped_row(map, row) * map.pitch * cols + col;
}

int64_t mapped_entries(const RowMap& map, int64_t rows) {
  const int64_t entries = (rows + map.group - 1) / map.group;
  return map.period > 0 ? std::min(entries, map.period) : entries;
}

int64_t mapped_span(const RowMap& map, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return 0;
  return (mapped_entries(map, rows) - 1) * map.pitch * cols + cols;
}

Value KernelGraph::constant(double value) {
  Node n;
  n.op = OpKind::Constant;
  n.constant = value;
  return push(n);
}

Value KernelGraph::cols() {
  Node n;
  n.op = OpKind::Cols;
  return push(n);
}

Value KernelGraph::binary(OpKind op, Value a, Value b) {
  Node n;
  n.op = op;
  n.a = a.id;
  n.b = b.id;
  n.shape = broadcast_shape(checked(a, op_name(op)).shape, checked(b, op_name(op)).shape);
  return push(n);
}

Value KernelGraph::select(Value condition, Value if_true, Value if_false) {
  Node n;
  n.op = OpKind::Select;
  n.a = condition.id;
  n.b = if_true.id;
  n.c = if_false.id;
  n.shape = broadcast_shape(
      checked(condition, "select").shape,
      broadcast_shape(checked(if_true, "select").shape, checked(if_false, "select").shape));
  return push(n);
}

Value KernelGraph::unary(OpKind op, Value a) {
  Node n;
  n.op = op;
  n.a = a.id;
  n.shape = checked(a, op_name(op)).shape;
  return push(n);
}

Value KernelGraph::cast(Value a, DType dtype) {
  check_storage_dtype(dtype, "a cast's target");
  Value v = unary(OpKind::Cast, a);
  nodes_.back().dtype = dtype;
  return v;
}

Value KernelGraph::lookup(std::span<const float> table, Value index) {
  LT_CHECK(!table.empty() && table.size() <= kMaxTableSize, "compile: a lookup table holds 1 to ",
           kMaxTableSize, " values, got ", table.size());
  // Equal bit for bit, so that -0.0 and 0.0 (or two NaNs) stay what they are.
  const auto same = [&](const std::vector<float>& t) {
    return std::equal(t.begin(), t.end(), table.begin(), table.end(), [](float x, float y) {
      return std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y);
    });
  };
  auto it = std::find_if(tables_.begin(), tables_.end(), same);
  if (it == tables_.end()) it = tables_.insert(tables_.end(), {table.begin(), table.end()});
  Value v = unary(OpKind::Lookup, index);
  nodes_.back().table = static_cast<int32_t>(it - tables_.begin());
  return v;
}

Value KernelGraph::copy_op(const KernelGraph& from, const Node& n,
                           const std::function<Value(int32_t)>& operand) {
  switch (n.op) {
    case OpKind::Constant:
      return constant(n.constant);
    case OpKind::Cols:
      return cols();
    case OpKind::Select: {
      const Value a = operand(n.a), b = operand(n.b);
      return select(a, b, operand(n.c));
    }
    case OpKind::Cast:
      return cast(operand(n.a), n.dtype);
    case OpKind::RowSum:
    case OpKind::RowMax:
      return reduce(n.op, operand(n.a));
    case OpKind::ColSum:
      return col_sum(operand(n.a));
    case OpKind::Lookup:
      return lookup(from.tables()[static_cast<size_t>(n.table)], operand(n.a));
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
    case OpKind::Max:
    case OpKind::Less: {
      const Value a = operand(n.a);
      return binary(n.op, a, operand(n.b));
    }
    case OpKind::Neg:
    case OpKind::Abs:
    case OpKind::Exp:
    case OpKind::Log:
    case OpKind::Tanh:
    case OpKind::Sqrt:
    case OpKind::Rsqrt:
    case OpKind::Sigmoid:
    case OpKind::Erf:
      return unary(n.op, operand(n.a));
    case OpKind::Input:
      break;
  }
  fail("compile: copy_op of a ", op_name(n.op), " (an input is the caller's)");
}

Value KernelGraph::reduce(OpKind op, Value a) {
  LT_CHECK(checked(a, op_name(op)).shape == ShapeClass::Full, "compile: ", op_name(op),
           " reduces a full value along its rows, got a ",
           shape_class_name(nodes_[static_cast<size_t>(a.id)].shape), " value");
  Node n;
  n.op = op;
  n.a = a.id;
  n.shape = ShapeClass::Row;
  return push(n);
}

Value KernelGraph::col_sum(Value a) {
  LT_CHECK(checked(a, "col_sum").shape == ShapeClass::Full,
           "compile: col_sum sums a full value over its rows, got a ",
           shape_class_name(nodes_[static_cast<size_t>(a.id)].shape), " value");
  Node n;
  n.op = OpKind::ColSum;
  n.a = a.id;
  n.shape = ShapeClass::Col;
  return push(n);
}

void KernelGraph::output(Value v, DType dtype) {
  const Node& n = checked(v, "output");
  if (n.op == OpKind::ColSum) {
    LT_CHECK(dtype == DType::F32, "compile: a col_sum output is stored as f32, got ",
             dtype_name(dtype));
    LT_CHECK(std::none_of(outputs_.begin(), outputs_.end(),
                          [](const OutputSpec& o) { return o.over >= 0; }),
             "compile: a kernel with col_sum outputs writes no output over an input");
    outputs_.push_back({v.id, dtype});
    return;
  }
  LT_CHECK(n.shape == ShapeClass::Full || n.shape == ShapeClass::Row,
           "compile: an output is full, row or a col_sum, got a ", shape_class_name(n.shape),
           " value");
  check_buffer_dtype(dtype, "an output");
  outputs_.push_back({v.id, dtype});
}

bool KernelGraph::has_col_sums() const {
  return std::any_of(outputs_.begin(), outputs_.end(),
                     [&](const OutputSpec& o) { return node(o.node).op == OpKind::ColSum; });
}

void KernelGraph::output_pitched(Value v, DType dtype, int64_t pitch) {
  LT_CHECK(pitch >= 1, "compile: an output's pitch is >= 1, got ", pitch);
  LT_CHECK(pitch == 1 || checked(v, "output_pitched").shape == ShapeClass::Full,
           "compile: a pitched output is full");
  output(v, dtype);
  outputs_.back().pitch = pitch;
}

void KernelGraph::output_over(Value v, Value input) {
  const Node& in = checked(input, "output_over");
  LT_CHECK(in.op == OpKind::Input && in.shape == ShapeClass::Full,
           "compile: an output is written over a full input, got a ", shape_class_name(in.shape),
           " ", op_name(in.op));
  LT_CHECK(checked(v, "output_over").shape == ShapeClass::Full,
           "compile: an output written over an input is full, got a ",
           shape_class_name(nodes_[static_cast<size_t>(v.id)].shape), " value");
  LT_CHECK(inputs_[static_cast<size_t>(in.input_index)].map.identity(),
           "compile: an output is written over a dense input, not a mapped one");
  for (const OutputSpec& o : outputs_) {
    LT_CHECK(o.over != in.input_index, "compile: input ", in.input_index,
             " already takes an output");
  }
  // The col sums' GPU form may read a row again after writing it (column
  // tiles, compile/gpu_mlir.h): no output is written in place there.
  LT_CHECK(!has_col_sums(),
           "compile: a kernel with col_sum outputs writes no output over an input");
  output(v, in.dtype);
  outputs_.back().over = in.input_index;
}

std::string KernelGraph::key() const {
  // One token per node in order; constants in hex float, so that the key
  // is exact and two constants that print alike in decimal stay distinct.
  std::string out;
  char buf[64];
  for (const Node& n : nodes_) {
    out += op_name(n.op);
    switch (n.op) {
      case OpKind::Input:
        out += shape_class_name(n.shape);
        out += ':';
        out += dtype_name(n.dtype);
        if (const RowMap& m = inputs_[static_cast<size_t>(n.input_index)].map; !m.identity()) {
          out += "~p" + std::to_string(m.pitch) + 'g' + std::to_string(m.group) + 'r' +
                 std::to_string(m.period);
        }
        break;
      case OpKind::Constant:
        std::snprintf(buf, sizeof buf, "%a", n.constant);
        out += buf;
        break;
      case OpKind::Cast:
        out += dtype_name(n.dtype);
        break;
      case OpKind::Lookup:
        out += 't' + std::to_string(n.table);
        break;
      default:
        break;
    }
    if (n.a >= 0) out += '(' + std::to_string(n.a);
    if (n.b >= 0) out += ',' + std::to_string(n.b);
    if (n.c >= 0) out += ',' + std::to_string(n.c);
    if (n.a >= 0) out += ')';
    out += ';';
  }
  out += "->";
  for (const OutputSpec& o : outputs_) {
    out += std::to_string(o.node) + ':' + dtype_name(o.dtype);
    if (o.over >= 0) out += "@in" + std::to_string(o.over);
    if (o.pitch != 1) out += "~p" + std::to_string(o.pitch);
    out += ';';
  }
  // The tables' values as their f32 bits in hex: exact, and a table of
  // other values is another key (the kernel holds them).
  for (size_t t = 0; t < tables_.size(); ++t) {
    out += " t" + std::to_string(t) + '[' + std::to_string(tables_[t].size()) + "]=";
    for (float x : tables_[t]) {
      std::snprintf(buf, sizeof buf, "%08x", std::bit_cast<uint32_t>(x));
      out += buf;
    }
  }
  return out;
}

std::vector<bool> depended_on(const KernelGraph& graph, const std::vector<int32_t>& roots,
                              const std::function<bool(const Node&)>& stop) {
  std::vector<bool> marked(graph.nodes().size(), false);
  for (int32_t id : roots) marked[static_cast<size_t>(id)] = true;
  for (size_t id = graph.nodes().size(); id-- > 0;) {  // operands come before their users
    const Node& n = graph.nodes()[id];
    if (!marked[id] || (stop && stop(n))) continue;
    for (int32_t operand : {n.a, n.b, n.c}) {
      if (operand >= 0) marked[static_cast<size_t>(operand)] = true;
    }
  }
  return marked;
}

std::vector<int32_t> full_inputs_among(const KernelGraph& graph, const std::vector<bool>& marked) {
  std::vector<int32_t> inputs;
  for (size_t id = 0; id < graph.nodes().size(); ++id) {
    const Node& n = graph.nodes()[id];
    if (marked[id] && n.op == OpKind::Input && n.shape == ShapeClass::Full)
      inputs.push_back(static_cast<int32_t>(id));
  }
  return inputs;
}

}  // namespace lt::compile
