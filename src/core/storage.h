#pragma once
// A block of bytes on one device. Tensors share storage through
// shared_ptr; views keep it alive. Storage either owns its memory (taken
// from an Allocator) or wraps external memory (an mmap'd file) with a
// release callback.
#include <cstddef>
#include <functional>

#include "core/allocator.h"
#include "core/device.h"

namespace lt {

class Storage {
 public:
  Storage(size_t nbytes, Allocator& allocator);
  Storage(void* data, size_t nbytes, Device device, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;  // null for external memory
  std::function<void()> release_;
};

// Copies bytes between devices. CPU<->CPU is memcpy; anything involving a
// GPU goes through the function a backend registers (synchronous here; the
// executors use streams directly).
using DeviceCopyFn = void (*)(void* dst, Device dst_device, const void* src, Device src_device,
                              size_t nbytes);
void register_device_copy(DeviceCopyFn fn);
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

}  // namespace lt
