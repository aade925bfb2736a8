#include "core/tensor.h"

#include <algorithm>
#include <cstring>

#include "core/grad_mode.h"
#include "core/strided.h"
#include "core/thread_pool.h"
#ifdef LT_WITH_CUDA
#include "core/cuda/tensor_copy.h"
#endif

namespace lt {

namespace {

std::shared_ptr<TensorImpl> make_impl(std::shared_ptr<Storage> storage, int64_t offset, Shape shape,
                                      Shape strides, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->offset = offset;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = dtype;
  return impl;
}

AutogradMeta& autograd_meta(TensorImpl& impl) {
  if (!impl.autograd) impl.autograd = std::make_unique<AutogradMeta>();
  return *impl.autograd;
}

// Typed strided copy without conversion; `bytes` is the element size.
template <typename T>
void copy_run(const char* src, char* dst, int64_t n, int64_t ss, int64_t ds) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  if (ss == 1 && ds == 1) {
    std::memcpy(d, s, static_cast<size_t>(n) * sizeof(T));
    return;
  }
  for (int64_t i = 0; i < n; ++i) d[i * ds] = s[i * ss];
}

// Copies src (already broadcast to dst's shape) into dst, converting dtype.
void strided_copy_cpu(const Tensor& dst, const Shape& src_strides, const Tensor& src) {
  const size_t dsz = dtype_size(dst.dtype());
  const size_t ssz = dtype_size(src.dtype());
  char* dbase = static_cast<char*>(dst.storage()->data());
  const char* sbase = static_cast<const char*>(src.storage()->data());
  const bool same = dst.dtype() == src.dtype();
  StridedOperands<2> operands{{dst.strides().data(), src_strides.data()},
                              {dst.offset(), src.offset()}};
  for_each_run(dst.shape(), operands,
               [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
                 const int64_t od = off[0], os = off[1], sd = st[0], ss = st[1];
                 char* d = dbase + od * static_cast<int64_t>(dsz);
                 const char* s = sbase + os * static_cast<int64_t>(ssz);
                 if (same) {
                   switch (dsz) {
                     case 1:
                       copy_run<uint8_t>(s, d, n, ss, sd);
                       break;
                     case 2:
                       copy_run<uint16_t>(s, d, n, ss, sd);
                       break;
                     case 4:
                       copy_run<uint32_t>(s, d, n, ss, sd);
                       break;
                     default:
                       copy_run<uint64_t>(s, d, n, ss, sd);
                       break;
                   }
                 } else if (ss == 1 && sd == 1) {
                   convert(s, src.dtype(), d, dst.dtype(), static_cast<size_t>(n));
                 } else {
                   for (int64_t i = 0; i < n; ++i) {
                     store_from_double(d, dst.dtype(), static_cast<size_t>(i * sd),
                                       load_as_double(s, src.dtype(), static_cast<size_t>(i * ss)));
                   }
                 }
               });
}

// The same as strided_copy_cpu for two views on one GPU (the kernel runs on
// the device's current stream).
void strided_copy_gpu(const Tensor& dst, const Shape& src_strides, const Tensor& src) {
#ifdef LT_WITH_CUDA
  cuda::strided_copy(dst.device().index, dst.shape(), dst.data_ptr(), dst.dtype(),
                     dst.strides().data(), src.data_ptr(), src.dtype(), src_strides.data());
#else
  (void)src_strides;
  fail("copy into ", dst.str(), " from ", src.str(),
       " needs the CUDA backend, which this build lacks");
#endif
}

}  // namespace

Shape broadcast_strides(const Tensor& src, const Shape& target) {
  const size_t rank = target.size();
  LT_CHECK(src.shape().size() <= rank, "cannot broadcast ", shape_str(src.shape()), " to ",
           shape_str(target));
  Shape strides(rank, 0);
  const size_t lead = rank - src.shape().size();
  for (size_t i = 0; i < src.shape().size(); ++i) {
    int64_t s = src.shape()[i];
    LT_CHECK(s == target[lead + i] || s == 1, "cannot broadcast ", shape_str(src.shape()), " to ",
             shape_str(target));
    strides[lead + i] = s == 1 ? 0 : src.strides()[i];
  }
  return strides;
}

// ---------------------------------------------------------------- construction

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  return empty(shape, dtype, default_allocator(device));
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Allocator& allocator) {
  for (int64_t s : shape) LT_CHECK(s >= 0, "negative size in shape ", shape_str(shape));
  size_t bytes = static_cast<size_t>(lt::numel(shape)) * dtype_size(dtype);
  auto storage = std::make_shared<Storage>(bytes, allocator);
  return Tensor(make_impl(std::move(storage), 0, shape, contiguous_strides(shape), dtype));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) {
  return full({}, value, dtype);
}

