#include "compile/gpu_mlir.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include "compile/mlir_scalar.h"
#include "core/error.h"

namespace lt::compile {
namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = kGpuThreadsPerBlock / kWarp;
static_assert(kGpuThreadsPerBlock % kWarp == 0);
// A warp's pass offsets its columns by the constants %c0 .. %c7.
static_assert(kGpuWarpPassColumns >= 1 && kGpuWarpPassColumns <= kWarpsPerBlock);

std::string memref_type(DType dtype) {
  return std::string("memref<?x") + mlir_element_type(dtype) + ">";
}

const std::string kPartialsType =
    "memref<" + std::to_string(kWarpsPerBlock) + "xf32, #gpu.address_space<workgroup>>";

// The element a value of each shape class is at, inside one region: the
// linear index of a Full value, the row and the column. A region that has
// no column (the row outputs) leaves `full` and `col` empty.
struct Indices {
  std::string full, row, col;
};

// The reduction nodes of `graph`, in node order.
std::vector<int32_t> reduction_nodes(const KernelGraph& graph) {
  std::vector<int32_t> out;
  for (size_t id = 0; id < graph.nodes().size(); ++id) {
    if (is_reduction(graph.nodes()[id].op)) out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

class GpuWriter {
 public:
  GpuWriter(const KernelGraph& graph, const GpuForms& forms)
      : graph_(graph),
        s_(graph, out_, "    "),
        pass_(reduction_passes(graph)),
        reductions_(reduction_nodes(graph)),
        forms_(gpu_forms_for(graph, forms)) {
    for (int p : pass_) passes_ = std::max(passes_, p);
    s_.set_contract(true);
    s_.set_nvvm_approximations(true);
  }

  std::string write() {
    std::ostringstream head;
    head << "module attributes {gpu.container_module} {\n"
         << "gpu.module @lt_kernels {\n"
         << mlir_table_globals(graph_, "  ") << "  gpu.func @" << kGpuEntry
         << "(%rows: index, %cols: index";
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      head << ", %in" << i << ": " << memref_type(graph_.inputs()[i].dtype);
    }
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      if (graph_.outputs()[i].over >= 0) continue;  // stored into its input's memref
      head << ", %out" << i << ": " << memref_type(graph_.outputs()[i].dtype);
    }
    head << ")";
    const GpuLaunchForm form = gpu_launch_form(graph_);
    if (form != GpuLaunchForm::Elementwise) {
      head << " workgroup(%partials : " << kPartialsType;
      // ColSums' row groups (write_col_sums): each warp's reduced values.
      if (form == GpuLaunchForm::ColSums && !reductions_.empty())
        head << ", %stats : " << stats_type();
      head << ")";
    }
    head << " kernel";
    if (form == GpuLaunchForm::ColSums) {
      head << " attributes {nvvm.maxntid = array<i32: " << kGpuThreadsPerBlock
           << ", 1, 1>, nvvm.minctasm = " << kGpuColSumBlocksPerSm << " : i32}";
    }
    head << " {\n";
    write_constants();
    if (form == GpuLaunchForm::Elementwise && forms_.elements_per_thread > 1 && forms_.packed) {
      write_packed();
    } else if (form == GpuLaunchForm::Elementwise && forms_.elements_per_thread > 1) {
      write_elementwise_steps();
    } else if (form == GpuLaunchForm::Elementwise) {
      write_elementwise();
    } else if (form == GpuLaunchForm::ColSums) {
      write_col_sums();
    } else {
      write_row_per_block();
    }
    out_ << "    gpu.return\n  }\n";
    if (form == GpuLaunchForm::ColSums) write_partials_sum_kernel();
    out_ << "}\n}\n";
    return head.str() + out_.str();
  }

 private:
  void write_constants() {
    for (int i = 0; i < kWarpsPerBlock; ++i) {
      out_ << "    %c" << i << " = arith.constant " << i << " : index\n";
    }
    out_ << "    %warp_size = arith.constant " << kWarp << " : index\n"
         << "    %threads = arith.constant " << kGpuThreadsPerBlock << " : index\n"
         << "    %width = arith.constant " << kWarp << " : i32\n";
    for (int offset = kWarp / 2; offset >= 1; offset /= 2) {
      out_ << "    %xor" << offset << " = arith.constant " << offset << " : i32\n";
    }
    out_ << "    %cols_i64 = arith.index_cast %cols : index to i64\n"
         << "    %cols_f32 = arith.uitofp %cols_i64 : i64 to f32\n"
         << "    %tid = gpu.thread_id x\n";
  }

  // A region's values are its own: SSA values defined in one loop body are
  // not visible in the next. Reduced values (defined in the kernel's body)
  // are visible everywhere after their pass.
  void open_region(Indices at, const char* indent) {
    at_ = std::move(at);
    value_.clear();
    s_.set_indent(indent);
  }

  std::string emit(int32_t id) {
    if (auto it = value_.find(id); it != value_.end()) return it->second;
    const Node& n = graph_.node(id);
    std::string v;
    // A leaf: an input loaded at this region's index, or a reduction's
    // value from its pass.
    const auto leaf = [&]() -> std::string {
      if (n.op == OpKind::Input) return load(n);
      auto it = reduced_.find(id);
      LT_CHECK(it != reduced_.end(), "compile: to_gpu_mlir: reduction ", id,
               " is read before its pass");
      return it->second;
    };
    v = s_.value(
        n, leaf, [this](int32_t operand) { return emit(operand); }, "%cols_f32");
    value_[id] = v;
    return v;
  }

  const std::string& index_of(ShapeClass shape) const {
    const std::string& index = shape == ShapeClass::Full  ? at_.full
                               : shape == ShapeClass::Row ? at_.row
                                                          : at_.col;
    LT_CHECK(!index.empty(), "compile: to_gpu_mlir: a ", shape_class_name(shape),
             " value read where there is no such index");
    return index;
  }

  std::string load(const Node& input) {
    if (packed_lane_ >= 0 && input.shape == ShapeClass::Full) {
      return pack_elements_.at(input.input_index).at(static_cast<size_t>(packed_lane_));
    }
    const RowMap& map = graph_.inputs()[static_cast<size_t>(input.input_index)].map;
    const std::string index =
        input.shape == ShapeClass::Full ? full_index(map, at_.row, at_.col) : index_of(input.shape);
    std::string r = s_.fresh();
    s_.line() << r << " = memref.load %in" << input.input_index << "[" << index
              << "] : " << memref_type(input.dtype) << "\n";
    return r;
  }

  // Where a Full buffer mapped by `map` (compile/graph.h's RowMap) keeps
  // element (row, col): the region's linear index when dense.
  std::string full_index(const RowMap& map, const std::string& row, const std::string& col) {
    if (map.identity()) return index_of(ShapeClass::Full);
    LT_CHECK(!row.empty() && !col.empty(),
             "compile: to_gpu_mlir: a mapped value read where there is no row and column");
    const auto constant = [&](int64_t value) {
      const std::string c = s_.fresh();
      s_.line() << c << " = arith.constant " << value << " : index\n";
      return c;
    };
    const auto apply = [&](const char* op, const std::string& a, const std::string& b) {
      const std::string r = s_.fresh();
      s_.line() << r << " = " << op << " " << a << ", " << b << " : index\n";
      return r;
    };
    std::string entry = row;
    if (map.group != 1) entry = apply("arith.divui", entry, constant(map.group));
    if (map.period > 0) entry = apply("arith.remui", entry, constant(map.period));
    const std::string run =
        map.pitch == 1 ? std::string("%cols") : apply("arith.muli", "%cols", constant(map.pitch));
    return apply("arith.addi", apply("arith.muli", entry, run), col);
  }

  // Every output's value first, then the stores: an output written over an
  // input must not be stored before another output has read that input.
  void store_outputs(ShapeClass shape) {
    std::vector<std::pair<size_t, std::string>> stored;
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const OutputSpec& o = graph_.outputs()[i];
      if (graph_.node(o.node).shape != shape) continue;
      stored.emplace_back(i, s_.narrow(emit(o.node), o.dtype));
    }
    for (const auto& [i, v] : stored) {
      const OutputSpec& o = graph_.outputs()[i];
      const std::string memref =
          o.over >= 0 ? "%in" + std::to_string(o.over) : "%out" + std::to_string(i);
      const std::string index = shape == ShapeClass::Full
                                    ? full_index(RowMap{.pitch = o.pitch}, at_.row, at_.col)
                                    : index_of(shape);
      s_.line() << "memref.store " << v << ", " << memref << "[" << index
                << "] : " << memref_type(o.dtype) << "\n";
    }
  }

