#include "compile/to_mlir.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "compile/mlir_scalar.h"
#include "core/error.h"

namespace lt::compile {
namespace {

const char* element_type(DType dtype) {
  return mlir_element_type(dtype);
}

// A memref handed to one linalg.generic, and the value it holds.
struct Operand {
  std::string name;  // SSA name of the memref
  ShapeClass shape;  // Full, Row or Col
  DType dtype;       // element type
  int32_t node;      // the node it holds (an Input or a reduction)
  RowMap map{};      // a Full buffer's (compile/graph.h)
};

// A mapped Full buffer (RowMap) is [entries, cols] with rows pitch * cols
// apart: a strided memref, which compile/jit.cpp describes so.
std::string memref_type(ShapeClass shape, DType dtype, const RowMap& map = {}) {
  if (shape == ShapeClass::Full && !map.identity())
    return std::string("memref<?x?x") + element_type(dtype) + ", strided<[?, 1]>>";
  return std::string(shape == ShapeClass::Full ? "memref<?x?x" : "memref<?x") +
         element_type(dtype) + ">";
}

// The entry of row d0 in a mapped buffer, as an affine expression.
std::string entry_expression(const RowMap& map) {
  std::string e = "d0";
  if (map.group != 1) e = "(" + e + " floordiv " + std::to_string(map.group) + ")";
  if (map.period > 0) e = "(" + e + " mod " + std::to_string(map.period) + ")";
  return e;
}

class MlirWriter {
 public:
  explicit MlirWriter(const KernelGraph& graph)
      : graph_(graph), s_(graph, out_, "    "), pass_(reduction_passes(graph)) {
    for (int p : pass_) passes_ = std::max(passes_, p);
  }

  std::string write(const std::string& name) {
    std::ostringstream fn;
    fn << "#full = affine_map<(d0, d1) -> (d0, d1)>\n"
       << "#row = affine_map<(d0, d1) -> (d0)>\n"
       << "#col = affine_map<(d0, d1) -> (d1)>\n"
       << "#row1 = affine_map<(d0) -> (d0)>\n"
       << mlir_table_globals(graph_, "") << "func.func @" << name << "(%rows: index, %cols: index";
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      const InputSpec& in = graph_.inputs()[i];
      fn << ", %in" << i << ": " << memref_type(in.shape, in.dtype, in.map);
    }
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const OutputSpec& out = graph_.outputs()[i];
      if (out.over >= 0) continue;  // written into its input's memref
      fn << ", %out" << i << ": "
         << memref_type(graph_.node(out.node).shape, out.dtype, RowMap{.pitch = out.pitch});
    }
    fn << ") {\n";
    out_ << "  %zero = arith.constant 0 : index\n"
         << "  %one = arith.constant 1 : index\n"
         << "  %cols_i64 = arith.index_cast %cols : index to i64\n"
         << "  %cols_f32 = arith.uitofp %cols_i64 : i64 to f32\n";
    for (int pass = 1; pass <= passes_; ++pass) write_reduction_pass(pass);
    if (graph_.has_col_sums()) {
      write_col_sum_pass();
    } else {
      write_output_pass(ShapeClass::Full);
    }
    write_output_pass(ShapeClass::Row);
    for (const auto& [node, buffer] : buffers_) {
      out_ << "  memref.dealloc " << buffer << " : memref<?xf32>\n";
    }
    out_ << "  return\n}\n";
    return fn.str() + out_.str();
  }

 private:
  // The memrefs the expressions of `roots` read: inputs, and reductions of
  // earlier passes (their buffers), in the order first met.
  std::vector<Operand> operands_of(const std::vector<int32_t>& roots) {
    std::vector<Operand> operands;
    std::vector<bool> seen(graph_.nodes().size(), false);
    std::vector<int32_t> stack(roots.rbegin(), roots.rend());
    while (!stack.empty()) {
      const int32_t id = stack.back();
      stack.pop_back();
      if (seen[static_cast<size_t>(id)]) continue;
      seen[static_cast<size_t>(id)] = true;
      const Node& n = graph_.node(id);
      if (n.op == OpKind::Input) {
        operands.push_back({"%in" + std::to_string(n.input_index), n.shape, n.dtype, id,
                            graph_.inputs()[static_cast<size_t>(n.input_index)].map});
      } else if (is_reduction(n.op)) {
        operands.push_back({buffers_.at(id), ShapeClass::Row, DType::F32, id});
      } else {
        if (n.c >= 0) stack.push_back(n.c);
        if (n.b >= 0) stack.push_back(n.b);
        if (n.a >= 0) stack.push_back(n.a);
      }
    }
    return operands;
  }

