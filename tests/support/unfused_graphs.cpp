#include "support/unfused_graphs.h"

#include <algorithm>
#include <map>

#include "compile/interpret.h"
#include "core/error.h"
#include "support/gpu_kernel_cases.h"

namespace lt::compile::testing {

namespace {

// Per node: whether the sequence keeps its value in memory (an input, a
// kernel's output): of the values the outputs depend on (a backward graph
// holds the whole forward, part of which no gradient reads), the full
// values, the row reductions and the chain's outputs (a norm's saved row
// statistics).
std::vector<bool> stored_values(const KernelGraph& fused) {
  std::vector<int32_t> outputs;
  for (const OutputSpec& out : fused.outputs()) outputs.push_back(out.node);
  const std::vector<bool> needed = depended_on(fused, outputs);
  std::vector<bool> stored(needed.size(), false);
  for (size_t id = 0; id < needed.size(); ++id) {
    const Node& node = fused.nodes()[id];
    stored[id] = needed[id] && (node.op == OpKind::Input || node.shape == ShapeClass::Full ||
                                is_reduction(node.op));
  }
  for (int32_t id : outputs) stored[static_cast<size_t>(id)] = true;
  return stored;
}

// Builds one kernel's graph: materialized operands become its inputs, the
// rest is copied in.
class KernelWriter {
 public:
  KernelWriter(const KernelGraph& fused, const std::vector<bool>& stored, DType storage)
      : fused_(fused), stored_(stored), storage_(storage) {}

  UnfusedKernel write(int32_t id) {
    const Node& n = fused_.node(id);
    const Value v = copy_op(n);
    out_.graph.output(v, dtype_of(id));
    out_.node = id;
    return std::move(out_);
  }

 private:
  // The value of fused node `id` inside this kernel.
  Value value_of(int32_t id) {
    if (auto it = copied_.find(id); it != copied_.end()) return it->second;
    const Node& n = fused_.node(id);
    Value v;
    if (stored_[static_cast<size_t>(id)]) {
      LT_CHECK(n.op != OpKind::Input || fused_.inputs()[n.input_index].map.identity(),
               "one_kernel_per_op: input ", n.input_index, " is row-mapped");
      v = out_.graph.input(n.shape, dtype_of(id));
      out_.sources.push_back(id);
    } else {
      v = copy_op(n);
    }
    copied_.emplace(id, v);
    return v;
  }

  // The chain's outputs as the chain stores them; other full values in the
  // chain's dtype, rows (reductions) in f32.
  DType dtype_of(int32_t id) const {
    const Node& n = fused_.node(id);
    if (n.op == OpKind::Input) return n.dtype;
    for (const OutputSpec& out : fused_.outputs()) {
      if (out.node == id) return out.dtype;
    }
    return n.shape == ShapeClass::Full ? storage_ : DType::F32;
  }

  Value copy_op(const Node& n) {
    return out_.graph.copy_op(fused_, n, [this](int32_t id) { return value_of(id); });
  }

  const KernelGraph& fused_;
  const std::vector<bool>& stored_;
  DType storage_;
  UnfusedKernel out_;
  std::map<int32_t, Value> copied_;
};

}  // namespace

UnfusedSequence one_kernel_per_op(const KernelGraph& fused, std::optional<DType> values) {
  DType storage = DType::F32;
  for (const InputSpec& in : fused.inputs()) {
    if (in.shape == ShapeClass::Full) {
      storage = in.dtype;
      break;
    }
  }
  if (values) storage = *values;
  const std::vector<bool> stored = stored_values(fused);
  UnfusedSequence seq;
  for (int32_t id = 0; id < static_cast<int32_t>(fused.nodes().size()); ++id) {
    if (fused.node(id).op == OpKind::Input || !stored[static_cast<size_t>(id)]) continue;
    seq.kernels.push_back(KernelWriter(fused, stored, storage).write(id));
  }
  // The first output of a node names its value; another output of the same
  // node in another dtype is a cast of it.
  for (const OutputSpec& out : fused.outputs()) {
    const auto first = std::find_if(fused.outputs().begin(), fused.outputs().end(),
                                    [&](const OutputSpec& o) { return o.node == out.node; });
    if (&*first == &out || first->dtype == out.dtype) {
      seq.outputs.push_back(out.node);
      continue;
    }
    UnfusedKernel cast;
    cast.node = static_cast<int32_t>(fused.nodes().size() + seq.outputs.size());
    cast.sources = {out.node};
    cast.graph.output(cast.graph.input(fused.node(out.node).shape, first->dtype), out.dtype);
    seq.kernels.push_back(std::move(cast));
    seq.outputs.push_back(seq.kernels.back().node);
  }
  return seq;
}

Tensor run_unfused_kernel(const DeviceKernel& kernel, const UnfusedKernel& k,
                          const std::vector<Tensor>& args, int64_t rows, int64_t cols) {
  LT_CHECK(args.size() == k.graph.inputs().size(), "run_unfused_kernel: ", args.size(),
           " arguments for ", k.graph.inputs().size(), " inputs");
  const OutputSpec& out = k.graph.outputs().at(0);
  const Tensor result = Tensor::empty(class_shape(k.graph.node(out.node).shape, rows, cols),
                                      out.dtype, kernel.device);
  std::vector<void*> buffers;
  std::vector<int64_t> counts;
  for (size_t i = 0; i < args.size(); ++i) {
    LT_CHECK(args[i].is_contiguous() && args[i].dtype() == k.graph.inputs()[i].dtype &&
                 args[i].numel() == element_count(k.graph.inputs()[i].shape, rows, cols),
             "run_unfused_kernel: argument ", i, " is ", args[i].str());
    buffers.push_back(args[i].data_ptr());
    counts.push_back(args[i].numel());
  }
  buffers.push_back(result.data_ptr());
  counts.push_back(result.numel());
  run_buffers(kernel, rows, cols, buffers, counts);
  return result;
}

}  // namespace lt::compile::testing
