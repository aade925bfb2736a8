// cuBLASLt products (ops/cuda/gemm.cuh) and the mapping of strided
// row-major tensors onto them (ops/cuda/gemm.h).
//
// Note [row-major tensors on column-major cuBLASLt]
// cuBLASLt reads column-major matrices. A row-major [r, c] matrix with row
// stride ld is, byte for byte, the column-major [c, r] matrix with leading
// dimension ld: its transpose. So a row-major product C = A B runs as
// C^T = B^T A^T, where B^T and A^T are just B's and A's storage read
// column-major (no transpose flag) and D = C^T is C's storage. A
// transposed view (column stride 1) is column-major already and reaches
// cuBLASLt as a transpose flag instead. Only an output that is itself a
// transposed view runs as C = A B directly; there the bias epilogue, which
// adds along D's rows, does not fit, so the bias is written into C first
// and the product accumulates onto it.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

#include "core/cuda/caching_allocator.h"
#include "core/cuda/check.cuh"
#include "core/cuda/device_guard.cuh"
#include "core/stream.h"
#include "ops/cuda/gemm.cuh"
#include "ops/cuda/gemm.h"
#include "ops/matrix_layout.h"

namespace lt::ops::cuda {

namespace {

// ---------------------------------------------------------------- cuBLASLt state

// Split-K and stream-K kernels keep partial sums in the workspace. 32 MiB
// is what PyTorch gives cuBLAS on Hopper; the heuristic's picks for our
// shapes fit in it, and it is allocated once per stream, so it costs
// nothing per call.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// One handle per device, created on first use and never destroyed (like
// the caching allocator: tensors and streams may outlive static
// destructors, and the CUDA context may be gone by then).
cublasLtHandle_t handle_for(int device) {
  static std::mutex mutex;
  static std::map<int, cublasLtHandle_t> handles;
  std::lock_guard lock(mutex);
  cublasLtHandle_t& h = handles[device];
  if (h == nullptr) LT_CUBLAS_CHECK(cublasLtCreate(&h));
  return h;
}

// One workspace per (device, stream), not per device: two streams running
// products at once must not share scratch memory. It comes from the
// caching allocator on its stream and is never freed, so no event is ever
// needed for it.
void* workspace_for(int device, const Stream& stream) {
  static std::mutex mutex;
  static std::map<std::pair<int, void*>, void*> workspaces;
  std::lock_guard lock(mutex);
  void*& w = workspaces[{device, stream.handle()}];
  if (w == nullptr) w = lt::cuda::caching_allocator(device).allocate(kWorkspaceBytes, stream);
  return w;
}

struct LtTypes {
  cudaDataType_t data, scale;
  cublasComputeType_t compute;
};

LtTypes lt_types(DType t) {
  switch (t) {
    case DType::F32:
      return {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};
    case DType::BF16:
      return {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case DType::F16:
      return {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F};
    case DType::F64:
      return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F};
    default:
      fail("GPU gemm: no cuBLASLt product for ", dtype_name(t));
  }
}

// Owners of the cuBLASLt descriptors, so that a throw between creation and
// use leaks nothing. Destruction errors are ignored (nothing to do then).
struct MatmulDesc {
  cublasLtMatmulDesc_t h = nullptr;
  ~MatmulDesc() {
    if (h) cublasLtMatmulDescDestroy(h);
  }
  template <typename T>
  void set(cublasLtMatmulDescAttributes_t attr, const T& value) {
    LT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(h, attr, &value, sizeof(value)));
  }
};

struct MatrixLayout {
  cublasLtMatrixLayout_t h = nullptr;
  ~MatrixLayout() {
    if (h) cublasLtMatrixLayoutDestroy(h);
  }
};

struct Preference {
  cublasLtMatmulPreference_t h = nullptr;
  ~Preference() {
    if (h) cublasLtMatmulPreferenceDestroy(h);
  }
  template <typename T>
  void set(cublasLtMatmulPreferenceAttributes_t attr, const T& value) {
    LT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(h, attr, &value, sizeof(value)));
  }
};

