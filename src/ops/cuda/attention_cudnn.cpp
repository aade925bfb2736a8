// cuDNN fused flash attention through the backend graph API (see
// attention_cudnn.h). The graphs follow the pattern cuDNN's fused
// attention engines match (cuDNN developer guide, "Scaled Dot Product
// Attention"): every intermediate of the score matrix is a virtual tensor,
// so nothing T x T reaches memory. Tensors use cuDNN's [B, H, T, D] order
// with strides that read the project's [B, T, H, D] buffers in place.
#include "ops/cuda/attention_cudnn.h"

#if defined(LT_WITH_CUDA) && defined(LT_HAVE_CUDNN)

#include <cuda_runtime.h>
#include <cudnn_graph.h>

#include <array>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cuda/device_guard.cuh"
#include "core/error.h"
#include "core/tensor.h"

namespace lt::ops::cuda::cudnn_attn {

namespace {

// cuDNN below this cannot build the graphs (9.0 made the score matrix's
// causal mask and statistics graph the fused engines' pattern).
constexpr int64_t kMinVersion = 90000;
// Before 9.16 the backward engines need a padding mask (with per-batch
// lengths) unless T is a multiple of 128; we do not build that mask.
constexpr int64_t kBackwardAnyLengthVersion = 91600;

// ------------------------------------------------------------ status checks

[[noreturn]] void fail_status(cudnnStatus_t status, const char* step) {
  char last[1024] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  fail("cuDNN attention: ", step, " failed: ", cudnnGetErrorString(status),
       last[0] ? std::string(" (") + last + ")" : std::string());
}

void check(cudnnStatus_t status, const char* step) {
  if (status != CUDNN_STATUS_SUCCESS) fail_status(status, step);
}

// ---------------------------------------------------- descriptor ownership

// One cudnnBackendDescriptor_t, destroyed with its owner. Move-only.
class Descriptor {
 public:
  Descriptor(cudnnBackendDescriptorType_t type, const char* what) {
    check(cudnnBackendCreateDescriptor(type, &desc_), what);
  }
  ~Descriptor() {
    if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
  }
  Descriptor(Descriptor&& other) noexcept : desc_(std::exchange(other.desc_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    std::swap(desc_, other.desc_);
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }

  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const void* values, const char* step) {
    check(cudnnBackendSetAttribute(desc_, name, type, count, values), step);
  }
  void set_desc(cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t value,
                const char* step) {
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, step);
  }
  void set_type(cudnnBackendAttributeName_t name, cudnnDataType_t value, const char* step) {
    set(name, CUDNN_TYPE_DATA_TYPE, 1, &value, step);
  }
  void finalize(const char* step) { check(cudnnBackendFinalize(desc_), step); }

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
};

using Dims = std::array<int64_t, 4>;

// -------------------------------------------------------------- the graph

// Tensors and operations of one graph, alive as long as the plan built
// from it. Tensor handles are the descriptors' own (stable under moves).
class GraphBuilder {
 public:
  cudnnBackendDescriptor_t tensor(int64_t uid, const Dims& dims, const Dims& strides,
                                  cudnnDataType_t type, bool is_virtual, bool by_value = false) {
    Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "create tensor");
    const int64_t alignment = 16;
    t.set_type(CUDNN_ATTR_TENSOR_DATA_TYPE, type, "tensor data type");
    t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), "tensor dims");
    t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), "tensor strides");
    t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
    t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment, "tensor alignment");
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "tensor is_virtual");
    if (by_value) {
      t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "tensor is_by_value");
    }
    t.finalize("finalize tensor");
    tensors_.push_back(std::move(t));
    return tensors_.back().get();
  }

  // An intermediate that never reaches memory.
  cudnnBackendDescriptor_t virt(const Dims& dims, const Dims& strides, cudnnDataType_t type) {
    return tensor(next_virtual_uid_++, dims, strides, type, true);
  }

  // A float scalar passed by value (its host address goes in the variant pack).
  cudnnBackendDescriptor_t scalar(int64_t uid) {
    return tensor(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
  }

  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t math, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y,
                 int64_t axis = -1) {
    Descriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "create pointwise descriptor");
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
    pw.set_type(CUDNN_ATTR_POINTWISE_MATH_PREC, math, "pointwise math precision");
    if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "gen_index axis");
    operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise", std::move(pw),
              CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR,
              {{CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x},
               {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b},
               {CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t},
               {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y}});
  }

  // y = mode(x, b) in f32.
  void binary(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t y) {
    pointwise(mode, CUDNN_DATA_FLOAT, x, b, nullptr, y);
  }
  void unary(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    pointwise(mode, CUDNN_DATA_FLOAT, x, nullptr, nullptr, y);
  }

  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    Descriptor mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "create matmul descriptor");
    mm.set_type(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT, "matmul compute type");
    operation(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul", std::move(mm),
              CUDNN_ATTR_OPERATION_MATMUL_DESC,
              {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, a},
               {CUDNN_ATTR_OPERATION_MATMUL_BDESC, b},
               {CUDNN_ATTR_OPERATION_MATMUL_CDESC, c}});
  }

  void reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y) {
    Descriptor rd(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "create reduction descriptor");
    rd.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode,
           "reduction operator");
    rd.set_type(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT, "reduction compute type");
    operation(
        CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction", std::move(rd),
        CUDNN_ATTR_OPERATION_REDUCTION_DESC,
        {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x}, {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y}});
  }

  // y views x's elements under other dims and strides (a transpose here).
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    Descriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "create reshape op");
    op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x, "reshape op x");
    op.set_desc(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y, "reshape op y");
    op.finalize("finalize reshape op");
    ops_.push_back(std::move(op));
  }

  // The causal mask: scores where row >= column, the lowest float elsewhere
  // (exp of it is 0, without the NaN an infinity minus an infinity gives).
  cudnnBackendDescriptor_t causal_mask(cudnnBackendDescriptor_t scores, const Dims& dims,
                                       const Dims& strides, cudnnBackendDescriptor_t lowest) {
    cudnnBackendDescriptor_t row = virt(dims, strides, CUDNN_DATA_INT32);
    cudnnBackendDescriptor_t col = virt(dims, strides, CUDNN_DATA_INT32);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, scores, nullptr, nullptr, row, 2);
    pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, scores, nullptr, nullptr, col, 3);
    cudnnBackendDescriptor_t keep = virt(dims, strides, CUDNN_DATA_BOOLEAN);
    pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col, nullptr, keep);
    cudnnBackendDescriptor_t masked = virt(dims, strides, CUDNN_DATA_FLOAT);
    pointwise(CUDNN_POINTWISE_BINARY_SELECT, CUDNN_DATA_FLOAT, scores, lowest, keep, masked);
    return masked;
  }

  Descriptor operation_graph(cudnnHandle_t handle) {
    std::vector<cudnnBackendDescriptor_t> ops;
    for (const Descriptor& op : ops_) ops.push_back(op.get());
    Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "create operation graph");
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
              static_cast<int64_t>(ops.size()), ops.data(), "operation graph ops");
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
              "operation graph handle");
    graph.finalize("finalize operation graph");
    return graph;
  }

 private:
  // An operation of type `op_type` whose math is the (not yet finalized)
  // descriptor `math`, set as `math_attr`, with its tensors (a null tensor
  // is an optional input left out).
  void operation(
      cudnnBackendDescriptorType_t op_type, const char* what, Descriptor math,
      cudnnBackendAttributeName_t math_attr,
      std::initializer_list<std::pair<cudnnBackendAttributeName_t, cudnnBackendDescriptor_t>>
          tensors) {
    const std::string name(what);
    math.finalize((name + " descriptor finalize").c_str());
    Descriptor op(op_type, (name + " op create").c_str());
    op.set_desc(math_attr, math.get(), (name + " op descriptor").c_str());
    for (const auto& [attr, tensor] : tensors) {
      if (tensor != nullptr) op.set_desc(attr, tensor, (name + " op tensor").c_str());
    }
    op.finalize((name + " op finalize").c_str());
    keep_.push_back(std::move(math));
    ops_.push_back(std::move(op));
  }

  std::vector<Descriptor> tensors_, keep_, ops_;
  int64_t next_virtual_uid_ = 1000;
};

