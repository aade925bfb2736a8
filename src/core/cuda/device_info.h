#pragma once
// What the CUDA runtime reports about the machine's GPUs. Only compiled
// when LT_WITH_CUDA; callers guard with #ifdef.
#include <cstddef>
#include <string>

namespace lt::cuda {

int device_count();  // 0 when there is no driver or no GPU
std::string device_name(int index);
int driver_version();  // cudaDriverGetVersion: 13000 for CUDA 13.0
size_t device_total_memory(int index);
size_t device_free_memory(int index);  // what cudaMemGetInfo reports free now
void register_backend();

}  // namespace lt::cuda