  bool has_output(ShapeClass shape) const {
    return std::any_of(graph_.outputs().begin(), graph_.outputs().end(),
                       [&](const OutputSpec& o) { return graph_.node(o.node).shape == shape; });
  }

  void write_elementwise() {
    out_ << "    %block = gpu.block_id x\n"
         << "    %grid = gpu.grid_dim x\n"
         << "    %count = arith.muli %rows, %cols : index\n"
         << "    %block_first = arith.muli %block, %threads : index\n"
         << "    %first = arith.addi %block_first, %tid : index\n"
         << "    %stride = arith.muli %grid, %threads : index\n";
    write_one_element_loop("    ");
  }

  void write_one_element_loop(const std::string& indent) {
    out_ << indent << "scf.for %i = %first to %count step %stride {\n"
         << indent << "  %row = arith.divui %i, %cols : index\n"
         << indent << "  %col = arith.remui %i, %cols : index\n";
    open_region({"%i", "%row", "%col"}, (indent + "  ").c_str());
    store_outputs(ShapeClass::Full);
    out_ << indent << "}\n";
  }

  // The Full buffers of the kernel: (its memref's SSA name, stored dtype).
  std::vector<std::pair<std::string, DType>> full_buffers() const {
    std::vector<std::pair<std::string, DType>> buffers;
    for (size_t i = 0; i < graph_.inputs().size(); ++i) {
      if (graph_.inputs()[i].shape == ShapeClass::Full)
        buffers.emplace_back("%in" + std::to_string(i), graph_.inputs()[i].dtype);
    }
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const OutputSpec& o = graph_.outputs()[i];
      if (o.over < 0) buffers.emplace_back("%out" + std::to_string(i), o.dtype);
    }
    return buffers;
  }

  std::string vector_type(DType dtype) const {
    return "vector<" + std::to_string(forms_.elements_per_thread) + "x" + mlir_element_type(dtype) +
           ">";
  }
  int64_t vector_bytes(DType dtype) const {
    return int64_t{forms_.elements_per_thread} * static_cast<int64_t>(dtype_size(dtype));
  }

  // The global address of `memref`'s element `index` (an !llvm.ptr<1>:
  // CUDA's global addresses are the generic ones).
  std::string element_address(const std::string& memref, DType dtype, const std::string& index) {
    const std::string base = s_.fresh(), offset = s_.fresh(), at = s_.fresh(), word = s_.fresh(),
                      pointer = s_.fresh();
    s_.line() << base << " = memref.extract_aligned_pointer_as_index " << memref << " : "
              << memref_type(dtype) << " -> index\n";
    s_.line() << offset << " = arith.muli " << index << ", %size_" << dtype_size(dtype)
              << " : index\n";
    s_.line() << at << " = arith.addi " << base << ", " << offset << " : index\n";
    s_.line() << word << " = arith.index_cast " << at << " : index to i64\n";
    s_.line() << pointer << " = llvm.inttoptr " << word << " : i64 to !llvm.ptr<1>\n";
    return pointer;
  }

  void write_packed() {
    const int v = forms_.elements_per_thread;
    const auto buffers = full_buffers();
    out_ << "    %block = gpu.block_id x\n"
         << "    %grid = gpu.grid_dim x\n"
         << "    %count = arith.muli %rows, %cols : index\n"
         << "    %block_first = arith.muli %block, %threads : index\n"
         << "    %first = arith.addi %block_first, %tid : index\n"
         << "    %stride = arith.muli %grid, %threads : index\n"
         << "    %pack = arith.constant " << v << " : index\n"
         << "    %zero = arith.constant 0 : index\n";
    for (int bytes : {1, 2, 4}) {
      out_ << "    %size_" << bytes << " = arith.constant " << bytes << " : index\n";
    }
    for (int k = 0; k < v; ++k)
      out_ << "    %lane_" << k << " = arith.constant " << k << " : i32\n";
    // Whether the packs can be vectors: cols a multiple of V, every Full
    // buffer aligned to its vector.
    out_ << "    %cols_left = arith.remui %cols, %pack : index\n"
         << "    %packed = arith.cmpi eq, %cols_left, %zero : index\n";
    s_.set_indent("    ");
    std::string all = "%packed";
    for (const auto& [memref, dtype] : buffers) {
      const std::string base = s_.fresh(), align = s_.fresh(), left = s_.fresh(),
                        aligned = s_.fresh(), both = s_.fresh();
      s_.line() << base << " = memref.extract_aligned_pointer_as_index " << memref << " : "
                << memref_type(dtype) << " -> index\n";
      s_.line() << align << " = arith.constant " << vector_bytes(dtype) << " : index\n";
      s_.line() << left << " = arith.remui " << base << ", " << align << " : index\n";
      s_.line() << aligned << " = arith.cmpi eq, " << left << ", %zero : index\n";
      s_.line() << both << " = arith.andi " << all << ", " << aligned << " : i1\n";
      all = both;
    }
    out_ << "    scf.if " << all << " {\n"
         << "      %packs = arith.divui %count, %pack : index\n"
         << "      scf.for %p = %first to %packs step %stride {\n"
         << "        %i0 = arith.muli %p, %pack : index\n"
         << "        %prow = arith.divui %i0, %cols : index\n"
         << "        %pcol = arith.remui %i0, %cols : index\n";
    s_.set_indent("        ");
    // Every Full input the outputs read, as one vector, split into lanes.
    pack_elements_.clear();
    at_ = {"%i0", "%prow", "%pcol"};
    for (int32_t id : full_inputs_read()) {
      const Node& n = graph_.node(id);
      const RowMap& map = graph_.inputs()[static_cast<size_t>(n.input_index)].map;
      const std::string pointer = element_address("%in" + std::to_string(n.input_index), n.dtype,
                                                  full_index(map, "%prow", "%pcol")),
                        loaded = s_.fresh();
      s_.line() << loaded << " = llvm.load " << pointer << " {alignment = " << vector_bytes(n.dtype)
                << " : i64} : !llvm.ptr<1> -> " << vector_type(n.dtype) << "\n";
      std::vector<std::string>& lanes = pack_elements_[n.input_index];
      for (int k = 0; k < v; ++k) {
        lanes.push_back(s_.fresh());
        s_.line() << lanes.back() << " = llvm.extractelement " << loaded << "[%lane_" << k
                  << " : i32] : " << vector_type(n.dtype) << "\n";
      }
    }
    // Each lane's outputs, then one vector store per output.
    std::vector<std::vector<std::string>> lane_outputs(graph_.outputs().size());
    for (int k = 0; k < v; ++k) {
      const std::string i = "%pi_" + std::to_string(k), col = "%pc_" + std::to_string(k);
      out_ << "        %pk_" << k << " = arith.constant " << k << " : index\n"
           << "        " << i << " = arith.addi %i0, %pk_" << k << " : index\n"
           << "        " << col << " = arith.addi %pcol, %pk_" << k << " : index\n";
      open_region({i, "%prow", col}, "        ");
      packed_lane_ = k;
      for (size_t o = 0; o < graph_.outputs().size(); ++o) {
        const OutputSpec& spec = graph_.outputs()[o];
        lane_outputs[o].push_back(s_.narrow(emit(spec.node), spec.dtype));
      }
    }
    packed_lane_ = -1;
    for (size_t o = 0; o < graph_.outputs().size(); ++o) {
      const OutputSpec& spec = graph_.outputs()[o];
      const std::string type = vector_type(spec.dtype);
      std::string packed = s_.fresh();
      s_.line() << packed << " = llvm.mlir.undef : " << type << "\n";
      for (int k = 0; k < v; ++k) {
        const std::string next = s_.fresh();
        s_.line() << next << " = llvm.insertelement " << lane_outputs[o][static_cast<size_t>(k)]
                  << ", " << packed << "[%lane_" << k << " : i32] : " << type << "\n";
        packed = next;
      }
      const std::string memref =
          spec.over >= 0 ? "%in" + std::to_string(spec.over) : "%out" + std::to_string(o);
      at_ = {"%i0", "%prow", "%pcol"};
      const std::string pointer = element_address(
          memref, spec.dtype, full_index(RowMap{.pitch = spec.pitch}, "%prow", "%pcol"));
      s_.line() << "llvm.store " << packed << ", " << pointer
                << " {alignment = " << vector_bytes(spec.dtype) << " : i64} : " << type
                << ", !llvm.ptr<1>\n";
    }
    out_ << "      }\n    } else {\n";
    write_one_element_loop("      ");
    out_ << "    }\n";
  }

  // The full inputs the outputs read (the streams worth loading ahead).
  std::vector<int32_t> full_inputs_read() const {
    std::vector<int32_t> roots;
    for (const OutputSpec& o : graph_.outputs()) roots.push_back(o.node);
    return full_inputs_among(graph_, depended_on(graph_, roots));
  }

  // Element k of a step: its linear index, row and column (SSA names).
  Indices step_element(int k, const char* indent) {
    const std::string i = "%i_" + std::to_string(k), k_first = "%first_" + std::to_string(k);
    out_ << indent << k_first << " = arith.addi %base, %offset" << k << " : index\n"
         << indent << i << " = arith.addi " << k_first << ", %tid : index\n"
         << indent << "%row_" << k << " = arith.divui " << i << ", %cols : index\n"
         << indent << "%col_" << k << " = arith.remui " << i << ", %cols : index\n";
    return {i, "%row_" + std::to_string(k), "%col_" + std::to_string(k)};
  }

  void write_elementwise_steps() {
    const int v = forms_.elements_per_thread;
    out_ << "    %block = gpu.block_id x\n"
         << "    %grid = gpu.grid_dim x\n"
         << "    %count = arith.muli %rows, %cols : index\n"
         << "    %span = arith.constant " << v * kGpuThreadsPerBlock << " : index\n"
         << "    %block_base = arith.muli %block, %span : index\n"
         << "    %grid_span = arith.muli %grid, %span : index\n";
    for (int k = 0; k < v; ++k) {
      out_ << "    %offset" << k << " = arith.constant " << k * kGpuThreadsPerBlock << " : index\n";
    }
    out_ << "    scf.for %base = %block_base to %count step %grid_span {\n"
         << "      %end = arith.addi %base, %span : index\n"
         << "      %whole = arith.cmpi sle, %end, %count : index\n"
         << "      scf.if %whole {\n";
    // Every element's full inputs first, then each element's outputs.
    const std::vector<int32_t> streams = full_inputs_read();
    std::vector<Indices> at;
    std::vector<std::map<int32_t, std::string>> loaded;
    for (int k = 0; k < v; ++k) {
      at.push_back(step_element(k, "        "));
      open_region(at.back(), "        ");
      for (int32_t input : streams) emit(input);
      loaded.push_back(value_);
    }
    for (int k = 0; k < v; ++k) {
      open_region(at[static_cast<size_t>(k)], "        ");
      value_ = loaded[static_cast<size_t>(k)];
      store_outputs(ShapeClass::Full);
    }
    out_ << "      } else {\n";
    for (int k = 0; k < v; ++k) {
      const Indices element = step_element(k, "        ");
      out_ << "        %inside_" << k << " = arith.cmpi slt, " << element.full
           << ", %count : index\n"
           << "        scf.if %inside_" << k << " {\n";
      open_region(element, "          ");
      store_outputs(ShapeClass::Full);
      out_ << "        }\n";
    }
    out_ << "      }\n    }\n";
  }

  // Who runs a reduction pass over which row: the block's threads
  // (RowPerBlock), or one warp's lanes (ColSums' row groups: no barrier).
  // `unroll` columns a thread an iteration (kWarpsPerBlock at most: the
  // offsets use the constants %c0 .. %c7), loaded before any is added.
  struct PassLanes {
    std::string first, step, row, base;
    bool warp;
    int unroll;
  };

  void write_row_per_block() {
    out_ << "    %row = gpu.block_id x\n"
         << "    %base = arith.muli %row, %cols : index\n";
    write_block_constants();
    for (int pass = 1; pass <= passes_; ++pass) {
      write_reduction_pass(pass, PassLanes{"%tid", "%threads", "%row", "%base", false, 1});
    }
    if (has_output(ShapeClass::Full)) {
      const std::string col = "%col_out", i = "%i_out";
      out_ << "    scf.for " << col << " = %tid to %cols step %threads {\n"
           << "      " << i << " = arith.addi %base, " << col << " : index\n";
      open_region({i, "%row", col}, "      ");
      store_outputs(ShapeClass::Full);
      out_ << "    }\n";
    }
    if (has_output(ShapeClass::Row)) {
      out_ << "    scf.if %thread0 {\n";
      open_region({"", "%row", ""}, "      ");
      store_outputs(ShapeClass::Row);
      out_ << "    }\n";
    }
  }

  // The reductions' registers, shared by RowPerBlock and ColSums.
  void write_block_constants() {
    out_ << "    %lane = arith.remui %tid, %warp_size : index\n"
         << "    %warp = arith.divui %tid, %warp_size : index\n"
         << "    %lane0 = arith.cmpi eq, %lane, %c0 : index\n"
         << "    %thread0 = arith.cmpi eq, %tid, %c0 : index\n"
         << "    %sum_init = arith.constant 0x00000000 : f32\n"
         << "    %max_init = arith.constant 0xFF800000 : f32\n"
         << "    %last_col = arith.subi %cols, %c1 : index\n";
  }

  // gpu_mlir.h's ColSums form. Names: %row the row, %base its first
  // element; slot k's column %slot_col_k; %s_k_j slot k's running sum of
  // col sum j (in output order), carried through the rows.
  void write_col_sums() {
    std::vector<size_t> sums;
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      if (graph_.node(graph_.outputs()[i].node).op == OpKind::ColSum) sums.push_back(i);
    }
    out_ << "    %block = gpu.block_id x\n";
    write_block_constants();
    // The block's rows: ceil(rows / blocks) each, from the grid the
    // launcher chose (gpu_col_sum_blocks), so that the two always agree.
    out_ << "    %grid = gpu.grid_dim x\n"
         << "    %grid_less1 = arith.subi %grid, %c1 : index\n"
         << "    %rows_padded = arith.addi %rows, %grid_less1 : index\n"
         << "    %rows_per_block = arith.divui %rows_padded, %grid : index\n"
         << "    %row_begin = arith.muli %block, %rows_per_block : index\n"
         << "    %row_past = arith.addi %row_begin, %rows_per_block : index\n"
         << "    %row_over = arith.cmpi ugt, %row_past, %rows : index\n"
         << "    %row_end = arith.select %row_over, %rows, %row_past : index\n"
         << "    %partial_base = arith.muli %block, %cols : index\n"
         << "    %warps = arith.constant " << kWarpsPerBlock << " : index\n"
         << "    %stat_count = arith.constant " << reductions_.size() << " : index\n"
         << "    %tile = arith.constant " << kGpuColSumSlots * kGpuThreadsPerBlock << " : index\n";
    for (size_t r = 0; r < reductions_.size(); ++r) {
      out_ << "    %stat_index" << r << " = arith.constant " << r << " : index\n";
    }
    for (int k = 0; k < kGpuColSumSlots; ++k) {
      out_ << "    %slot_offset" << k << " = arith.constant " << k * kGpuThreadsPerBlock
           << " : index\n";
    }
    out_ << "    scf.for %tile0 = %c0 to %cols step %tile {\n"
         << "      %tile_t = arith.addi %tile0, %tid : index\n";
    // A slot past the row loads the row's last column instead (%slot_load),
    // so that its loads need no branch.
    for (int k = 0; k < kGpuColSumSlots; ++k) {
      out_ << "      %slot_col" << k << " = arith.addi %tile_t, %slot_offset" << k << " : index\n"
           << "      %slot_in" << k << " = arith.cmpi ult, %slot_col" << k << ", %cols : index\n"
           << "      %slot_load" << k << " = arith.select %slot_in" << k << ", %slot_col" << k
           << ", %last_col : index\n";
    }
    if (reductions_.empty()) {
      write_col_sum_rows(sums, "%row_begin", "%row_end", false, "%sums");
    } else {
      // Row groups: each warp reduces one row of the group with shuffles
      // alone and leaves its values in %stats; then the block's threads
      // take the group's rows in order, as above. Two barriers a group of
      // kWarpsPerBlock rows, where a block-wide reduction takes two a pass
      // a row: the backward of a norm is latency-bound without.
      out_ << "      %sums:" << kGpuColSumSlots * sums.size()
           << " = scf.for %group = %row_begin to %row_end step %warps iter_args(";
      write_sum_args(sums.size(), "%g", "");
      out_ << ") -> (" << sum_types(kGpuColSumSlots * sums.size()) << ") {\n"
           << "        %wrow = arith.addi %group, %warp : index\n"
           << "        %wvalid = arith.cmpi ult, %wrow, %row_end : index\n"
           << "        scf.if %wvalid {\n"
           << "          %wbase = arith.muli %wrow, %cols : index\n";
      // kGpuWarpPassColumns columns a lane an iteration: a warp alone on a
      // row of GPT-2's 768 otherwise waits for 24 loads one after another
      // each pass.
      const PassLanes lanes{"%lane", "%warp_size", "%wrow", "%wbase", true, kGpuWarpPassColumns};
      for (int pass = 1; pass <= passes_; ++pass) write_reduction_pass(pass, lanes);
      out_ << "          %stat_at = arith.muli %warp, %stat_count : index\n"
           << "          scf.if %lane0 {\n";
      for (size_t r = 0; r < reductions_.size(); ++r) {
        out_ << "            %stat_at" << r << " = arith.addi %stat_at, %stat_index" << r
             << " : index\n"
             << "            memref.store " << reduced_.at(reductions_[r]) << ", %stats[%stat_at"
             << r << "] : " << stats_type() << "\n";
      }
      out_ << "          }\n"
           << "        }\n"
           << "        gpu.barrier\n"
           << "        %group_next = arith.addi %group, %warps : index\n"
           << "        %group_over = arith.cmpi ugt, %group_next, %row_end : index\n"
           << "        %group_end = arith.select %group_over, %row_end, %group_next : index\n";
      write_col_sum_rows(sums, "%group", "%group_end", true, "%group_sums");
      out_ << "        gpu.barrier\n"
           << "        scf.yield ";
      for (size_t k = 0; k < kGpuColSumSlots * sums.size(); ++k) {
        out_ << (k ? ", " : "") << "%group_sums#" << k;
      }
      out_ << " : " << sum_types(kGpuColSumSlots * sums.size()) << "\n"
           << "      }\n";
    }
    // The block's partials: row `block` of each [blocks, cols] buffer.
    for (int k = 0; k < kGpuColSumSlots; ++k) {
      out_ << "      scf.if %slot_in" << k << " {\n"
           << "        %partial_at" << k << " = arith.addi %partial_base, %slot_col" << k
           << " : index\n";
      for (size_t j = 0; j < sums.size(); ++j) {
        out_ << "        memref.store %sums#" << k * sums.size() + j << ", %out" << sums[j]
             << "[%partial_at" << k << "] : memref<?xf32>\n";
      }
      out_ << "      }\n";
    }
    out_ << "    }\n";
  }

  static std::string sum_types(size_t count) {
    std::string types;
    for (size_t j = 0; j < count; ++j) types += j ? ", f32" : "f32";
    return types;
  }

  // The iter_args of the slots' running sums, PREFIX k _ j, each from
  // INIT_PREFIX k _ j (an enclosing loop's), or from zero when that is "".
  void write_sum_args(size_t sums, const std::string& prefix, const std::string& init_prefix) {
    for (int k = 0; k < kGpuColSumSlots; ++k) {
      for (size_t j = 0; j < sums; ++j) {
        const std::string suffix = std::to_string(k) + "_" + std::to_string(j);
        out_ << (k || j ? ", " : "") << prefix << suffix << " = "
             << (init_prefix.empty() ? "%sum_init" : init_prefix + suffix);
      }
    }
  }

  std::string stats_type() const {
    return "memref<" + std::to_string(kWarpsPerBlock * reductions_.size()) +
           "xf32, #gpu.address_space<workgroup>>";
  }

  // The loop over rows [begin, end) of the ColSums form into `result`,
  // forms_.col_sum_rows rows an iteration: the row's reductions_ (read
  // from %stats, where the row group has them), its row outputs, every
  // slot's loads of all the iteration's rows, then each row's slots' full
  // outputs and col-sum terms, row after row, so that every sum adds its
  // terms in the same order whatever the rows an iteration. A second row
  // past `end` loads the first's and stores nothing. `grouped`: inside
  // write_col_sums' row-group loop (%group, its running sums %g k _ j),
  // else from zero; a graph with reductions takes one row an iteration
  // (gpu_forms_for).
  void write_col_sum_rows(const std::vector<size_t>& sums, const std::string& begin,
                          const std::string& end, bool grouped, const std::string& result) {
    LT_CHECK(!grouped || forms_.col_sum_rows == 1,
             "compile: to_gpu_mlir: row groups take one row an iteration");
    const std::string types = sum_types(sums.size());
    out_ << "      %rows_at_once = arith.constant " << forms_.col_sum_rows << " : index\n"
         << "      " << result << ":" << kGpuColSumSlots * sums.size()
         << " = scf.for %row = " << begin << " to " << end << " step %rows_at_once iter_args(";
    write_sum_args(sums.size(), "%s", grouped ? "%g" : "");
    out_ << ") -> (" << sum_types(kGpuColSumSlots * sums.size()) << ") {\n";
    // Per row of the iteration: its SSA names, whether it is a row, and its
    // slots' loaded inputs.
    std::vector<std::string> row_names, row_ok;
    std::vector<std::map<int32_t, std::vector<std::string>>> loaded_of;
    for (int r = 0; r < forms_.col_sum_rows; ++r) {
      const std::string tag = std::to_string(r);
      std::string row = "%row";
      if (r > 0) {
        row = "%row" + tag;
        out_ << "        %row_next" << tag << " = arith.addi %row, %c" << r << " : index\n"
             << "        %row_in" << tag << " = arith.cmpi ult, %row_next" << tag << ", " << end
             << " : index\n"
             << "        " << row << " = arith.select %row_in" << tag << ", %row_next" << tag
             << ", %row : index\n";
        row_ok.push_back("%row_in" + tag);
      } else {
        row_ok.push_back("");
      }
      row_names.push_back(row);
      out_ << "        %base" << tag << " = arith.muli " << row << ", %cols : index\n";
      if (grouped) {  // the warps' values
        out_ << "        %stat_row" << tag << " = arith.subi " << row << ", %group : index\n"
             << "        %stat_row_at" << tag << " = arith.muli %stat_row" << tag
             << ", %stat_count : index\n";
        for (size_t k = 0; k < reductions_.size(); ++k) {
          const std::string at = "%stat_at" + tag + "_" + std::to_string(k),
                            v = "%stat" + tag + "_" + std::to_string(k);
          out_ << "        " << at << " = arith.addi %stat_row_at" << tag << ", %stat_index" << k
               << " : index\n"
               << "        " << v << " = memref.load %stats[" << at << "] : " << stats_type()
               << "\n";
          reduced_[reductions_[k]] = v;
        }
      } else {
        LT_CHECK(passes_ == 0, "compile: to_gpu_mlir: col sums with reductions_ need row groups");
      }
    }
    if (has_output(ShapeClass::Row)) {
      for (int r = 0; r < forms_.col_sum_rows; ++r) {
        const std::string writer =
            r == 0 ? std::string("%thread0") : "%row_writer" + std::to_string(r);
        if (r > 0) {
          out_ << "        " << writer << " = arith.andi %thread0, " << row_ok[r] << " : i1\n";
        }
        out_ << "        scf.if " << writer << " {\n";
        open_region({"", row_names[static_cast<size_t>(r)], ""}, "          ");
        store_outputs(ShapeClass::Row);
        out_ << "        }\n";
      }
    }
    // Every slot's full inputs of every row first, then each row's slots'
    // outputs and terms: a thread so has all its loads in flight at once (a
    // slot's branch would keep the next slot's loads behind its stores).
    const std::vector<int32_t> slot_inputs = slot_full_inputs(sums);
    for (int r = 0; r < forms_.col_sum_rows; ++r) {
      pack_elements_.clear();
      for (int k = 0; k < kGpuColSumSlots; ++k) {
        const std::string col = "%slot_load" + std::to_string(k),
                          i = "%slot_load_i" + std::to_string(r) + "_" + std::to_string(k);
        out_ << "        " << i << " = arith.addi %base" << r << ", " << col << " : index\n";
        open_region({i, row_names[static_cast<size_t>(r)], col}, "        ");
        for (int32_t id : slot_inputs) {
          const Node& input = graph_.node(id);
          pack_elements_[input.input_index].push_back(load(input));
        }
      }
      loaded_of.push_back(pack_elements_);
    }
    std::vector<std::string> running;  // per slot and sum: the name so far
    for (int k = 0; k < kGpuColSumSlots; ++k) {
      for (size_t j = 0; j < sums.size(); ++j) {
        running.push_back("%s" + std::to_string(k) + "_" + std::to_string(j));
      }
    }
    for (int r = 0; r < forms_.col_sum_rows; ++r) {
      pack_elements_ = loaded_of[static_cast<size_t>(r)];
      for (int k = 0; k < kGpuColSumSlots; ++k) {
        const std::string tag = std::to_string(r) + "_" + std::to_string(k);
        const std::string col = "%slot_col" + std::to_string(k), i = "%slot_i" + tag;
        std::string ok = "%slot_in" + std::to_string(k);
        if (r > 0) {
          out_ << "        %slot_ok" << tag << " = arith.andi " << ok << ", " << row_ok[r]
               << " : i1\n";
          ok = "%slot_ok" + tag;
        }
        out_ << "        %next" << tag << ":" << sums.size() << " = scf.if " << ok << " -> ("
             << types << ") {\n"
             << "          " << i << " = arith.addi %base" << r << ", " << col << " : index\n";
        open_region({i, row_names[static_cast<size_t>(r)], col}, "          ");
        packed_lane_ = k;  // load() takes the slot's loaded values
        store_outputs(ShapeClass::Full);
        std::vector<std::string> next;
        for (size_t j = 0; j < sums.size(); ++j) {
          const std::string term = emit(graph_.node(graph_.outputs()[sums[j]].node).a);
          next.push_back(s_.fresh());
          s_.line() << next.back() << " = arith.addf " << running[k * sums.size() + j] << ", "
                    << term << " : f32\n";
        }
        packed_lane_ = -1;
        s_.line() << "scf.yield ";
        for (size_t j = 0; j < next.size(); ++j) out_ << (j ? ", " : "") << next[j];
        out_ << " : " << types << "\n"
             << "        } else {\n"
             << "          scf.yield ";
        for (size_t j = 0; j < sums.size(); ++j) {
          out_ << (j ? ", " : "") << running[k * sums.size() + j];
        }
        out_ << " : " << types << "\n"
             << "        }\n";
        for (size_t j = 0; j < sums.size(); ++j) {
          running[k * sums.size() + j] = "%next" + tag + "#" + std::to_string(j);
        }
      }
    }
    out_ << "        scf.yield ";
    for (size_t n = 0; n < running.size(); ++n) out_ << (n ? ", " : "") << running[n];
    out_ << " : " << sum_types(kGpuColSumSlots * sums.size()) << "\n      }\n";
  }

  // The Full inputs a ColSums slot reads for its full outputs and for the
  // col sums' terms (`sums`: their output indices), in node order; not
  // those read only by row reductions, whose values are the pass's.
  std::vector<int32_t> slot_full_inputs(const std::vector<size_t>& sums) const {
    std::vector<int32_t> roots;
    for (const OutputSpec& o : graph_.outputs()) {
      if (graph_.node(o.node).shape == ShapeClass::Full) roots.push_back(o.node);
    }
    for (size_t j : sums) roots.push_back(graph_.node(graph_.outputs()[j].node).a);
    const auto reduction = [](const Node& n) { return is_reduction(n.op); };
    return full_inputs_among(graph_, depended_on(graph_, roots, reduction));
  }

  // kGpuColSumEntry (gpu_mlir.h): out[c] = the sum of partials[b, c] over
  // the blocks b, in block order within each of 8 lanes, then lane order.
  void write_partials_sum_kernel() {
    constexpr int kLanes = kGpuThreadsPerBlock / kGpuColSumColumnsPerBlock;
    const std::string lanes_type =
        "memref<" + std::to_string(kGpuThreadsPerBlock) + "xf32, #gpu.address_space<workgroup>>";
    out_ << "  gpu.func @" << kGpuColSumEntry
         << "(%blocks: index, %cols: index, %partials: memref<?xf32>, %out: memref<?xf32>) "
         << "workgroup(%lane_sums : " << lanes_type << ") kernel {\n"
         << "    %c0 = arith.constant 0 : index\n"
         << "    %columns = arith.constant " << kGpuColSumColumnsPerBlock << " : index\n"
         << "    %lanes = arith.constant " << kLanes << " : index\n"
         << "    %zero = arith.constant 0x00000000 : f32\n"
         << "    %tid = gpu.thread_id x\n"
         << "    %block = gpu.block_id x\n"
         << "    %x = arith.remui %tid, %columns : index\n"
         << "    %y = arith.divui %tid, %columns : index\n"
         << "    %first_col = arith.muli %block, %columns : index\n"
         << "    %col = arith.addi %first_col, %x : index\n"
         << "    %inside = arith.cmpi ult, %col, %cols : index\n"
         << "    %lane_sum = scf.if %inside -> (f32) {\n"
         << "      %sum = scf.for %b = %y to %blocks step %lanes iter_args(%acc = %zero) -> (f32) "
            "{\n"
         << "        %row_at = arith.muli %b, %cols : index\n"
         << "        %at = arith.addi %row_at, %col : index\n"
         << "        %partial = memref.load %partials[%at] : memref<?xf32>\n"
         << "        %added = arith.addf %acc, %partial : f32\n"
         << "        scf.yield %added : f32\n"
         << "      }\n"
         << "      scf.yield %sum : f32\n"
         << "    } else {\n"
         << "      scf.yield %zero : f32\n"
         << "    }\n"
         << "    memref.store %lane_sum, %lane_sums[%tid] : " << lanes_type << "\n"
         << "    gpu.barrier\n"
         << "    %lane_first = arith.cmpi eq, %y, %c0 : index\n"
         << "    %writes = arith.andi %lane_first, %inside : i1\n"
         << "    scf.if %writes {\n";
    std::string total;
    for (int lane = 0; lane < kLanes; ++lane) {
      const std::string at = "%lane_at" + std::to_string(lane),
                        sum = "%lane_sum" + std::to_string(lane);
      out_ << "      %lane_offset" << lane << " = arith.constant "
           << lane * kGpuColSumColumnsPerBlock << " : index\n"
           << "      " << at << " = arith.addi %x, %lane_offset" << lane << " : index\n"
           << "      " << sum << " = memref.load %lane_sums[" << at << "] : " << lanes_type << "\n";
      if (lane == 0) {
        total = sum;
      } else {
        const std::string next = "%total" + std::to_string(lane);
        out_ << "      " << next << " = arith.addf " << total << ", " << sum << " : f32\n";
        total = next;
      }
    }
    out_ << "      memref.store " << total << ", %out[%col] : memref<?xf32>\n"
         << "    }\n"
         << "    gpu.return\n"
         << "  }\n";
  }

  // Each thread accumulates its columns (first, first + step, ...) in
  // order; then the block (or the warp) combines the threads' partials.
  void write_reduction_pass(int pass, const PassLanes& lanes) {
    std::vector<int32_t> reductions;
    for (int32_t id : reductions_) {
      if (pass_[static_cast<size_t>(id)] == pass) reductions.push_back(id);
    }
    const std::string p = "%pass" + std::to_string(pass);
    const std::string col = "%col" + std::to_string(pass), i = "%i" + std::to_string(pass);
    std::string types;
    for (size_t k = 0; k < reductions.size(); ++k) types += k ? ", f32" : "f32";
    const auto init = [&](size_t k) { return is_sum(reductions[k]) ? "%sum_init" : "%max_init"; };
    const auto acc = [&](size_t k) {
      return "%acc" + std::to_string(pass) + "_" + std::to_string(k);
    };
    std::string step = lanes.step;
    if (lanes.unroll > 1) {
      step = p + "_step";
      out_ << "    " << p << "_unroll = arith.constant " << lanes.unroll << " : index\n"
           << "    " << step << " = arith.muli " << lanes.step << ", " << p << "_unroll : index\n";
    }
    out_ << "    " << p << ":" << reductions.size() << " = scf.for " << col << " = " << lanes.first
         << " to %cols step " << step << " iter_args(";
    for (size_t k = 0; k < reductions.size(); ++k) {
      out_ << (k ? ", " : "") << acc(k) << " = " << init(k);
    }
    out_ << ") -> (" << types << ") {\n";
    std::vector<std::string> next;
    if (lanes.unroll == 1) {
      out_ << "      " << i << " = arith.addi " << lanes.base << ", " << col << " : index\n";
      open_region({i, lanes.row, col}, "      ");
      for (size_t k = 0; k < reductions.size(); ++k) {
        next.push_back(combine(reductions[k], acc(k), emit(graph_.node(reductions[k]).a)));
      }
    } else {
      // Every element's loads first, so that they are in flight together; an
      // element past the row reads the last column and adds the identity.
      std::vector<std::vector<std::string>> terms(static_cast<size_t>(lanes.unroll));
      std::vector<std::string> inside;
      for (int u = 0; u < lanes.unroll; ++u) {
        const std::string tag = std::to_string(pass) + "_" + std::to_string(u);
        const std::string c = "%col" + tag, at = "%col_at" + tag, in = "%col_in" + tag;
        out_ << "      %col_off" << tag << " = arith.muli " << lanes.step << ", %c" << u
             << " : index\n"
             << "      " << c << " = arith.addi " << col << ", %col_off" << tag << " : index\n"
             << "      " << in << " = arith.cmpi ult, " << c << ", %cols : index\n"
             << "      " << at << " = arith.select " << in << ", " << c << ", %last_col : index\n"
             << "      %i" << tag << " = arith.addi " << lanes.base << ", " << at << " : index\n";
        open_region({"%i" + tag, lanes.row, at}, "      ");
        for (size_t k = 0; k < reductions.size(); ++k) {
          terms[static_cast<size_t>(u)].push_back(emit(graph_.node(reductions[k]).a));
        }
        inside.push_back(in);
      }
      for (size_t k = 0; k < reductions.size(); ++k) {
        std::string total = acc(k);
        for (int u = 0; u < lanes.unroll; ++u) {
          const std::string term = s_.fresh();
          s_.line() << term << " = arith.select " << inside[static_cast<size_t>(u)] << ", "
                    << terms[static_cast<size_t>(u)][k] << ", " << init(k) << " : f32\n";
          total = combine(reductions[k], total, term);
        }
        next.push_back(total);
      }
    }
    s_.line() << "scf.yield ";
    for (size_t k = 0; k < next.size(); ++k) out_ << (k ? ", " : "") << next[k];
    out_ << " : " << types << "\n";
    out_ << "    }\n";
    s_.set_indent("    ");
    for (size_t k = 0; k < reductions.size(); ++k) {
      const std::string partial = p + "#" + std::to_string(k);
      reduced_[reductions[k]] =
          lanes.warp ? warp_reduce(reductions[k], partial) : block_reduce(reductions[k], partial);
    }
  }

  bool is_sum(int32_t reduction) const { return graph_.node(reduction).op == OpKind::RowSum; }

  std::string combine(int32_t reduction, const std::string& a, const std::string& b) {
    std::string r = s_.fresh();
    s_.line() << r << " = " << (is_sum(reduction) ? "arith.addf " : "arith.maximumf ") << a << ", "
              << b << " : f32\n";
    return r;
  }

  // Warp shuffles (butterfly: every lane ends with its warp's value), one
  // partial per warp in shared memory, then every thread combines the
  // partials in warp order. The barrier after the reads keeps the next
  // reduction's writes from overtaking them.
  std::string block_reduce(int32_t reduction, std::string v) {
    v = warp_reduce(reduction, v);
    s_.line() << "scf.if %lane0 {\n";
    s_.line() << "  memref.store " << v << ", %partials[%warp] : " << kPartialsType << "\n";
    s_.line() << "}\n";
    s_.line() << "gpu.barrier\n";
    std::string total;
    for (int w = 0; w < kWarpsPerBlock; ++w) {
      const std::string partial = s_.fresh();
      s_.line() << partial << " = memref.load %partials[%c" << w << "] : " << kPartialsType << "\n";
      total = w == 0 ? partial : combine(reduction, total, partial);
    }
    s_.line() << "gpu.barrier\n";
    return total;
  }

  // Butterfly shuffles: every lane ends with its warp's value.
  std::string warp_reduce(int32_t reduction, std::string v) {
    for (int offset = kWarp / 2; offset >= 1; offset /= 2) {
      const std::string other = s_.fresh(), valid = s_.fresh();
      s_.line() << other << ", " << valid << " = gpu.shuffle xor " << v << ", %xor" << offset
                << ", %width : f32\n";
      v = combine(reduction, v, other);
    }
    return v;
  }

  const KernelGraph& graph_;
  std::ostringstream out_;
  ScalarWriter s_;
  std::vector<int> pass_;
  // The reduction nodes, in node order: the ColSums row groups' %stats
  // hold warp w's values of them at w * count + k.
  std::vector<int32_t> reductions_;
  int passes_ = 0;
  Indices at_;
  std::map<int32_t, std::string> value_;    // node -> f32 SSA value, current region
  std::map<int32_t, std::string> reduced_;  // reduction node -> its block's value
  GpuForms forms_;                          // what applies to the graph's form (gpu_forms_for)
  // The packed form's lanes (or the ColSums form's slots): per Full input
  // index, the SSA name of each lane's loaded value; packed_lane_ the lane
  // being written (-1: none, load() loads).
  std::map<int32_t, std::vector<std::string>> pack_elements_;
  int packed_lane_ = -1;
};

}  // namespace

