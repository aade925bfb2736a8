#pragma once
#include <string>

namespace lt {

enum class DeviceKind : unsigned char { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;

  static Device cpu() { return {DeviceKind::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceKind::CUDA, index}; }
  bool is_cpu() const { return kind == DeviceKind::CPU; }
  bool is_cuda() const { return kind == DeviceKind::CUDA; }
  std::string str() const {
    return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
  }
  bool operator==(const Device&) const = default;
};

// Whether this build has the CUDA backend and the machine a GPU it sees.
bool cuda_device_visible();

}  // namespace lt
