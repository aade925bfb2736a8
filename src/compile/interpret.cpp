#include "compile/interpret.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace lt::compile {

int64_t element_count(ShapeClass shape, int64_t rows, int64_t cols) {
  switch (shape) {
    case ShapeClass::Scalar:
      return 1;
    case ShapeClass::Row:
      return rows;
    case ShapeClass::Col:
      return cols;
    case ShapeClass::Full:
      return rows * cols;
  }
  return 0;
}

namespace {

// A half format's significant bits and smallest normal exponent (frexp's:
// x = m 2^exponent, 0.5 <= |m| < 1), and the largest finite value.
struct HalfFormat {
  int bits;
  int least_exponent;
  double largest;
};
constexpr HalfFormat kBf16{8, -125, 0x1.FEp127};
constexpr HalfFormat kF16{11, -13, 65504.0};

// The spacing of `format`'s values around x (nonzero, finite).
double spacing(double x, const HalfFormat& format) {
  int exponent = 0;
  std::frexp(x, &exponent);
  return std::ldexp(1.0, std::max(exponent, format.least_exponent) - format.bits);
}

double round_to(double x, const HalfFormat& format) {
  if (x == 0.0 || !std::isfinite(x)) return x;
  const double ulp = spacing(x, format);
  // nearbyint rounds ties to even in the default rounding mode.
  const double r = std::nearbyint(x / ulp) * ulp;
  // Past the largest value by half a spacing or more: infinity.
  if (std::abs(r) > format.largest) return std::copysign(HUGE_VAL, x);
  return r;
}

}  // namespace

double round_to_bf16(double x) {
  return round_to(x, kBf16);
}
double round_to_f16(double x) {
  return round_to(x, kF16);
}

int64_t input_count(const InputSpec& input, int64_t rows, int64_t cols) {
  if (input.shape == ShapeClass::Full && !input.map.identity())
    return mapped_span(input.map, rows, cols);
  return element_count(input.shape, rows, cols);
}

