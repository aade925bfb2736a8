#include "compile/mlir_scalar.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>

#include "core/error.h"

namespace lt::compile {

const char* mlir_element_type(DType dtype) {
  switch (dtype) {
    case DType::U8:
    case DType::I8:
      return "i8";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "f16";
    default:
      return "f32";
  }
}

std::string mlir_f32_literal(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%08X", std::bit_cast<uint32_t>(static_cast<float>(value)));
  return buf;
}

std::string mlir_table_type(size_t size) {
  return "memref<" + std::to_string(size) + "xf32>";
}

std::string mlir_table_globals(const KernelGraph& graph, const std::string& indent) {
  std::string out;
  char byte[3];
  for (size_t t = 0; t < graph.tables().size(); ++t) {
    const std::vector<float>& table = graph.tables()[t];
    // The raw little-endian bytes (MLIR's hex form of a dense attribute):
    // exact, as the key holds the bits.
    out += indent + "memref.global \"private\" constant @lt_table" + std::to_string(t) + " : " +
           mlir_table_type(table.size()) + " = dense<\"0x";
    for (float x : table) {
      const uint32_t bits = std::bit_cast<uint32_t>(x);
      for (int shift = 0; shift < 32; shift += 8) {
        std::snprintf(byte, sizeof byte, "%02X", (bits >> shift) & 0xFFu);
        out += byte;
      }
    }
    out += "\">\n";
  }
  return out;
}

std::vector<int> reduction_passes(const KernelGraph& graph) {
  std::vector<int> pass(graph.nodes().size(), 0);
  for (size_t id = 0; id < graph.nodes().size(); ++id) {
    const Node& n = graph.nodes()[id];
    int p = 0;
    for (int32_t operand : {n.a, n.b, n.c}) {
      if (operand >= 0) p = std::max(p, pass[static_cast<size_t>(operand)]);
    }
    pass[id] = is_reduction(n.op) ? p + 1 : p;
  }
  return pass;
}

std::string ScalarWriter::constant(double value) {
  std::string r = fresh();
  line() << r << " = arith.constant " << mlir_f32_literal(value) << " : f32\n";
  return r;
}

std::string ScalarWriter::unary(const char* mlir_op, const std::string& a) {
  std::string r = fresh();
  line() << r << " = " << mlir_op << " " << a << " : f32\n";
  return r;
}

std::string ScalarWriter::binary(const char* mlir_op, const std::string& a, const std::string& b,
                                 bool fusable) {
  std::string r = fresh();
  line() << r << " = " << mlir_op << " " << a << ", " << b
         << (contract_ && fusable ? " fastmath<contract>" : "") << " : f32\n";
  return r;
}

// graph.h's Lookup: the index clamped into the table first, by ordered
// compares (false for a NaN, which so reads entry 0), so that the load
// stays inside the table whatever the index.
std::string ScalarWriter::lookup(int32_t table, const std::string& index) {
  const size_t size = graph_.tables().at(static_cast<size_t>(table)).size();
  const auto clamp = [&](const char* predicate, const std::string& x, const std::string& bound) {
    const std::string flag = fresh(), r = fresh();
    line() << flag << " = arith.cmpf " << predicate << ", " << x << ", " << bound << " : f32\n";
    line() << r << " = arith.select " << flag << ", " << x << ", " << bound << " : f32\n";
    return r;
  };
  const std::string low = clamp("ogt", index, constant(0.0));
  const std::string clamped = clamp("olt", low, constant(static_cast<double>(size - 1)));
  const std::string integer = fresh(), at = fresh(), memref = fresh();
  line() << integer << " = arith.fptoui " << clamped << " : f32 to i32\n";
  line() << at << " = arith.index_cast " << integer << " : i32 to index\n";
  const std::string type = mlir_table_type(size);
  line() << memref << " = memref.get_global @lt_table" << table << " : " << type << "\n";
  std::string r = fresh();
  line() << r << " = memref.load " << memref << "[" << at << "] : " << type << "\n";
  return r;
}

std::string ScalarWriter::nvvm_intrinsic(const char* name, const std::string& a) {
  std::string r = fresh();
  line() << r << " = llvm.call_intrinsic \"" << name << "\"(" << a << ") : (f32) -> f32\n";
  return r;
}

// 1 / (1 + exp(-a)). On the GPU, exp(-a) = 2^(a * -log2(e)): for a below
// about -87, 2^... overflows to inf (or, from 2^126 on, its reciprocal is
// flushed to 0), so sigmoid is 0 where its value is under f32's smallest
// normal, as the CPU's expf overflow gives from -88.7 on.
std::string ScalarWriter::sigmoid(const std::string& a) {
  const std::string one = constant(1.0);
  if (!nvvm_approximations_) {
    return binary("arith.divf", one,
                  binary("arith.addf", one, unary("math.exp", unary("arith.negf", a)),
                         /*fusable=*/true));
  }
  const std::string power = binary("arith.mulf", a, constant(-1.4426950408889634));
  const std::string e = nvvm_intrinsic("llvm.nvvm.ex2.approx.ftz.f", power);
  return nvvm_intrinsic("llvm.nvvm.rcp.approx.ftz.f", binary("arith.addf", e, one));
}

// a / b as (a s) * rcp.approx.ftz(b s): an IEEE division is a subroutine
// of some ten instructions and a branch per element of a softmax or a
// norm's backward, where for a row value b the scale and the reciprocal
// are computed once a row (LLVM hoists them out of the column loop). s is
// 1 for |b| in [2^-126, 2^126], whose reciprocal is normal; 2^64 below
// (a subnormal b, which ftz would flush to 0: 8-bit AdamW divides by a
// block's absmax) and 2^-64 above (whose reciprocal ftz would flush), both
// exact scalings. Three roundings at most (the reciprocal's 1 ulp, the
// product's); a product that leaves f32's range is the quotient's
// overflow or underflow too. 0, inf and NaN give IEEE's answers.
std::string ScalarWriter::approximate_division(const std::string& a, const std::string& b) {
  const std::string magnitude = unary("math.absf", b);
  const std::string least = constant(0x1.0p-126), most = constant(0x1.0p126);
  const std::string up = constant(0x1.0p64), down = constant(0x1.0p-64), one = constant(1.0);
  const std::string tiny = fresh(), huge = fresh(), up_or_one = fresh(), s = fresh();
  line() << tiny << " = arith.cmpf olt, " << magnitude << ", " << least << " : f32\n";
  line() << huge << " = arith.cmpf ogt, " << magnitude << ", " << most << " : f32\n";
  line() << up_or_one << " = arith.select " << tiny << ", " << up << ", " << one << " : f32\n";
  line() << s << " = arith.select " << huge << ", " << down << ", " << up_or_one << " : f32\n";
  const std::string reciprocal =
      nvvm_intrinsic("llvm.nvvm.rcp.approx.ftz.f", binary("arith.mulf", b, s));
  return binary("arith.mulf", binary("arith.mulf", a, s), reciprocal);
}

std::string ScalarWriter::op(const Node& n, const std::string& a, const std::string& b,
                             const std::string& c) {
  switch (n.op) {
    case OpKind::Add:
      return binary("arith.addf", a, b, /*fusable=*/true);
    case OpKind::Sub:
      return binary("arith.subf", a, b, /*fusable=*/true);
    case OpKind::Mul:
      return binary("arith.mulf", a, b, /*fusable=*/true);
    case OpKind::Div:
      if (nvvm_approximations_) return approximate_division(a, b);
      return binary("arith.divf", a, b);
    case OpKind::Max:
      return binary("arith.maximumf", a, b);
    case OpKind::Less: {
      const std::string flag = fresh();
      line() << flag << " = arith.cmpf olt, " << a << ", " << b << " : f32\n";
      std::string r = fresh();
      line() << r << " = arith.uitofp " << flag << " : i1 to f32\n";
      return r;
    }
    case OpKind::Select: {
      const std::string zero = constant(0.0);
      const std::string flag = fresh();
      line() << flag << " = arith.cmpf une, " << a << ", " << zero << " : f32\n";
      std::string r = fresh();
      line() << r << " = arith.select " << flag << ", " << b << ", " << c << " : f32\n";
      return r;
    }
    case OpKind::Neg:
      return unary("arith.negf", a);
    case OpKind::Abs:
      return unary("math.absf", a);
    case OpKind::Erf:
      return unary("math.erf", a);
    case OpKind::Exp:
      return unary("math.exp", a);
    case OpKind::Log:
      return unary("math.log", a);
    case OpKind::Tanh:
      return unary("math.tanh", a);
    case OpKind::Sqrt:
      return unary("math.sqrt", a);
    case OpKind::Rsqrt:
      // 1 / sqrt: MLIR 19's math-to-llvm leaves a scalar math.rsqrt illegal.
      return binary("arith.divf", constant(1.0), unary("math.sqrt", a));
    case OpKind::Sigmoid:
      return sigmoid(a);
    case OpKind::Cast:
      return n.dtype == DType::F32 ? a : widen(narrow(a, n.dtype), n.dtype);
    case OpKind::Lookup:
      return lookup(n.table, a);
    case OpKind::Input:
    case OpKind::Constant:
    case OpKind::Cols:
    case OpKind::RowSum:
    case OpKind::RowMax:
    case OpKind::ColSum:
      break;
  }
  fail("compile: ScalarWriter::op got ", op_name(n.op), ", which its caller writes");
}

std::string ScalarWriter::value(const Node& n, const std::function<std::string()>& leaf,
                                const std::function<std::string(int32_t)>& operand,
                                const std::string& cols_f32) {
  if (n.op == OpKind::Input) return widen(leaf(), n.dtype);
  if (is_reduction(n.op)) return leaf();
  if (n.op == OpKind::Constant) return constant(n.constant);
  if (n.op == OpKind::Cols) return cols_f32;
  const std::string a = n.a >= 0 ? operand(n.a) : "";
  const std::string b = n.b >= 0 ? operand(n.b) : "";
  const std::string c = n.c >= 0 ? operand(n.c) : "";
  return op(n, a, b, c);
}

std::string ScalarWriter::narrow(const std::string& v, DType dtype) {
  if (dtype == DType::F32) return v;
  std::string r = fresh();
  // u8, i8: the integer part (graph.h: the value lies in their range).
  const char* op = dtype == DType::U8   ? "arith.fptoui "
                   : dtype == DType::I8 ? "arith.fptosi "
                                        : "arith.truncf ";
  line() << r << " = " << op << v << " : f32 to " << mlir_element_type(dtype) << "\n";
  return r;
}

std::string ScalarWriter::widen(const std::string& v, DType dtype) {
  if (dtype == DType::F32) return v;
  std::string r = fresh();
  const char* op = dtype == DType::U8   ? "arith.uitofp "
                   : dtype == DType::I8 ? "arith.sitofp "
                                        : "arith.extf ";
  line() << r << " = " << op << v << " : " << mlir_element_type(dtype) << " to f32\n";
  return r;
}

}  // namespace lt::compile