// Unique ids of the tensors the variant pack binds.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kLowest,
  kDO,
  kDQ,
  kDK,
  kDV,
  kOne,
  kSoftmaxSum,  // backward workspace: rowsum(dO * O), f32 [B, Hq, T, 1]
  kDQAccum,     // backward workspace: dQ in f32 [B, Hq, T, D]
};

// Dims and strides of one [B, T, H, D] buffer seen as cuDNN's [B, H, T, D].
struct Layout {
  Dims dims, strides;
};
Layout bthd(const Problem& p, int64_t heads) {
  const int64_t T = p.seq, D = p.head_dim;
  return {{p.batch, heads, T, D}, {T * heads * D, D, heads * D, 1}};
}
// The same buffer transposed in its last two dims ([B, H, D, T]).
Layout transposed(const Layout& l) {
  return {{l.dims[0], l.dims[1], l.dims[3], l.dims[2]},
          {l.strides[0], l.strides[1], l.strides[3], l.strides[2]}};
}
Layout packed(const Dims& dims) {
  return {dims, {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1}};
}

// The forward graph: O = softmax(mask(scale Q K^T)) V, Stats = max + log(sum exp).
void build_forward(GraphBuilder& g, const Problem& p) {
  const int64_t B = p.batch, H = p.q_heads, T = p.seq;
  const Layout q = bthd(p, p.q_heads), kv = bthd(p, p.kv_heads);
  const Layout scores = packed({B, H, T, T}), row = packed({B, H, T, 1});
  const auto Q = g.tensor(kQ, q.dims, q.strides, CUDNN_DATA_BFLOAT16, false);
  const Layout kt = transposed(kv);
  const auto KT = g.tensor(kK, kt.dims, kt.strides, CUDNN_DATA_BFLOAT16, false);
  const auto V = g.tensor(kV, kv.dims, kv.strides, CUDNN_DATA_BFLOAT16, false);
  const auto O = g.tensor(kO, q.dims, q.strides, CUDNN_DATA_BFLOAT16, false);
  const auto stats = g.tensor(kStats, row.dims, row.strides, CUDNN_DATA_FLOAT, false);
  const auto scale = g.scalar(kScale), lowest = g.scalar(kLowest);

  const auto s = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.matmul(Q, KT, s);
  const auto scaled = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.binary(CUDNN_POINTWISE_MUL, s, scale, scaled);
  const auto masked = g.causal_mask(scaled, scores.dims, scores.strides, lowest);
  const auto max = g.virt(row.dims, row.strides, CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, masked, max);
  const auto shifted = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.binary(CUDNN_POINTWISE_SUB, masked, max, shifted);
  const auto e = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.unary(CUDNN_POINTWISE_EXP, shifted, e);
  const auto sum = g.virt(row.dims, row.strides, CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const auto log_sum = g.virt(row.dims, row.strides, CUDNN_DATA_FLOAT);
  g.unary(CUDNN_POINTWISE_LOG, sum, log_sum);
  g.binary(CUDNN_POINTWISE_ADD, max, log_sum, stats);
  // The probabilities enter the second matmul in the inputs' type.
  const auto probs = g.virt(scores.dims, scores.strides, CUDNN_DATA_BFLOAT16);
  g.binary(CUDNN_POINTWISE_DIV, e, sum, probs);
  g.matmul(probs, V, O);
}

// dX for a kv tensor: straight into X when every query head has its own kv
// head, else per query head (bf16) and summed over each group.
void kv_grad(GraphBuilder& g, const Problem& p, cudnnBackendDescriptor_t a,
             cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t out) {
  if (p.q_heads == p.kv_heads) {
    g.matmul(a, b, out);
    return;
  }
  const Layout full = packed({p.batch, p.q_heads, p.seq, p.head_dim});
  const auto per_head = g.virt(full.dims, full.strides, CUDNN_DATA_BFLOAT16);
  g.matmul(a, b, per_head);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, per_head, out);
}