namespace {

// Where element (r, c) of the iteration space sits in a value of `shape`.
int64_t index_of(ShapeClass shape, int64_t r, int64_t c, int64_t cols) {
  switch (shape) {
    case ShapeClass::Scalar:
      return 0;
    case ShapeClass::Row:
      return r;
    case ShapeClass::Col:
      return c;
    case ShapeClass::Full:
      return r * cols + c;
  }
  return 0;
}

struct Evaluated {
  Values value;
  Values bound;  // rounding bound, f32 units (see Reference)
};

// The bound after rounding `x` (bound `e`) to a half format: 0 when x is
// farther from a rounding boundary than its error (both sides round to
// the same value), else the error plus one ulp of the format (Reference).
double rounded_bound(double x, double e, const HalfFormat& format) {
  if (x == 0.0 || !std::isfinite(x)) return e;
  const double ulp = spacing(x, format);
  const double to_boundary = ulp / 2 - std::abs(x - std::nearbyint(x / ulp) * ulp);
  if (to_boundary > kBoundSlack * 0x1.0p-24 * e) return 0.0;
  return e + ulp / 0x1.0p-24;
}

const HalfFormat* half_format(DType dtype) {
  return dtype == DType::BF16 ? &kBf16 : dtype == DType::F16 ? &kF16 : nullptr;
}

double nan_max(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<double>::quiet_NaN();
  return std::max(a, b);
}

// One elementwise op at one element: the value and its rounding bound.
// (Operands a, b, c with bounds ea, eb, ec; unused ones are 0.)
void apply(const Node& n, double a, double ea, double b, double eb, double c, double ec, double& v,
           double& e) {
  const double slack_u = kBoundSlack * 0x1.0p-24;
  switch (n.op) {
    case OpKind::Add:
      v = a + b;
      e = ea + eb + std::abs(v);
      return;
    case OpKind::Sub:
      v = a - b;
      e = ea + eb + std::abs(v);
      return;
    case OpKind::Mul:
      v = a * b;
      e = std::abs(b) * ea + std::abs(a) * eb + std::abs(v);
      return;
    case OpKind::Div:
      // Three roundings' worth: the GPU's a * rcp.approx(b) (compile/
      // mlir_scalar.h) is off by 1 ulp (2 units) in 1 / b, then rounds the
      // product; an IEEE division rounds once.
      v = a / b;
      e = ea / std::abs(b) + std::abs(a) * eb / (b * b) + 3 * std::abs(v);
      return;
    case OpKind::Max:
      v = nan_max(a, b);
      e = std::max(ea, eb);
      return;
    case OpKind::Less:
      // Exact unless a and b are within their errors of each other; then
      // either answer may come, a difference of 1.
      v = a < b ? 1.0 : 0.0;
      e = std::abs(a - b) > slack_u * (ea + eb) ? 0.0 : 0x1.0p24;
      return;
    case OpKind::Select: {
      v = a != 0.0 ? b : c;
      e = a != 0.0 ? eb : ec;
      // An uncertain condition may pick the other side.
      if (ea > 0) e = std::max(eb, ec) + std::abs(b - c) / 0x1.0p-24;
      return;
    }
    case OpKind::Neg:
      v = -a;
      e = ea;
      return;
    case OpKind::Abs:
      v = std::abs(a);
      e = ea;
      return;
    case OpKind::Erf:
      v = std::erf(a);
      e = 1.1283791670955126 * std::exp(-a * a) * ea + 2 * std::abs(v);  // 2/sqrt(pi)
      return;
    case OpKind::Exp:
      v = std::exp(a);
      e = std::abs(v) * ea + 2 * std::abs(v);
      return;
    case OpKind::Log:
      v = std::log(a);
      e = ea / std::abs(a) + 2 * std::abs(v);
      return;
    case OpKind::Tanh:
      v = std::tanh(a);
      e = (1 - v * v) * ea + 2 * std::abs(v);
      return;
    case OpKind::Sqrt:
      v = std::sqrt(a);
      // IEEE sqrt is correctly rounded: one rounding.
      e = (a > 0 ? 0.5 * v / a * ea : 0.0) + std::abs(v);
      return;
    case OpKind::Rsqrt:
      v = 1 / std::sqrt(a);
      e = 0.5 * std::abs(v / a) * ea + 2 * std::abs(v);
      return;
    case OpKind::Sigmoid:
      v = 1 / (1 + std::exp(-a));
      // Relative, in u: the reciprocal's 2 (the GPU's rcp.approx, 1 ulp;
      // an IEEE division 1) and the sum's 1, plus exp(-a)'s error through
      // 1 + exp(-a), times exp(-a) / (1 + exp(-a)) = 1 - v: 4 (2 ulp: the
      // GPU's ex2.approx, libm's expf 1) and the GPU's argument -a log2(e)
      // rounded, |a| (1 + 0.224) (the product's rounding and log2(e)'s in
      // f32, 2^(a log2 e) = e^a). Below f32's smallest normal, 2^126 <
      // exp(-a) can overflow or its reciprocal flush to 0: all of v is lost.
      // Measured on GELU, x sigmoid(2u) (GeluAccuracy.*: every bf16 input,
      // 2^20 f32 ones), where its value is above 2^-100: the CPU's output
      // at worst 0.54 of its bound (before the slack); a CPU model of the
      // GPU's (ex2 off by 2 ulp, rcp by 1, ftz) 0.84, 2.2 with both errors
      // four times that.
      e = v * (1 - v) * ea + v * (3 + (1 - v) * (4 + 1.25 * std::abs(a)));
      if (v < 0x1.0p-126) e += v / 0x1.0p-24;
      return;
    case OpKind::Cast:
      if (const HalfFormat* format = half_format(n.dtype)) {
        v = round_to(a, *format);
        e = rounded_bound(a, ea, *format);
      } else {
        v = a;
        e = ea;
      }
      return;
    default:
      fail("compile: interpret: ", op_name(n.op), " is not elementwise");
  }
}

// The entry a Lookup reads at index x (graph.h: truncated, clamped, NaN
// reads entry 0).
size_t table_entry(const std::vector<float>& table, double x) {
  if (!(x > 0)) return 0;
  return static_cast<size_t>(std::min(std::trunc(x), static_cast<double>(table.size() - 1)));
}

// A Lookup at one element. The value is the table's, exact; an index known
// only within its error may read any entry between the ends of that
// interval, so the bound is the largest difference to those.
void lookup_at(const std::vector<float>& table, double x, double ex, double& v, double& e) {
  const size_t at = table_entry(table, x);
  v = table[at];
  e = 0;
  if (ex == 0 || std::isnan(x)) return;
  const double reach = kBoundSlack * 0x1.0p-24 * ex;
  for (size_t k = table_entry(table, x - reach); k <= table_entry(table, x + reach); ++k) {
    e = std::max(e, std::abs(double{table[k]} - v) / 0x1.0p-24);
  }
}

}  // namespace

