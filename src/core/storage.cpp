#include "core/storage.h"

#include <cstring>

#include "core/device_backend.h"
#include "core/error.h"

namespace lt {

Storage::Storage(size_t nbytes, Allocator& allocator)
    : data_(allocator.allocate(nbytes)),
      nbytes_(nbytes),
      device_(allocator.device()),
      allocator_(&allocator) {}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void()> release)
    : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {}

Storage::~Storage() {
  if (allocator_) {
    allocator_->deallocate(data_, nbytes_);
  } else if (release_) {
    release_();
  }
}

namespace {
DeviceCopyFn device_copy = nullptr;
}

void register_device_copy(DeviceCopyFn fn) {
  device_copy = fn;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  if (device_copy == nullptr) ensure_device_backend();
  LT_CHECK(device_copy != nullptr, "copy from ", src_device.str(), " to ", dst_device.str(),
           " needs the CUDA backend, which this build lacks");
  device_copy(dst, dst_device, src, src_device, nbytes);
}

}  // namespace lt