Tensor Tensor::randn(const Shape& shape, Generator& gen, DType dtype, double stddev) {
  Tensor t = empty(shape, dtype);
  void* data = t.data_ptr();
  if (t.numel() < kParallelRandnElements) {
    for (int64_t i = 0; i < t.numel(); ++i)
      store_from_double(data, dtype, static_cast<size_t>(i), stddev * gen.normal());
    return t;
  }
  // One draw from `gen` seeds the tensor; each fixed run of elements has its
  // own generator from that seed and its index, so the values do not depend
  // on the thread count (a 7B model's random init took minutes on one core).
  const uint64_t seed = gen.next_u64();
  const int64_t runs = (t.numel() + kRandnRunElements - 1) / kRandnRunElements;
  parallel_for(0, runs, 1, [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      Generator run_gen(split_seed(seed, static_cast<uint64_t>(r)));
      const int64_t end = std::min(t.numel(), (r + 1) * kRandnRunElements);
      for (int64_t i = r * kRandnRunElements; i < end; ++i)
        store_from_double(data, dtype, static_cast<size_t>(i), stddev * run_gen.normal());
    }
  });
  return t;
}

Tensor Tensor::uniform(const Shape& shape, Generator& gen, double lo, double hi, DType dtype) {
  Tensor t = empty(shape, dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    store_from_double(t.data_ptr(), dtype, static_cast<size_t>(i), gen.uniform(lo, hi));
  }
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, int64_t offset, const Shape& shape,
                            const Shape& strides, DType dtype) {
  LT_CHECK(shape.size() == strides.size(), "shape ", shape_str(shape), " and strides ",
           shape_str(strides), " differ in rank");
  if (lt::numel(shape) > 0) {
    int64_t last = offset;
    for (size_t i = 0; i < shape.size(); ++i) last += (shape[i] - 1) * strides[i];
    LT_CHECK(offset >= 0 && static_cast<size_t>(last + 1) * dtype_size(dtype) <= storage->nbytes(),
             "view of shape ", shape_str(shape), " at offset ", offset, " exceeds storage of ",
             storage->nbytes(), " bytes");
  }
  return Tensor(make_impl(std::move(storage), offset, shape, strides, dtype));
}

Tensor Tensor::from_doubles(const std::vector<double>& values, const Shape& shape, DType dtype) {
  LT_CHECK(static_cast<int64_t>(values.size()) == lt::numel(shape), "from_doubles: ", values.size(),
           " values for shape ", shape_str(shape));
  Tensor t = empty(shape, dtype);
  for (size_t i = 0; i < values.size(); ++i) store_from_double(t.data_ptr(), dtype, i, values[i]);
  return t;
}

// ---------------------------------------------------------------- metadata

const TensorImpl& Tensor::checked() const {
  LT_CHECK(impl_ != nullptr, "use of an undefined tensor");
  return *impl_;
}

const Shape& Tensor::shape() const {
  return checked().shape;
}
const Shape& Tensor::strides() const {
  return checked().strides;
}
int64_t Tensor::size(int64_t d) const {
  return shape()[normalize_dim(d, dim())];
}
int64_t Tensor::stride(int64_t d) const {
  return strides()[normalize_dim(d, dim())];
}
int64_t Tensor::numel() const {
  return lt::numel(shape());
}
int64_t Tensor::offset() const {
  return checked().offset;
}
DType Tensor::dtype() const {
  return checked().dtype;
}
Device Tensor::device() const {
  return checked().storage->device();
}
const std::shared_ptr<Storage>& Tensor::storage() const {
  return checked().storage;
}

bool Tensor::is_contiguous() const {
  const auto& impl = checked();
  if (lt::numel(impl.shape) == 0) return true;
  int64_t expected = 1;
  for (size_t i = impl.shape.size(); i-- > 0;) {
    if (impl.shape[i] == 1) continue;
    if (impl.strides[i] != expected) return false;
    expected *= impl.shape[i];
  }
  return true;
}

std::string Tensor::str() const {
  if (!impl_) return "Tensor[undefined]";
  return "Tensor[" + std::string(dtype_name(dtype())) + ", " + shape_str(shape()) + ", " +
         device().str() + "]";
}

void* Tensor::data_ptr() const {
  const auto& impl = checked();
  return static_cast<char*>(impl.storage->data()) +
         impl.offset * static_cast<int64_t>(dtype_size(impl.dtype));
}