void make_layout(MatrixLayout& l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                 int64_t batch, int64_t batch_stride) {
  LT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l.h, type, static_cast<uint64_t>(rows),
                                             static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    LT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                     &count, sizeof(count)));
    LT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(
        l.h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride, sizeof(batch_stride)));
  }
}

// The alignment (bytes) cuBLASLt may assume for a matrix: the largest power
// of two dividing its address and every step a kernel takes from it (a
// column, a batch), capped at 256, the heuristic's default assumption. An
// odd shape or a view at an odd offset thus gets the narrower kernels it
// needs instead of misaligned vector loads.
uint32_t alignment(const void* p, int64_t elem_bytes, int64_t ld, int64_t cols, int64_t batch,
                   int64_t batch_stride) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256u;
  if (cols > 1) bits |= static_cast<uint64_t>(ld * elem_bytes);
  if (batch > 1) bits |= static_cast<uint64_t>(batch_stride * elem_bytes);
  return static_cast<uint32_t>(bits & (~bits + 1));  // the lowest set bit
}

// Note [the algorithm cache]
// cublasLtMatmulAlgoGetHeuristic costs tens of microseconds, about as much
// as a small product, so its answer is kept per problem. The key holds
// everything the heuristic sees: sizes, transposes, dtype, epilogue,
// leading dimensions and batch strides (an algorithm chosen for one ld may
// not run with another) and the alignments. Pointers are not in it.
using AlgoKey = std::array<int64_t, 22>;

struct AlgoKeyHash {
  size_t operator()(const AlgoKey& key) const {
    size_t h = 0;
    for (int64_t v : key) h = h * 1000003u ^ std::hash<int64_t>{}(v);
    return h;
  }
};

struct CachedAlgo {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
};

const char* op_name(bool transposed) {
  return transposed ? "T" : "N";
}

}  // namespace