  // Emits the scalar ops of node `id` into the current generic's body and
  // returns its f32 SSA name. Leaves are the block arguments in `leaf_`.
  std::string emit(int32_t id) {
    if (auto it = value_.find(id); it != value_.end()) return it->second;
    const Node& n = graph_.node(id);
    std::string v;
    auto leaf = [&]() {
      auto it = leaf_.find(id);
      LT_CHECK(it != leaf_.end(), "compile: to_mlir: node ", id, " (", op_name(n.op),
               ") is not an operand of this pass");
      return it->second;
    };
    v = s_.value(
        n, leaf, [this](int32_t operand) { return emit(operand); }, "%cols_f32");
    value_[id] = v;
    return v;
  }

  std::string fresh() { return s_.fresh(); }

  // "ins(...)" and the block arguments for `operands`; fills leaf_.
  void open_generic(const std::vector<Operand>& ins, const std::vector<Operand>& outs, bool one_dim,
                    const char* iterators) {
    std::vector<std::string> maps;
    auto map_of = [&](const Operand& o) -> std::string {
      if (one_dim) return "#row1";
      if (o.shape == ShapeClass::Full && (o.map.group != 1 || o.map.period > 0))
        return "affine_map<(d0, d1) -> (" + entry_expression(o.map) + ", d1)>";
      return o.shape == ShapeClass::Full ? "#full" : o.shape == ShapeClass::Row ? "#row" : "#col";
    };
    for (const Operand& o : ins) maps.push_back(map_of(o));
    for (const Operand& o : outs) maps.push_back(map_of(o));
    out_ << "  linalg.generic {indexing_maps = [";
    for (size_t i = 0; i < maps.size(); ++i) out_ << (i ? ", " : "") << maps[i];
    out_ << "], iterator_types = [" << iterators << "]}";
    auto list = [&](const char* keyword, const std::vector<Operand>& ops) {
      if (ops.empty()) return;
      out_ << " " << keyword << "(";
      for (size_t i = 0; i < ops.size(); ++i) out_ << (i ? ", " : "") << ops[i].name;
      out_ << " : ";
      for (size_t i = 0; i < ops.size(); ++i) {
        out_ << (i ? ", " : "") << memref_type(ops[i].shape, ops[i].dtype, ops[i].map);
      }
      out_ << ")";
    };
    list("ins", ins);
    list("outs", outs);
    out_ << " {\n  ^bb0(";
    value_.clear();
    leaf_.clear();
    for (size_t i = 0; i < ins.size() + outs.size(); ++i) {
      const Operand& o = i < ins.size() ? ins[i] : outs[i - ins.size()];
      const std::string arg = "%a" + std::to_string(i);
      out_ << (i ? ", " : "") << arg << ": " << element_type(o.dtype);
      if (i < ins.size()) leaf_[o.node] = arg;
    }
    out_ << "):\n";
  }