Reference interpret(const KernelGraph& graph, int64_t rows, int64_t cols,
                    const std::vector<Values>& inputs) {
  LT_CHECK(inputs.size() == graph.inputs().size(), "compile: interpret: the graph has ",
           graph.inputs().size(), " inputs, got ", inputs.size());
  std::vector<Evaluated> at(graph.nodes().size());
  for (size_t id = 0; id < graph.nodes().size(); ++id) {
    const Node& n = graph.nodes()[id];
    Evaluated& out = at[id];
    const int64_t count = element_count(n.shape, rows, cols);
    switch (n.op) {
      case OpKind::Input: {
        const Values& in = inputs[static_cast<size_t>(n.input_index)];
        const InputSpec& spec = graph.inputs()[static_cast<size_t>(n.input_index)];
        const int64_t stored = input_count(spec, rows, cols);
        LT_CHECK(static_cast<int64_t>(in.size()) == stored, "compile: interpret: input ",
                 n.input_index, " (", shape_class_name(n.shape), ") needs ", stored,
                 " values, got ", in.size());
        if (spec.map.identity()) {
          out.value = in;
        } else {
          out.value.resize(static_cast<size_t>(count));
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < cols; ++c) {
              out.value[static_cast<size_t>(r * cols + c)] =
                  in[static_cast<size_t>(mapped_index(spec.map, r, c, cols))];
            }
          }
        }
        out.bound.assign(out.value.size(), 0.0);
        continue;
      }
      case OpKind::Constant:
        out.value = {n.constant};
        out.bound = {std::abs(n.constant)};  // the constant rounded to f32
        continue;
      case OpKind::Cols:
        out.value = {static_cast<double>(cols)};
        out.bound = {0.0};
        continue;
      case OpKind::RowSum:
      case OpKind::RowMax: {
        const Evaluated& x = at[static_cast<size_t>(n.a)];
        out.value.assign(static_cast<size_t>(rows), 0.0);
        out.bound.assign(static_cast<size_t>(rows), 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          double acc = n.op == OpKind::RowSum ? 0.0 : -std::numeric_limits<double>::infinity();
          double err = 0, magnitude = 0;
          for (int64_t c = 0; c < cols; ++c) {
            const double xv = x.value[static_cast<size_t>(r * cols + c)];
            const double xe = x.bound[static_cast<size_t>(r * cols + c)];
            if (n.op == OpKind::RowSum) {
              acc += xv;
              err += xe;
              magnitude += std::abs(xv);
            } else {
              acc = nan_max(acc, xv);
              err = std::max(err, xe);
            }
          }
          // In-order f32 summation: each of the cols additions rounds a
          // partial sum no larger than the sum of magnitudes.
          if (n.op == OpKind::RowSum) err += static_cast<double>(cols) * magnitude;
          out.value[static_cast<size_t>(r)] = acc;
          out.bound[static_cast<size_t>(r)] = err;
        }
        continue;
      }
      case OpKind::ColSum: {
        const Evaluated& x = at[static_cast<size_t>(n.a)];
        out.value.assign(static_cast<size_t>(cols), 0.0);
        out.bound.assign(static_cast<size_t>(cols), 0.0);
        Values magnitude(static_cast<size_t>(cols), 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < cols; ++c) {
            const auto i = static_cast<size_t>(r * cols + c), j = static_cast<size_t>(c);
            out.value[j] += x.value[i];
            out.bound[j] += x.bound[i];
            magnitude[j] += std::abs(x.value[i]);
          }
        }
        // f32 sums in any order (the kernels add rows in blocks, then the
        // blocks): each element passes through at most `rows` additions, of
        // partial sums no larger than the sum of magnitudes.
        for (size_t j = 0; j < magnitude.size(); ++j) {
          out.bound[j] += static_cast<double>(rows) * magnitude[j];
        }
        continue;
      }
      default:
        break;
    }
    // Operands: a always, b and c when the op has them.
    const Node* na = &graph.node(n.a);
    const Node* nb = n.b >= 0 ? &graph.node(n.b) : nullptr;
    const Node* nc = n.c >= 0 ? &graph.node(n.c) : nullptr;
    const Evaluated& a = at[static_cast<size_t>(n.a)];
    const Evaluated* b = nb ? &at[static_cast<size_t>(n.b)] : nullptr;
    const Evaluated* c3 = nc ? &at[static_cast<size_t>(n.c)] : nullptr;
    out.value.resize(static_cast<size_t>(count));
    out.bound.resize(static_cast<size_t>(count));
    const int64_t iter_rows =
        (n.shape == ShapeClass::Full || n.shape == ShapeClass::Row) ? rows : 1;
    const int64_t iter_cols =
        (n.shape == ShapeClass::Full || n.shape == ShapeClass::Col) ? cols : 1;
    for (int64_t r = 0; r < iter_rows; ++r) {
      for (int64_t c = 0; c < iter_cols; ++c) {
        const auto ia = static_cast<size_t>(index_of(na->shape, r, c, cols));
        const size_t ib = nb ? static_cast<size_t>(index_of(nb->shape, r, c, cols)) : 0;
        const size_t ic = nc ? static_cast<size_t>(index_of(nc->shape, r, c, cols)) : 0;
        const auto io = static_cast<size_t>(index_of(n.shape, r, c, cols));
        if (n.op == OpKind::Lookup) {
          lookup_at(graph.tables()[static_cast<size_t>(n.table)], a.value[ia], a.bound[ia],
                    out.value[io], out.bound[io]);
          continue;
        }
        apply(n, a.value[ia], a.bound[ia], b ? b->value[ib] : 0.0, b ? b->bound[ib] : 0.0,
              c3 ? c3->value[ic] : 0.0, c3 ? c3->bound[ic] : 0.0, out.value[io], out.bound[io]);
      }
    }
  }

  Reference ref;
  for (const OutputSpec& o : graph.outputs()) {
    Evaluated stored = at[static_cast<size_t>(o.node)];
    ref.exact.push_back(stored.value);
    for (size_t i = 0; i < stored.value.size(); ++i) {
      double& v = stored.value[i];
      if (const HalfFormat* format = half_format(o.dtype)) {
        stored.bound[i] = rounded_bound(v, stored.bound[i], *format);
        v = round_to(v, *format);
      } else if (o.dtype == DType::U8 || o.dtype == DType::I8) {
        // A code: the integer part. Where the value is within its error of
        // an integer, either side of it may come: off by one.
        const double e = stored.bound[i];
        const bool settled =
            e == 0.0 || std::abs(v - std::nearbyint(v)) > kBoundSlack * 0x1.0p-24 * e;
        // A tolerance (kBoundSlack bounds) of one code, or none.
        stored.bound[i] = settled ? 0.0 : 1.0 / (kBoundSlack * 0x1.0p-24);
        v = std::trunc(v);
      } else {
        v = static_cast<double>(static_cast<float>(v));
        stored.bound[i] += std::abs(v);
      }
    }
    ref.outputs.push_back(std::move(stored.value));
    ref.rounding_bound.push_back(std::move(stored.bound));
  }
  return ref;
}

}  // namespace lt::compile
