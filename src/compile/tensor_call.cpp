#include "compile/tensor_call.h"

#include <algorithm>
#include <optional>

#include "core/error.h"

namespace lt::compile {
namespace {

// The [rows, cols] iteration space and the leading dims of Full values,
// from the first input that tells each.
struct Extent {
  std::optional<Shape> leading;  // Full's shape without its last dim = Row's shape
  std::optional<int64_t> cols;
};

int64_t product(const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

void agree(std::optional<int64_t>& known, int64_t found, size_t input, const char* what) {
  if (!known) {
    known = found;
    return;
  }
  LT_CHECK(*known == found, "compile: input ", input, " has ", found, " ", what,
           " where earlier inputs have ", *known);
}

void agree(std::optional<Shape>& known, const Shape& found, size_t input) {
  if (!known) {
    known = found;
    return;
  }
  LT_CHECK(*known == found, "compile: input ", input,
           "'s leading dims (rows) do not match the earlier inputs'");
}

// A given output that shares memory with an input must be that input,
// both Full and of one dtype (tensor_call.h): only then is each element
// read before it is written.
void check_in_place(const KernelGraph& graph, const std::vector<Tensor>& inputs, size_t output,
                    const Tensor& out) {
  const auto* begin = static_cast<const char*>(out.data_ptr());
  const auto* end = begin + out.nbytes();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto* in = static_cast<const char*>(inputs[i].data_ptr());
    const auto* in_end = in + inputs[i].nbytes();
    if (in_end <= begin || end <= in) continue;
    // The ColSums form recomputes a row's reductions once per tile of
    // columns, from the row as earlier tiles may have written it.
    LT_CHECK(!graph.has_col_sums(), "compile: output ", output, " overlaps input ", i,
             ": a kernel with column sums writes no output in place");
    LT_CHECK(in == begin && in_end == end && inputs[i].dtype() == out.dtype() &&
                 graph.inputs()[i].shape == ShapeClass::Full &&
                 graph.node(graph.outputs()[output].node).shape == ShapeClass::Full,
             "compile: output ", output, " overlaps input ", i,
             " other than as the same full tensor, written in place");
  }
}

// Whether `t` lays its [..., cols] out as RowMap::pitch says: the last dim
// dense, each row `pitch` * cols elements after the one before.
bool pitched_rows(const Tensor& t, int64_t pitch) {
  if (t.dim() == 0 || t.stride(-1) != 1) return false;
  int64_t expected = pitch * t.size(-1);
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) != 1 && t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

}  // namespace

PreparedCall prepare_call(const KernelGraph& graph, const std::vector<Tensor>& inputs,
                          Device device, const std::vector<Tensor>& given) {
  LT_CHECK(given.empty() || given.size() == graph.outputs().size(), "compile: the kernel has ",
           graph.outputs().size(), " outputs, ", given.size(), " given");
  LT_CHECK(inputs.size() == graph.inputs().size(), "compile: the kernel takes ",
           graph.inputs().size(), " inputs, got ", inputs.size());
  Extent extent;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const InputSpec& spec = graph.inputs()[i];
    LT_CHECK(t.defined() && t.device() == device, "compile: input ", i, " must be a tensor on ",
             device.str(), (t.defined() ? ", got one on " + t.device().str() : std::string()));
    LT_CHECK(t.dtype() == spec.dtype, "compile: input ", i, " must be ", dtype_name(spec.dtype),
             ", got ", dtype_name(t.dtype()));
    const Shape& shape = t.shape();
    if (spec.shape == ShapeClass::Full && !spec.map.identity()) {
      LT_CHECK(pitched_rows(t, spec.map.pitch), "compile: input ", i, " must be [..., cols] with ",
               spec.map.pitch, " * cols elements from row to row, got ", t.str());
      agree(extent.cols, shape.back(), i, "columns");
      // A table read once per row group tells no rows (checked below).
      if (spec.map.group == 1 && spec.map.period == 0)
        agree(extent.leading, Shape(shape.begin(), shape.end() - 1), i);
      continue;
    }
    LT_CHECK(t.is_contiguous(), "compile: input ", i, " must be contiguous");
    switch (spec.shape) {
      case ShapeClass::Full: {
        LT_CHECK(!shape.empty(), "compile: input ", i, " is full ([..., cols]), got a scalar");
        agree(extent.cols, shape.back(), i, "columns");
        agree(extent.leading, Shape(shape.begin(), shape.end() - 1), i);
        break;
      }
      case ShapeClass::Row:
        agree(extent.leading, shape, i);
        break;
      case ShapeClass::Col:
        LT_CHECK(shape.size() == 1, "compile: input ", i, " is a col value ([cols]), got ",
                 shape.size(), " dims");
        agree(extent.cols, shape[0], i, "columns");
        break;
      case ShapeClass::Scalar:
        fail("compile: input ", i, " cannot be scalar");
    }
  }
  LT_CHECK(extent.leading && extent.cols,
           "compile: the inputs do not tell both the rows and the columns");
  PreparedCall prepared;
  prepared.rows = product(*extent.leading);
  prepared.cols = *extent.cols;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const InputSpec& spec = graph.inputs()[i];
    prepared.buffers.push_back(t.data_ptr());
    if (spec.shape != ShapeClass::Full || spec.map.identity()) {
      prepared.counts.push_back(t.numel());
      continue;
    }
    const int64_t span = mapped_span(spec.map, prepared.rows, prepared.cols);
    const int64_t entries = t.numel() / std::max<int64_t>(prepared.cols, 1);
    LT_CHECK(entries == 0 || (entries - 1) * spec.map.pitch * prepared.cols + prepared.cols >= span,
             "compile: input ", i, " holds ", entries, " rows of ", prepared.cols,
             " where the kernel reads ", span, " elements");
    prepared.counts.push_back(span);
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    const OutputSpec& o = graph.outputs()[i];
    const ShapeClass output_shape = graph.node(o.node).shape;
    Shape shape = output_shape == ShapeClass::Col ? Shape{prepared.cols} : *extent.leading;
    if (output_shape == ShapeClass::Full) shape.push_back(prepared.cols);
    if (o.over >= 0) {  // KernelGraph::output_over: the input, no buffer of its own
      LT_CHECK(i >= given.size() || !given[i].defined(), "compile: output ", i,
               " is written over input ", o.over, " and takes no tensor");
      prepared.outputs.push_back(inputs[static_cast<size_t>(o.over)]);
      continue;
    }
    const Tensor* out = i < given.size() && given[i].defined() ? &given[i] : nullptr;
    if (out != nullptr) {
      const bool laid_out = o.pitch == 1 ? out->is_contiguous() : pitched_rows(*out, o.pitch);
      LT_CHECK(
          out->device() == device && laid_out && out->dtype() == o.dtype && out->shape() == shape,
          "compile: output ", i, " must be a ", dtype_name(o.dtype), " tensor of ",
          shape_str(shape), " on ", device.str(),
          o.pitch == 1 ? std::string(", contiguous")
                       : ", rows " + std::to_string(o.pitch) + " * cols apart",
          ", got ", out->str());
      if (o.pitch == 1) check_in_place(graph, inputs, i, *out);
    }
    Tensor made;
    if (out == nullptr) {  // a pitched one as a view of rows pitch * cols long
      Shape storage = shape;
      if (o.pitch != 1) storage.back() *= o.pitch;
      made = Tensor::empty(storage, o.dtype, device);
      if (o.pitch != 1) made = made.slice(-1, 0, prepared.cols);
    }
    prepared.outputs.push_back(out != nullptr ? *out : made);
    prepared.buffers.push_back(prepared.outputs.back().data_ptr());
    prepared.counts.push_back(
        o.pitch == 1 ? prepared.outputs.back().numel()
                     : mapped_span(RowMap{.pitch = o.pitch}, prepared.rows, prepared.cols));
  }
  return prepared;
}

std::vector<Tensor> call(const CpuKernel& kernel, const KernelGraph& graph,
                         const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  PreparedCall prepared = prepare_call(graph, inputs, Device::cpu(), outputs);
  kernel.run(prepared.rows, prepared.cols, prepared.buffers);
  return std::move(prepared.outputs);
}

}  // namespace lt::compile