bool lt_matmul(const LtGemm& g) {
  LT_CHECK(g.m > 0 && g.n > 0 && g.k > 0 && g.batch >= 1 && g.batch <= INT32_MAX,
           "lt_matmul: sizes m=", g.m, " n=", g.n, " k=", g.k, " batch=", g.batch,
           " (empty products are the caller's)");
  LT_CHECK((g.a.transposed ? g.a.cols : g.a.rows) == g.m &&
               (g.a.transposed ? g.a.rows : g.a.cols) == g.k &&
               (g.b.transposed ? g.b.cols : g.b.rows) == g.k &&
               (g.b.transposed ? g.b.rows : g.b.cols) == g.n,
           "lt_matmul: operands ", g.a.rows, "x", g.a.cols, op_name(g.a.transposed), " and ",
           g.b.rows, "x", g.b.cols, op_name(g.b.transposed), " do not give ", g.m, "x", g.n, "x",
           g.k);
  const LtTypes types = lt_types(g.dtype);
  const int64_t es = static_cast<int64_t>(dtype_size(g.dtype));
  lt::cuda::DeviceGuard guard(g.device);
  const Stream stream = current_stream(Device::cuda(g.device));
  const cublasLtHandle_t handle = handle_for(g.device);

  MatmulDesc desc;
  LT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.h, types.compute, types.scale));
  desc.set(CUBLASLT_MATMUL_DESC_TRANSA, g.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  desc.set(CUBLASLT_MATMUL_DESC_TRANSB, g.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (g.bias) {
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
    desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  }
  MatrixLayout la, lb, ld;
  make_layout(la, types.data, g.a.rows, g.a.cols, g.a.ld, g.batch, g.a.batch_stride);
  make_layout(lb, types.data, g.b.rows, g.b.cols, g.b.ld, g.batch, g.b.batch_stride);
  make_layout(ld, types.data, g.m, g.n, g.ldd, g.batch, g.batch_stride_d);

  const uint32_t align_a = alignment(g.a.data, es, g.a.ld, g.a.cols, g.batch, g.a.batch_stride);
  const uint32_t align_b = alignment(g.b.data, es, g.b.ld, g.b.cols, g.batch, g.b.batch_stride);
  const uint32_t align_d = alignment(g.d, es, g.ldd, g.n, g.batch, g.batch_stride_d);
  const uint32_t align_bias = g.bias ? alignment(g.bias, es, 0, 1, 1, 0) : 0;
  const AlgoKey key{g.device,
                    static_cast<int64_t>(g.dtype),
                    g.m,
                    g.n,
                    g.k,
                    g.batch,
                    g.a.transposed,
                    g.b.transposed,
                    g.a.ld,
                    g.b.ld,
                    g.ldd,
                    g.a.batch_stride,
                    g.b.batch_stride,
                    g.batch_stride_d,
                    g.a.rows,
                    g.b.rows,
                    g.bias != nullptr,
                    align_a,
                    align_b,
                    align_d,
                    align_bias,
                    0};

  static std::mutex cache_mutex;
  static std::unordered_map<AlgoKey, CachedAlgo, AlgoKeyHash> cache;
  CachedAlgo algo;
  {
    std::lock_guard lock(cache_mutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      algo = it->second;
    } else {
      Preference pref;
      LT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref.h));
      pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kWorkspaceBytes));
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a);
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b);
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_d);
      pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_d);
      cublasLtMatmulHeuristicResult_t result{};
      int count = 0;
      // NOT_SUPPORTED means no algorithm fits, which is an answer.
      const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
          handle, desc.h, la.h, lb.h, ld.h, ld.h, pref.h, 1, &result, &count);
      if (status != CUBLAS_STATUS_NOT_SUPPORTED) LT_CUBLAS_CHECK(status);
      algo.found =
          status == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
      if (algo.found) algo.algo = result.algo;
      cache.emplace(key, algo);
    }
  }
  if (!algo.found) {
    if (g.bias) return false;
    fail("cuBLASLt offers no algorithm for ", dtype_name(g.dtype), " ", g.m, "x", g.n, "x", g.k,
         " (batch ", g.batch, ", ops ", op_name(g.a.transposed), op_name(g.b.transposed), ", ld ",
         g.a.ld, "/", g.b.ld, "/", g.ldd, ", alignments ", align_a, "/", align_b, "/", align_d,
         " bytes)");
  }

  const float alpha_f = 1.0f, beta_f = g.accumulate ? 1.0f : 0.0f;
  const double alpha_d = 1.0, beta_d = g.accumulate ? 1.0 : 0.0;
  const bool f64 = types.scale == CUDA_R_64F;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  LT_CUBLAS_CHECK(cublasLtMatmul(handle, desc.h, alpha, g.a.data, la.h, g.b.data, lb.h, beta, g.d,
                                 ld.h, g.d, ld.h, &algo.algo, workspace_for(g.device, stream),
                                 kWorkspaceBytes, static_cast<cudaStream_t>(stream.handle())));
  return true;
}

// ---------------------------------------------------------------- tensors