int64_t gpu_col_sum_blocks(int64_t rows) {
  const int64_t per_block =
      std::max(kGpuColSumLeastRows, (rows + kGpuColSumMostBlocks - 1) / kGpuColSumMostBlocks);
  return (rows + per_block - 1) / per_block;
}

std::vector<size_t> gpu_col_sum_buffers(const KernelGraph& graph) {
  std::vector<size_t> buffers;
  size_t buffer = graph.inputs().size();
  for (const OutputSpec& o : graph.outputs()) {
    if (o.over >= 0) continue;  // no buffer of its own
    if (graph.node(o.node).op == OpKind::ColSum) buffers.push_back(buffer);
    ++buffer;
  }
  return buffers;
}

GpuLaunchForm gpu_launch_form(const KernelGraph& graph) {
  if (graph.has_col_sums()) return GpuLaunchForm::ColSums;
  for (const Node& n : graph.nodes()) {
    if (is_reduction(n.op)) return GpuLaunchForm::RowPerBlock;
  }
  for (const OutputSpec& o : graph.outputs()) {
    if (graph.node(o.node).shape == ShapeClass::Row) return GpuLaunchForm::RowPerBlock;
  }
  return GpuLaunchForm::Elementwise;
}

const char* gpu_launch_form_name(GpuLaunchForm form) {
  switch (form) {
    case GpuLaunchForm::Elementwise:
      return "elementwise";
    case GpuLaunchForm::RowPerBlock:
      return "row_per_block";
    case GpuLaunchForm::ColSums:
      return "col_sums";
  }
  return "?";
}