// The backward graph (FlashAttention-2's): P = exp(mask(scale Q K^T) - Stats),
// dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)) * scale, dK = dS^T Q,
// dQ = dS K (accumulated in f32 workspace, then cast).
void build_backward(GraphBuilder& g, const Problem& p) {
  const int64_t B = p.batch, H = p.q_heads, T = p.seq, D = p.head_dim;
  const Layout q = bthd(p, p.q_heads), kv = bthd(p, p.kv_heads);
  const Layout kt = transposed(kv);
  const Layout scores = packed({B, H, T, T}), row = packed({B, H, T, 1});
  // The score matrix transposed: [B, H, T_k, T_q] over the same elements.
  const Layout scores_t = {{B, H, T, T}, {H * T * T, T * T, 1, T}};
  const auto Q = g.tensor(kQ, q.dims, q.strides, CUDNN_DATA_BFLOAT16, false);
  const auto KT = g.tensor(kK, kt.dims, kt.strides, CUDNN_DATA_BFLOAT16, false);
  const auto VT = g.tensor(kV, kt.dims, kt.strides, CUDNN_DATA_BFLOAT16, false);
  const auto O = g.tensor(kO, q.dims, q.strides, CUDNN_DATA_BFLOAT16, false);
  const auto dO = g.tensor(kDO, q.dims, q.strides, CUDNN_DATA_BFLOAT16, false);
  const auto stats = g.tensor(kStats, row.dims, row.strides, CUDNN_DATA_FLOAT, false);
  const auto dQ = g.tensor(kDQ, q.dims, q.strides, CUDNN_DATA_BFLOAT16, false);
  const auto dK = g.tensor(kDK, kv.dims, kv.strides, CUDNN_DATA_BFLOAT16, false);
  const auto dV = g.tensor(kDV, kv.dims, kv.strides, CUDNN_DATA_BFLOAT16, false);
  const auto scale = g.scalar(kScale), lowest = g.scalar(kLowest), one = g.scalar(kOne);
  const auto softmax_sum = g.tensor(kSoftmaxSum, row.dims, row.strides, CUDNN_DATA_FLOAT, false);
  const Layout accum = packed({B, H, T, D});
  const auto dq_accum = g.tensor(kDQAccum, accum.dims, accum.strides, CUDNN_DATA_FLOAT, false);

  // rowsum(dO * O)
  const auto prod = g.virt(q.dims, q.strides, CUDNN_DATA_FLOAT);
  g.binary(CUDNN_POINTWISE_MUL, dO, O, prod);
  const auto rowsum = g.virt(row.dims, row.strides, CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, prod, rowsum);
  g.binary(CUDNN_POINTWISE_MUL, rowsum, one, softmax_sum);

  // P, recomputed from the statistics
  const auto s = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.matmul(Q, KT, s);
  const auto scaled = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.binary(CUDNN_POINTWISE_MUL, s, scale, scaled);
  const auto shifted = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.binary(CUDNN_POINTWISE_SUB, scaled, stats, shifted);
  const auto masked = g.causal_mask(shifted, scores.dims, scores.strides, lowest);
  const auto probs = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.unary(CUDNN_POINTWISE_EXP, masked, probs);

  // dV = P^T dO
  const auto probs_t = g.virt(scores_t.dims, scores_t.strides, CUDNN_DATA_BFLOAT16);
  g.reshape(probs, probs_t);
  kv_grad(g, p, probs_t, dO, dV);

  // dS = P * (dO V^T - rowsum) * scale
  const auto dp = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.matmul(dO, VT, dp);
  const auto dp_centered = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.binary(CUDNN_POINTWISE_SUB, dp, softmax_sum, dp_centered);
  const auto ds_unscaled = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.binary(CUDNN_POINTWISE_MUL, dp_centered, probs, ds_unscaled);
  const auto ds = g.virt(scores.dims, scores.strides, CUDNN_DATA_FLOAT);
  g.binary(CUDNN_POINTWISE_MUL, ds_unscaled, scale, ds);

  // dK = dS^T Q
  const auto ds_t = g.virt(scores_t.dims, scores_t.strides, CUDNN_DATA_BFLOAT16);
  g.reshape(ds, ds_t);
  kv_grad(g, p, ds_t, Q, dK);

  // dQ = dS K, through the f32 accumulator
  const auto K = g.virt(kv.dims, kv.strides, CUDNN_DATA_BFLOAT16);
  g.reshape(KT, K);
  g.matmul(ds, K, dq_accum);
  g.unary(CUDNN_POINTWISE_IDENTITY, dq_accum, dQ);
}