namespace {

// See ops/matrix_layout.h: a view is row-major with leading dimension ld,
// or the row-major transpose of one. cuBLASLt reads column-major, so a
// row-major view is addressed as the column-major storage of its transpose
// (`row_major` below; see the note at the top).
struct Addressing {
  bool row_major = false;
  int64_t ld = 1;
};

std::optional<Addressing> addressing(const MatrixView& m) {
  const auto a = matrix_addressing(m);
  if (!a) return std::nullopt;
  return Addressing{!a->transposed, a->ld};
}

bool addressable(const Tensor& t) {
  return addressing(matrix_view(t)).has_value();
}

Tensor transpose_last(const Tensor& t) {
  Shape shape = t.shape(), strides = t.strides();
  const size_t n = shape.size();
  std::swap(shape[n - 1], shape[n - 2]);
  std::swap(strides[n - 1], strides[n - 2]);
  return Tensor::from_storage(t.storage(), t.offset(), shape, strides, t.dtype());
}

// The one stride (elements) between consecutive matrices of t's batch
// dims, when they step evenly; 0 for a single matrix. A broadcast batch
// (stride 0 over several matrices) gets none: it is copied, so that every
// product reads and writes distinct matrices.
std::optional<int64_t> batch_stride(const Tensor& t) {
  int64_t count = 1, stride = 0;
  for (int64_t d = t.dim() - 3; d >= 0; --d) {
    const int64_t size = t.size(d);
    if (size == 1) continue;
    if (count == 1) {
      stride = t.stride(d);
      count = size;
    } else if (t.stride(d) == stride * count) {
      count *= size;
    } else {
      return std::nullopt;
    }
  }
  if (count > 1 && stride == 0) return std::nullopt;
  return stride;
}

// A merged view that cuBLASLt can address, or none.
std::optional<Tensor> merged_addressable(const Tensor& t) {
  auto m = merge_batch_into_rows(t);
  if (m && addressable(*m)) return m;
  return std::nullopt;
}

// One cuBLASLt problem over tensor views: the last two dims of a, b, c are
// [M, K], [K, N], [M, N]; `batch` matrices apart by the strides (elements).
struct Product {
  Tensor a, b, c;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

// The operand for logical matrix `t` that cuBLASLt should read as t^T
// (`want_transpose`) or as t: its storage, flagged transposed when the
// storage holds the other one.
LtOperand operand(const Tensor& t, bool want_transpose, int64_t stride) {
  const MatrixView v = matrix_view(t);
  const Addressing ad = *addressing(v);
  LtOperand o;
  o.data = t.data_ptr();
  o.rows = ad.row_major ? v.cols : v.rows;
  o.cols = ad.row_major ? v.rows : v.cols;
  o.ld = ad.ld;
  o.transposed = want_transpose != ad.row_major;
  o.batch_stride = stride;
  return o;
}

void run(const Product& p, bool accumulate, const Tensor& bias) {
  const MatrixView va = matrix_view(p.a), vc = matrix_view(p.c);
  const Addressing ac = *addressing(vc);
  LtGemm g;
  g.device = p.c.device().index;
  g.dtype = p.c.dtype();
  g.k = va.cols;
  g.batch = p.batch;
  g.d = p.c.data_ptr();
  g.ldd = ac.ld;
  g.batch_stride_d = p.stride_c;
  g.accumulate = accumulate;
  if (ac.row_major) {  // D = C^T = B^T A^T
    g.m = vc.cols;
    g.n = vc.rows;
    g.a = operand(p.b, true, p.stride_b);
    g.b = operand(p.a, true, p.stride_a);
  } else {  // D = C = A B
    g.m = vc.rows;
    g.n = vc.cols;
    g.a = operand(p.a, false, p.stride_a);
    g.b = operand(p.b, false, p.stride_b);
  }
  if (bias.defined() && ac.row_major) {
    // The epilogue adds bias[i] to row i of D = C^T: to column i of C.
    const Tensor bc = bias.contiguous();
    g.bias = bc.data_ptr();
    if (lt_matmul(g)) return;
    g.bias = nullptr;
  }
  if (bias.defined()) {
    // No epilogue fits: C starts as the bias in every row and the product
    // adds to it.
    p.c.copy_(bias);
    g.accumulate = true;
  }
  lt_matmul(g);
}

std::string shapes_str(const Tensor& a, const Tensor& b, const Tensor& c) {
  return shape_str(a.shape()) + " @ " + shape_str(b.shape()) + " -> " + shape_str(c.shape());
}

Shape batch_of(const Tensor& t) {
  return Shape(t.shape().begin(), t.shape().end() - 2);
}

// Plans the product over views cuBLASLt can address, copying an input
// contiguous where it cannot; none when the output is what does not fit
// (the caller then computes into a fresh tensor).
std::optional<Product> plan(Tensor a, Tensor b, const Tensor& c) {
  if (c.dim() == 2 && a.dim() > 2) {
    // sum_i a_i b_i = [a_0 a_1 ...] @ [b_0; b_1; ...]: the batch joins K.
    // a's rows of K are merged through its transpose [..., K, M].
    auto at = merged_addressable(transpose_last(a));
    if (!at) at = merged_addressable(transpose_last(a).contiguous());
    auto bj = merged_addressable(b);
    if (!bj) bj = merged_addressable(b.contiguous());
    if (!addressable(c)) return std::nullopt;
    return Product{transpose_last(*at), *bj, c};
  }
  if (!addressable(b)) b = b.contiguous();
  if (b.dim() == 2) {
    // b shared by the batch (or no batch): the batch joins M.
    auto aj = merged_addressable(a);
    if (!aj) aj = merged_addressable(a.contiguous());
    auto cj = merged_addressable(c);
    if (!cj) return std::nullopt;
    return Product{*aj, b, *cj};
  }
  auto sa = batch_stride(a);
  if (!sa || !addressable(a)) {
    a = a.contiguous();
    sa = batch_stride(a);
  }
  auto sb = batch_stride(b);
  if (!sb) {
    b = b.contiguous();
    sb = batch_stride(b);
  }
  const auto sc = batch_stride(c);
  if (!sc || !addressable(c)) return std::nullopt;
  return Product{a, b, c, numel(batch_of(c)), *sa, *sb, *sc};
}

}  // namespace

void gemm(const Tensor& a, const Tensor& b, const Tensor& c, bool accumulate, const Tensor& bias) {
  LT_CHECK(a.dim() >= 2 && b.dim() >= 2 && c.dim() >= 2,
           "gemm: operands need rank >= 2: ", shapes_str(a, b, c));
  LT_CHECK(a.dtype() == b.dtype() && a.dtype() == c.dtype(),
           "gemm: operands must share a dtype, got ", a.str(), ", ", b.str(), ", ", c.str());
  LT_CHECK(a.device().is_cuda() && b.device() == a.device() && c.device() == a.device(),
           "gemm: operands must be on one CUDA device, got ", a.str(), ", ", b.str(), ", ",
           c.str());
  const MatrixView ma = matrix_view(a), mb = matrix_view(b), mc = matrix_view(c);
  LT_CHECK(ma.rows == mc.rows && ma.cols == mb.rows && mb.cols == mc.cols,
           "gemm: matrix sizes do not chain: ", shapes_str(a, b, c));
  if (c.dim() > 2) {
    LT_CHECK(batch_of(a) == batch_of(c) && (b.dim() == 2 || batch_of(b) == batch_of(c)),
             "gemm: batch dims differ: ", shapes_str(a, b, c));
  } else {
    LT_CHECK(a.dim() == 2 ? b.dim() == 2 : batch_of(b) == batch_of(a),
             "gemm: batch dims differ: ", shapes_str(a, b, c));
  }
  if (bias.defined()) {
    LT_CHECK(!accumulate, "gemm: a bias with accumulate");
    LT_CHECK(bias.dim() == 1 && bias.size(0) == mc.cols && bias.dtype() == c.dtype() &&
                 bias.device() == c.device(),
             "gemm: bias ", bias.str(), " does not fit output ", c.str());
  }
  if (c.numel() == 0) return;
  if (a.numel() == 0 || b.numel() == 0) {  // K == 0 or an empty summed batch
    if (bias.defined()) {
      c.copy_(bias);
    } else if (!accumulate) {
      c.zero_();
    }
    return;
  }
  if (auto p = plan(a, b, c)) {
    run(*p, accumulate, bias);
    return;
  }
  // An output cuBLASLt cannot write: compute into a fresh one, copy back.
  Tensor out = Tensor::empty(c.shape(), c.dtype(), c.device());
  if (accumulate) out.copy_(c);
  run(*plan(a, b, out), accumulate, bias);
  c.copy_(out);
}

}  // namespace lt::ops::cuda