GpuForms gpu_forms_for(const KernelGraph& graph, const GpuForms& forms) {
  GpuForms applied;
  switch (gpu_launch_form(graph)) {
    case GpuLaunchForm::Elementwise:
      applied.elements_per_thread = forms.elements_per_thread;
      applied.packed = forms.elements_per_thread > 1 && forms.packed;
      break;
    case GpuLaunchForm::RowPerBlock:
      break;
    case GpuLaunchForm::ColSums:
      if (reduction_nodes(graph).empty()) applied.col_sum_rows = forms.col_sum_rows;
      break;
  }
  return applied;
}

std::string to_gpu_mlir(const KernelGraph& graph, const GpuForms& forms) {
  LT_CHECK(!graph.outputs().empty(), "compile: a kernel graph needs at least one output");
  LT_CHECK(forms.elements_per_thread >= 1 && forms.elements_per_thread <= 16,
           "compile: elements per thread must be 1 to 16, got ", forms.elements_per_thread);
  // The writer offsets rows and columns by the constants %c0 .. %c7.
  LT_CHECK(forms.col_sum_rows >= 1 && forms.col_sum_rows <= kWarpsPerBlock,
           "compile: col-sum rows an iteration must be 1 to ", kWarpsPerBlock, ", got ",
           forms.col_sum_rows);
  return GpuWriter(graph, forms).write();
}

}  // namespace lt::compile