// ------------------------------------------------------------- plans

// A finalized execution plan with the descriptors it was built from.
struct Plan {
  GraphBuilder graph;
  std::unique_ptr<Descriptor> op_graph, engine_config, plan;
  cudnnHandle_t handle = nullptr;  // the device's (handle_for), when built
  int64_t workspace = 0;
  // Why it cannot run ("" when built): the shape is refused
  // (unsupported_reason), the build failed, or an execution failed.
  std::string error;
};

int64_t version() {
  static const int64_t v = static_cast<int64_t>(cudnnGetVersion());
  return v;
}

// One handle per device, made on first use and kept for the process.
// Called with plans_mutex() held (only when a plan is built).
cudnnHandle_t handle_for(int device) {
  static std::map<int, cudnnHandle_t> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cudnnHandle_t h = nullptr;
  {
    ::lt::cuda::DeviceGuard guard(device);
    check(cudnnCreate(&h), "cudnnCreate");
  }
  handles.emplace(device, h);
  return h;
}

// Heuristics' configurations in order; the first that finalizes wins.
void finalize_plan(Plan& plan, cudnnHandle_t handle) {
  Descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "create engine heuristics");
  cudnnBackendDescriptor_t graph = plan.op_graph->get();
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "heuristics graph");
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics mode");
  heur.finalize("finalize engine heuristics");
  int64_t count = 0;
  check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
        "count heuristics results");
  LT_CHECK(count > 0, "cuDNN attention: the heuristics offer no engine for this graph");
  std::vector<std::unique_ptr<Descriptor>> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(
        std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "create engine config"));
    raw.push_back(configs.back()->get());
  }
  int64_t got = 0;
  check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data()),
        "get heuristics results");
  std::string errors;
  for (int64_t i = 0; i < got; ++i) {
    try {
      auto candidate = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                                                    "create execution plan");
      candidate->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
                     "execution plan handle");
      candidate->set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, raw[i],
                          "execution plan engine config");
      candidate->finalize("finalize execution plan");
      int64_t workspace = 0;
      check(cudnnBackendGetAttribute(candidate->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, nullptr, &workspace),
            "get workspace size");
      plan.engine_config = std::move(configs[i]);
      plan.plan = std::move(candidate);
      plan.workspace = workspace;
      return;
    } catch (const std::exception& e) {
      errors += std::string("\n  engine config ") + std::to_string(i) + ": " + e.what();
    }
  }
  fail("cuDNN attention: none of the ", got, " engine configurations finalized:", errors);
}

