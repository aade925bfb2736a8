#pragma once
// Tensor: shared storage + element offset + shape + strides + dtype. Copying
// a Tensor copies a handle; views share storage.
//
// The view methods on Tensor (view, transpose, slice, ...) do not record
// autograd nodes. The differentiable versions are the free functions in
// autograd/functions.h (lt::reshape, lt::transpose, ...). To keep a raw view
// from silently cutting a gradient path, the raw methods refuse a tensor
// that requires grad while grad mode is on.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/random.h"
#include "core/shape.h"
#include "core/storage.h"

namespace lt {

namespace autograd {
struct Node;
}

struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- construction (contiguous, on `device`) ----
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());
  static Tensor empty(const Shape& shape, DType dtype, Allocator& allocator);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32,
                     Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::F32);
  // Normal values. Below kParallelRandnElements, drawn from `gen` in order;
  // from there on, `gen` gives one seed and runs of kRandnRunElements are
  // drawn in parallel from their own generators (split_seed).
  static constexpr int64_t kParallelRandnElements = int64_t{1} << 23;
  static constexpr int64_t kRandnRunElements = int64_t{1} << 20;
  static Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::F32,
                      double stddev = 1.0);
  static Tensor uniform(const Shape& shape, Generator& gen, double lo, double hi,
                        DType dtype = DType::F32);
  // Wraps existing memory without copying; `storage` keeps it alive.
  static Tensor from_storage(std::shared_ptr<Storage> storage, int64_t offset, const Shape& shape,
                             const Shape& strides, DType dtype);
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape);
  // Any numeric values, stored as `dtype` (rounded as dtype conversion does).
  static Tensor from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const;
  int64_t offset() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  const std::shared_ptr<Storage>& storage() const;
  std::string str() const;  // "Tensor[f32, [2, 3], cpu]"

  // ---- data access (CPU only for the typed accessors) ----
  void* data_ptr() const;  // start of this view's first element
  template <typename T>
  T* data() const;
  double item() const;                     // numel must be 1
  std::vector<double> to_doubles() const;  // logical order, any dtype, CPU
  template <typename T>
  std::vector<T> to_vector() const;  // logical order; T must match dtype

  // ---- raw views (no autograd; see the header comment) ----
  Tensor view(const Shape& shape) const;     // contiguous only; one dim may be -1
  Tensor reshape(const Shape& shape) const;  // view when contiguous, else a copy
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // drops `dim`
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor expand(const Shape& shape) const;  // broadcast view (stride 0)
  Tensor flatten() const { return reshape({numel()}); }

  // ---- copies ----
  Tensor contiguous() const;  // self when already contiguous
  Tensor clone() const;       // always a fresh contiguous copy
  Tensor to(Device device) const;
  Tensor to(DType dtype) const;
  Tensor to(Device device, DType dtype) const;
  // Copies `src` into this tensor in place: broadcasting src to this shape
  // and converting dtype. On a GPU the copy is a kernel on the device's
  // current stream (floating dtypes convert among f32, f64, bf16, f16);
  // across devices the source's bytes move over first (synchronously).
  void copy_(const Tensor& src) const;
  void fill_(double value) const;
  void zero_() const { fill_(0.0); }

  // ---- autograd state (the machinery lives in autograd/) ----
  bool requires_grad() const;
  Tensor& set_requires_grad(bool enabled = true);
  bool is_leaf() const;
  const Tensor& grad() const;  // undefined Tensor when none
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  void set_grad_fn(std::shared_ptr<autograd::Node> fn, uint32_t output_index) const;
  uint32_t output_index() const;
  // The same data, cut off from the graph.
  Tensor detach() const;
  // Called once per backward pass, after this leaf's gradient is final.
  using GradReadyHook = std::function<void(const Tensor& param)>;
  void register_grad_ready_hook(GradReadyHook hook) const;
  const std::vector<GradReadyHook>& grad_ready_hooks() const;
  const std::string& name() const;
  Tensor& set_name(std::string name);

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same_impl(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  const TensorImpl& checked() const;
  void check_raw_view_allowed(const char* what) const;
  Tensor make_view(const Shape& shape, const Shape& strides, int64_t offset) const;
  std::shared_ptr<TensorImpl> impl_;
};

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_index = 0;
  std::vector<Tensor::GradReadyHook> grad_ready_hooks;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // elements
  Shape shape;
  Shape strides;  // elements
  DType dtype = DType::F32;
  std::unique_ptr<AutogradMeta> autograd;
  std::string name;
};

// Strides that make `src` read as if it had shape `target` (numpy
// broadcasting; broadcast dimensions get stride 0).
Shape broadcast_strides(const Tensor& src, const Shape& target);

template <typename T>
T* Tensor::data() const {
  LT_CHECK(dtype() == dtype_of<T>::value, "tensor holds ", dtype_name(dtype()), ", accessed as ",
           dtype_name(dtype_of<T>::value));
  return static_cast<T*>(data_ptr());
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, const Shape& shape) {
  LT_CHECK(static_cast<int64_t>(values.size()) == lt::numel(shape), "from_vector: ", values.size(),
           " values for shape ", shape_str(shape));
  Tensor t = empty(shape, dtype_of<T>::value);
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  Tensor c = contiguous();
  LT_CHECK(c.device().is_cpu(), "to_vector needs a CPU tensor, got ", str());
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}

}  // namespace lt