  // A reduction pass as explicit loops, each row's accumulators in
  // registers (scf.for iter_args) and stored once per row: LLVM vectorizes
  // such a loop, where it kept linalg's (the accumulator loaded and stored
  // in its buffer at every column) scalar, steps and all.
  void write_reduction_pass(int pass) {
    std::vector<int32_t> reductions, roots;
    for (size_t id = 0; id < graph_.nodes().size(); ++id) {
      const Node& n = graph_.nodes()[id];
      if (is_reduction(n.op) && pass_[id] == pass) {
        reductions.push_back(static_cast<int32_t>(id));
        roots.push_back(n.a);
      }
    }
    const std::vector<Operand> ins = operands_of(roots);
    const std::string p = std::to_string(pass), r = "%r" + p, c = "%c" + p;
    std::string types;
    for (size_t k = 0; k < reductions.size(); ++k) types += k ? ", f32" : "f32";
    for (int32_t id : reductions) {
      const std::string buffer = "%red" + std::to_string(id);
      buffers_[id] = buffer;
      out_ << "  " << buffer << " = memref.alloc(%rows) : memref<?xf32>\n";
    }
    out_ << "  scf.for " << r << " = %zero to %rows step %one {\n";
    for (size_t k = 0; k < reductions.size(); ++k) {
      out_ << "    %init" << p << "_" << k << " = arith.constant "
           << (is_sum(reductions[k]) ? "0x00000000" : "0xFF800000") << " : f32\n";
    }
    out_ << "    %acc" << p << ":" << reductions.size() << " = scf.for " << c
         << " = %zero to %cols step %one iter_args(";
    for (size_t k = 0; k < reductions.size(); ++k) {
      out_ << (k ? ", " : "") << "%a" << p << "_" << k << " = %init" << p << "_" << k;
    }
    out_ << ") -> (" << types << ") {\n";
    s_.set_indent("      ");
    load_operands(ins, r, c);
    std::vector<std::string> next;
    for (size_t k = 0; k < reductions.size(); ++k) {
      const std::string x = emit(roots[k]);
      next.push_back(fresh());
      const std::string acc = "%a" + p + "_" + std::to_string(k);
      // The max as LLVM's intrinsic (arith.maximumf's own lowering): the
      // pipeline's arith-expand would make it a compare and selects, which
      // LLVM does not take for a reduction and leaves the loop scalar.
      if (is_sum(reductions[k])) {
        s_.line() << next.back() << " = arith.addf " << acc << ", " << x << " : f32\n";
      } else {
        s_.line() << next.back() << " = llvm.intr.maximum(" << acc << ", " << x
                  << ") : (f32, f32) -> f32\n";
      }
    }
    s_.line() << "scf.yield ";
    for (size_t k = 0; k < next.size(); ++k) out_ << (k ? ", " : "") << next[k];
    out_ << " : " << types << "\n    }\n";
    for (size_t k = 0; k < reductions.size(); ++k) {
      out_ << "    memref.store %acc" << p << "#" << k << ", " << buffers_.at(reductions[k]) << "["
           << r << "] : memref<?xf32>\n";
    }
    out_ << "  }\n";
    s_.set_indent("    ");
  }

  // Loads each of `ins` at row `r`, column `c` of explicit loops (SSA
  // names) as the leaves of the values emitted next.
  void load_operands(const std::vector<Operand>& ins, const std::string& r, const std::string& c) {
    value_.clear();
    leaf_.clear();
    for (const Operand& o : ins) {
      const std::string loaded = fresh();
      std::string entry = r;
      if (o.shape == ShapeClass::Full && (o.map.group != 1 || o.map.period > 0)) {
        entry = fresh();
        s_.line() << entry << " = affine.apply affine_map<(d0) -> (" << entry_expression(o.map)
                  << ")>(" << r << ")\n";
      }
      const std::string at = o.shape == ShapeClass::Full  ? entry + ", " + c
                             : o.shape == ShapeClass::Row ? r
                                                          : c;
      s_.line() << loaded << " = memref.load " << o.name << "[" << at
                << "] : " << memref_type(o.shape, o.dtype, o.map) << "\n";
      leaf_[o.node] = loaded;
    }
  }