struct Key {
  bool backward;
  int device;
  int64_t batch, seq, q_heads, kv_heads, head_dim;
  Dims q_strides, kv_strides;
  uint64_t scale_bits;
  auto tie() const {
    return std::tie(backward, device, batch, seq, q_heads, kv_heads, head_dim, q_strides,
                    kv_strides, scale_bits);
  }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

Key key_of(const Problem& p, bool backward) {
  uint64_t bits = 0;
  std::memcpy(&bits, &p.scale, sizeof(bits));
  return {backward,
          p.device,
          p.batch,
          p.seq,
          p.q_heads,
          p.kv_heads,
          p.head_dim,
          bthd(p, p.q_heads).strides,
          bthd(p, p.kv_heads).strides,
          bits};
}

std::mutex& plans_mutex() {
  static std::mutex mu;
  return mu;
}

// The cached plan for `p` (built on first use; a refused shape or a failed
// build is cached with its reason, so a later call for it is one lookup).
// Called with plans_mutex() held. Null when no cuDNN handle could be made
// for the device (`why` says why; nothing is cached, so a later call tries
// again).
Plan* plan_for(const Problem& p, bool backward, std::string& why) {
  static std::map<Key, std::unique_ptr<Plan>> plans;
  const Key key = key_of(p, backward);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second.get();
  auto plan = std::make_unique<Plan>();
  plan->error = unsupported_reason(p, backward);
  if (plan->error.empty()) {
    try {
      plan->handle = handle_for(p.device);
    } catch (const std::exception& e) {
      why = e.what();
      return nullptr;
    }
    try {
      if (backward) {
        build_backward(plan->graph, p);
      } else {
        build_forward(plan->graph, p);
      }
      plan->op_graph = std::make_unique<Descriptor>(plan->graph.operation_graph(plan->handle));
      finalize_plan(*plan, plan->handle);
    } catch (const std::exception& e) {
      plan->error = e.what();
    }
  }
  return plans.emplace(key, std::move(plan)).first->second.get();
}

constexpr int64_t kWorkspaceAlign = 256;
int64_t aligned(int64_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// Runs `plan` with the bound pointers; `extra` are workspace-resident
// tensors (uid, bytes) placed after the plan's own workspace.
void execute(const Problem& p, Plan& plan, cudnnHandle_t handle, void* stream,
             std::vector<std::pair<int64_t, void*>> bound,
             const std::vector<std::pair<int64_t, int64_t>>& extra) {
  int64_t total = aligned(plan.workspace);
  for (const auto& e : extra) total += aligned(e.second);
  // From the caching allocator, on the current stream of the device (the
  // stream the caller passed), released once the call is queued.
  Tensor workspace;
  char* base = nullptr;
  if (total > 0) {
    workspace = Tensor::empty({total}, DType::U8, Device::cuda(p.device));
    base = static_cast<char*>(workspace.data_ptr());
  }
  int64_t offset = aligned(plan.workspace);
  for (const auto& e : extra) {
    bound.emplace_back(e.first, base + offset);
    offset += aligned(e.second);
  }
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  for (const auto& b : bound) {
    uids.push_back(b.first);
    ptrs.push_back(b.second);
  }
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "create variant pack");
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
           uids.data(), "variant pack uids");
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           static_cast<int64_t>(ptrs.size()), ptrs.data(), "variant pack pointers");
  void* ws = base;
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws,
           "variant pack workspace");
  pack.finalize("finalize variant pack");
  check(cudnnSetStream(handle, static_cast<cudaStream_t>(stream)), "cudnnSetStream");
  check(cudnnBackendExecute(handle, plan.plan->get(), pack.get()), "execute plan");
}

