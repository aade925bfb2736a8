#pragma once
// Note [Pinned masters]
// With exec.weight_uploads f32 the GPU uploads the f32 masters of the
// stages kept in host memory as they are and converts them to bf16 itself
// (exec/cuda/streaming_device_cuda.h), instead of uploading bf16 copies
// that the CPU update keeps current: 2 bytes a parameter less host memory
// (29.5 GB for a 14B), twice the upload bytes. Copies from pageable memory
// run several times slower than from page-locked memory, so those masters
// move into memory of their own registered with CUDA (cudaHostRegister):
// page-aligned blocks, each parameter's pages its own, so that no
// registration overlaps another allocation's. The memory lives as long as
// the parameters do, which may be longer than the device (the model
// outlives the executor), so the allocator lives for the process.
#include "core/allocator.h"
#include "core/tensor.h"

namespace lt::exec {

Allocator& pinned_master_allocator();

// Moves `param` (a contiguous f32 CPU tensor) into pinned_master_allocator()
// memory: every handle that shares its TensorImpl (the model's fields, the
// optimizer's) follows, the old memory is freed once nothing else holds it.
void pin_master(const Tensor& param);

}  // namespace lt::exec