  // With col sums (graph.h's ColSum), the full outputs and the col sums in
  // one loop nest, rows outer and in order: each col sum accumulates in its
  // [cols] output, zeroed first, so the sum is the same on every run.
  void write_col_sum_pass() {
    std::vector<size_t> full, sums;
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const Node& n = graph_.node(graph_.outputs()[i].node);
      if (n.op == OpKind::ColSum) sums.push_back(i);
      if (n.shape == ShapeClass::Full) full.push_back(i);
    }
    // The full outputs' values, then the col sums' operands.
    std::vector<int32_t> roots;
    for (size_t i : full) roots.push_back(graph_.outputs()[i].node);
    for (size_t i : sums) roots.push_back(graph_.node(graph_.outputs()[i].node).a);
    out_ << "  %sum_zero = arith.constant 0x00000000 : f32\n"
         << "  scf.for %cz = %zero to %cols step %one {\n";
    for (size_t i : sums)
      out_ << "    memref.store %sum_zero, %out" << i << "[%cz] : memref<?xf32>\n";
    out_ << "  }\n"
         << "  scf.for %rs = %zero to %rows step %one {\n"
         << "    scf.for %cs = %zero to %cols step %one {\n";
    s_.set_indent("      ");
    load_operands(operands_of(roots), "%rs", "%cs");
    std::vector<std::string> values;
    for (int32_t root : roots) values.push_back(emit(root));
    for (size_t k = 0; k < full.size(); ++k) {
      const OutputSpec& o = graph_.outputs()[full[k]];
      const std::string v = s_.narrow(values[k], o.dtype);
      s_.line() << "memref.store " << v << ", %out" << full[k] << "[%rs, %cs] : "
                << memref_type(ShapeClass::Full, o.dtype, RowMap{.pitch = o.pitch}) << "\n";
    }
    for (size_t k = 0; k < sums.size(); ++k) {
      const std::string out = "%out" + std::to_string(sums[k]), old = fresh(), sum = fresh();
      s_.line() << old << " = memref.load " << out << "[%cs] : memref<?xf32>\n";
      s_.line() << sum << " = arith.addf " << old << ", " << values[full.size() + k] << " : f32\n";
      s_.line() << "memref.store " << sum << ", " << out << "[%cs] : memref<?xf32>\n";
    }
    out_ << "    }\n  }\n";
    s_.set_indent("    ");
  }

  // The memref output i is stored to: its own, or the input it is
  // written over (the same SSA value as the input's loads, so LLVM sees
  // each element read, then written, at one address).
  static std::string output_memref(const OutputSpec& o, size_t i) {
    return o.over >= 0 ? "%in" + std::to_string(o.over) : "%out" + std::to_string(i);
  }

  bool is_sum(int32_t reduction) const { return graph_.node(reduction).op == OpKind::RowSum; }

  void write_output_pass(ShapeClass shape) {
    std::vector<int32_t> roots;
    std::vector<Operand> outs;
    std::vector<DType> dtypes;
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const OutputSpec& o = graph_.outputs()[i];
      if (graph_.node(o.node).shape != shape) continue;
      roots.push_back(o.node);
      outs.push_back({output_memref(o, i), shape, o.dtype, o.node, RowMap{.pitch = o.pitch}});
      dtypes.push_back(o.dtype);
    }
    if (roots.empty()) return;
    const bool one_dim = shape == ShapeClass::Row;
    open_generic(operands_of(roots), outs, one_dim,
                 one_dim ? "\"parallel\"" : "\"parallel\", \"parallel\"");
    std::vector<std::string> results;
    for (int32_t root : roots) results.push_back(emit(root));
    close_generic(results, dtypes);
  }

  void close_generic(const std::vector<std::string>& results, const std::vector<DType>& dtypes) {
    std::vector<std::string> stored;
    for (size_t i = 0; i < results.size(); ++i) stored.push_back(s_.narrow(results[i], dtypes[i]));
    out_ << "    linalg.yield ";
    for (size_t i = 0; i < stored.size(); ++i) out_ << (i ? ", " : "") << stored[i];
    out_ << " : ";
    for (size_t i = 0; i < stored.size(); ++i) out_ << (i ? ", " : "") << element_type(dtypes[i]);
    out_ << "\n  }\n";
  }

  const KernelGraph& graph_;
  std::ostringstream out_;
  ScalarWriter s_;
  std::vector<int> pass_;
  int passes_ = 0;
  std::map<int32_t, std::string> buffers_;  // reduction node -> its [rows] f32 buffer
  std::map<int32_t, std::string> leaf_;     // node -> block argument, current generic
  std::map<int32_t, std::string> value_;    // node -> f32 SSA value, current generic
};

}  // namespace

std::string to_mlir(const KernelGraph& graph, const std::string& function_name) {
  LT_CHECK(!graph.outputs().empty(), "compile: a kernel graph needs at least one output");
  return MlirWriter(graph).write(function_name);
}

}  // namespace lt::compile