double Tensor::item() const {
  LT_CHECK(numel() == 1, "item() needs exactly one element, tensor is ", str());
  Tensor c = device().is_cpu() ? *this : to(Device::cpu());
  return load_as_double(c.data_ptr(), c.dtype(), 0);
}

std::vector<double> Tensor::to_doubles() const {
  Tensor c = to(Device::cpu()).contiguous();
  std::vector<double> out(static_cast<size_t>(c.numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_double(c.data_ptr(), c.dtype(), i);
  return out;
}

// ---------------------------------------------------------------- views

void Tensor::check_raw_view_allowed(const char* what) const {
  LT_CHECK(!(GradMode::enabled() && requires_grad()), "Tensor::", what,
           " is a raw view and would cut the gradient of ", str(),
           "; use the differentiable lt::", what, " from autograd/functions.h");
}

Tensor Tensor::make_view(const Shape& shape, const Shape& strides, int64_t offset) const {
  return Tensor(make_impl(storage(), offset, shape, strides, dtype()));
}

Tensor Tensor::view(const Shape& requested) const {
  check_raw_view_allowed("view");
  LT_CHECK(is_contiguous(), "view() of non-contiguous ", str(), "; use reshape()");
  Shape shape = requested;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      LT_CHECK(infer < 0, "view(): more than one -1 in ", shape_str(requested));
      infer = static_cast<int64_t>(i);
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    LT_CHECK(known > 0 && numel() % known == 0, "view(): cannot infer -1 in ", shape_str(requested),
             " for ", str());
    shape[infer] = numel() / known;
  }
  LT_CHECK(lt::numel(shape) == numel(), "view(): shape ", shape_str(requested), " does not match ",
           numel(), " elements of ", str());
  return make_view(shape, contiguous_strides(shape), offset());
}

Tensor Tensor::reshape(const Shape& shape) const {
  check_raw_view_allowed("reshape");
  return is_contiguous() ? view(shape) : contiguous().view(shape);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  check_raw_view_allowed("transpose");
  int64_t a = normalize_dim(d0, dim()), b = normalize_dim(d1, dim());
  Shape shape = this->shape(), strides = this->strides();
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  return make_view(shape, strides, offset());
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  check_raw_view_allowed("permute");
  LT_CHECK(static_cast<int64_t>(order.size()) == dim(), "permute: order has ", order.size(),
           " entries for rank ", dim());
  Shape shape(order.size()), strides(order.size());
  std::vector<bool> seen(order.size(), false);
  for (size_t i = 0; i < order.size(); ++i) {
    int64_t d = normalize_dim(order[i], dim());
    LT_CHECK(!seen[d], "permute: dimension ", d, " repeated");
    seen[d] = true;
    shape[i] = this->shape()[d];
    strides[i] = this->strides()[d];
  }
  return make_view(shape, strides, offset());
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  check_raw_view_allowed("slice");
  int64_t dd = normalize_dim(d, dim());
  int64_t n = shape()[dd];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  LT_CHECK(step >= 1, "slice step must be positive, got ", step);
  Shape shape = this->shape(), strides = this->strides();
  shape[dd] = (end - start + step - 1) / step;
  strides[dd] *= step;
  return make_view(shape, strides, offset() + start * this->strides()[dd]);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_raw_view_allowed("select");
  int64_t dd = normalize_dim(d, dim());
  int64_t n = shape()[dd];
  if (index < 0) index += n;
  LT_CHECK(index >= 0 && index < n, "select: index ", index, " out of range for size ", n);
  Shape shape = this->shape(), strides = this->strides();
  int64_t off = offset() + index * strides[dd];
  shape.erase(shape.begin() + dd);
  strides.erase(strides.begin() + dd);
  return make_view(shape, strides, off);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  check_raw_view_allowed("unsqueeze");
  int64_t dd = normalize_dim(d, dim() + 1);
  Shape shape = this->shape(), strides = this->strides();
  int64_t stride = dd < dim() ? strides[dd] * shape[dd] : 1;
  shape.insert(shape.begin() + dd, 1);
  strides.insert(strides.begin() + dd, stride);
  return make_view(shape, strides, offset());
}

Tensor Tensor::squeeze(int64_t d) const {
  check_raw_view_allowed("squeeze");
  int64_t dd = normalize_dim(d, dim());
  LT_CHECK(shape()[dd] == 1, "squeeze: dimension ", d, " has size ", shape()[dd]);
  Shape shape = this->shape(), strides = this->strides();
  shape.erase(shape.begin() + dd);
  strides.erase(strides.begin() + dd);
  return make_view(shape, strides, offset());
}

Tensor Tensor::expand(const Shape& target) const {
  check_raw_view_allowed("expand");
  return make_view(target, broadcast_strides(*this, target), offset());
}

// ---------------------------------------------------------------- copies

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(Device device) const {
  return to(device, dtype());
}
Tensor Tensor::to(DType dtype) const {
  return to(device(), dtype);
}

Tensor Tensor::to(Device target, DType target_dtype) const {
  if (target == device() && target_dtype == dtype()) return *this;
  if (target == device()) {
    Tensor out = empty(shape(), target_dtype, target);
    out.copy_(*this);
    return out;
  }
  // Cross-device: convert on the CPU side, then move contiguous bytes (a
  // GPU view is made contiguous on its own device first).
  Tensor src = contiguous();
  if (device().is_cpu()) src = src.to(Device::cpu(), target_dtype);
  Tensor moved = empty(shape(), src.dtype(), target);
  copy_bytes(moved.data_ptr(), target, src.data_ptr(), src.device(), moved.nbytes());
  return moved.to(target_dtype);
}

void Tensor::copy_(const Tensor& src) const {
  if (device().is_cpu() && src.device().is_cpu()) {
    strided_copy_cpu(*this, broadcast_strides(src, shape()), src);
    return;
  }
  if (device() == src.device()) {
    strided_copy_gpu(*this, broadcast_strides(src, shape()), src);
    return;
  }
  if (src.shape() == shape() && src.dtype() == dtype() && is_contiguous() && src.is_contiguous()) {
    copy_bytes(data_ptr(), device(), src.data_ptr(), src.device(), nbytes());
    return;
  }
  // Anything else across devices: move the source's bytes over as they
  // are, then broadcast and convert on this device.
  copy_(src.to(device()));
}

void Tensor::fill_(double value) const {
  if (device().is_cuda()) {
    uint64_t bits = 0;  // one element of dtype(), rounded as on the CPU
    store_from_double(&bits, dtype(), 0, value);
#ifdef LT_WITH_CUDA
    cuda::strided_fill(device().index, shape(), data_ptr(), dtype(), strides().data(), &bits);
#else
    fail("fill_ on ", str(), " needs the CUDA backend, which this build lacks");
#endif
    return;
  }
  Tensor one = empty({}, dtype());
  store_from_double(one.data_ptr(), dtype(), 0, value);
  copy_(one);
}

// ---------------------------------------------------------------- autograd state

bool Tensor::requires_grad() const {
  const auto& impl = checked();
  return impl.autograd && (impl.autograd->requires_grad || impl.autograd->grad_fn);
}

Tensor& Tensor::set_requires_grad(bool enabled) {
  LT_CHECK(!enabled || is_floating(dtype()), "only floating tensors can require grad, got ", str());
  LT_CHECK(is_leaf(), "set_requires_grad on a non-leaf tensor");
  autograd_meta(*impl_).requires_grad = enabled;
  return *this;
}

bool Tensor::is_leaf() const {
  const auto& impl = checked();
  return !impl.autograd || !impl.autograd->grad_fn;
}

const Tensor& Tensor::grad() const {
  static const Tensor none;
  const auto& impl = checked();
  return impl.autograd ? impl.autograd->grad : none;
}

void Tensor::set_grad(const Tensor& grad) const {
  autograd_meta(*impl_).grad = grad;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  const auto& impl = checked();
  return impl.autograd ? impl.autograd->grad_fn : none;
}

void Tensor::set_grad_fn(std::shared_ptr<autograd::Node> fn, uint32_t output_index) const {
  auto& meta = autograd_meta(*impl_);
  meta.grad_fn = std::move(fn);
  meta.output_index = output_index;
}

uint32_t Tensor::output_index() const {
  const auto& impl = checked();
  return impl.autograd ? impl.autograd->output_index : 0;
}

Tensor Tensor::detach() const {
  const auto& impl = checked();
  return Tensor(make_impl(impl.storage, impl.offset, impl.shape, impl.strides, impl.dtype));
}

void Tensor::register_grad_ready_hook(GradReadyHook hook) const {
  LT_CHECK(is_leaf() && requires_grad(),
           "grad-ready hooks belong on leaf tensors that require grad");
  autograd_meta(*impl_).grad_ready_hooks.push_back(std::move(hook));
}

const std::vector<Tensor::GradReadyHook>& Tensor::grad_ready_hooks() const {
  static const std::vector<GradReadyHook> none;
  const auto& impl = checked();
  return impl.autograd ? impl.autograd->grad_ready_hooks : none;
}

const std::string& Tensor::name() const {
  return checked().name;
}

Tensor& Tensor::set_name(std::string name) {
  impl_->name = std::move(name);
  return *this;
}

}  // namespace lt