// Runs forward or backward under the plan cache's lock (one handle per
// device is shared, and cudnnSetStream + execute must not interleave).
template <typename Run>
std::string with_plan(const Problem& p, bool backward, Run&& run) {
  std::lock_guard<std::mutex> lock(plans_mutex());
  std::string why;
  Plan* plan = plan_for(p, backward, why);
  if (plan == nullptr) return why;
  if (!plan->error.empty()) return plan->error;
  // cuDNN checks a variant pack before it launches anything: a failed
  // execution wrote nothing, and the plan is not tried again.
  try {
    run(*plan, plan->handle);
  } catch (const std::exception& e) {
    plan->error = e.what();
    return plan->error;
  }
  return "";
}

}  // namespace

std::string unsupported_reason(const Problem& p, bool backward) {
  if (version() < kMinVersion) {
    return "cuDNN " + std::to_string(version()) + " is older than 9.0";
  }
  if (p.head_dim != 64 && p.head_dim != 128) {
    return "head_dim " + std::to_string(p.head_dim) + " (the cuDNN path takes 64 or 128)";
  }
  if (p.kv_heads <= 0 || p.q_heads % p.kv_heads != 0) return "Hq is not a multiple of Hkv";
  if (backward && p.seq % 128 != 0 && version() < kBackwardAnyLengthVersion) {
    return "backward with T = " + std::to_string(p.seq) + " (not a multiple of 128) on cuDNN " +
           std::to_string(version());
  }
  return "";
}

std::string forward(const Problem& p, const void* q, const void* k, const void* v, void* out,
                    float* lse, void* stream) {
  float scale = static_cast<float>(p.scale), lowest = std::numeric_limits<float>::lowest();
  return with_plan(p, false, [&](Plan& plan, cudnnHandle_t handle) {
    execute(p, plan, handle, stream,
            {{kQ, const_cast<void*>(q)},
             {kK, const_cast<void*>(k)},
             {kV, const_cast<void*>(v)},
             {kO, out},
             {kStats, lse},
             {kScale, &scale},
             {kLowest, &lowest}},
            {});
  });
}

std::string backward(const Problem& p, const void* q, const void* k, const void* v, const void* out,
                     const void* dout, const float* lse, void* dq, void* dk, void* dv,
                     void* stream) {
  float scale = static_cast<float>(p.scale), lowest = std::numeric_limits<float>::lowest();
  float one = 1.0f;
  const int64_t rows = p.batch * p.q_heads * p.seq;
  return with_plan(p, true, [&](Plan& plan, cudnnHandle_t handle) {
    execute(p, plan, handle, stream,
            {{kQ, const_cast<void*>(q)},
             {kK, const_cast<void*>(k)},
             {kV, const_cast<void*>(v)},
             {kO, const_cast<void*>(out)},
             {kDO, const_cast<void*>(dout)},
             {kStats, const_cast<float*>(lse)},
             {kDQ, dq},
             {kDK, dk},
             {kDV, dv},
             {kScale, &scale},
             {kLowest, &lowest},
             {kOne, &one}},
            {{kSoftmaxSum, rows * 4}, {kDQAccum, rows * p.head_dim * 4}});
  });
}

int64_t runtime_version() {
  return version();
}

}  // namespace lt::ops::cuda::cudnn_attn

#else  // no cuDNN in this build

namespace lt::ops::cuda::cudnn_attn {

namespace {
const char* kNotBuilt = "this build has no cuDNN (LT_CUDA off or libcudnn not found)";
}

std::string unsupported_reason(const Problem&, bool) {
  return kNotBuilt;
}
std::string forward(const Problem&, const void*, const void*, const void*, void*, float*, void*) {
  return kNotBuilt;
}
std::string backward(const Problem&, const void*, const void*, const void*, const void*,
                     const void*, const float*, void*, void*, void*, void*) {
  return kNotBuilt;
}
int64_t runtime_version() {
  return 0;
}

}  // namespace lt::ops::cuda::cudnn_attn

#endif
