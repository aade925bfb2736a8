#pragma once
// The device side of the index guards (ops/index_checks.h): kernels that
// read ids or targets never read or write outside their tables; a bad index
// is recorded in the device's one IndexError, and the host reads that record
// at a point where it waits for the stream anyway.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/device.h"

namespace lt::ops::cuda {

// Which op found the bad index (IndexError::op); 0 means none was found.
enum IndexOp : int32_t {
  kIndexOpNone = 0,
  kIndexOpEmbedding = 1,
  kIndexOpEmbeddingBackward = 2,
  kIndexOpCrossEntropy = 3,
};

struct IndexError {
  int32_t op;
  int32_t unused;
  int64_t value;     // the bad id or target
  int64_t position;  // flat position among the ids, or the row of the target
  int64_t limit;     // the vocabulary size: valid indices are [0, limit)
  int64_t ignore_index;
};

// Called by one thread for one bad index. The first caller on the device
// claims the record and fills it; later ones leave it as it is (the host
// reads it only after the stream has finished, so no partial record is
// ever seen).
__device__ __forceinline__ void record_bad_index(IndexError* record, IndexOp op, int64_t value,
                                                 int64_t position, int64_t limit,
                                                 int64_t ignore_index = 0) {
  if (atomicCAS(&record->op, 0, static_cast<int32_t>(op)) != 0) return;
  record->value = value;
  record->position = position;
  record->limit = limit;
  record->ignore_index = ignore_index;
}

// The device's record (allocated and zeroed on first use; it lives as long
// as the process). Lock-free once the record exists, so every launch may
// call it.
IndexError* index_error_record(Device device);

// `found` is a copy of the device's record that names a bad index (op !=
// kIndexOpNone), read after the kernels that wrote it finished: clears the
// record on the calling thread's current stream and throws the lt::Error
// of throw_recorded_index_error (ops/cuda/index_check.h). For an op that
// reads the record back together with its own results in one copy.
[[noreturn]] void throw_index_error(Device device, const IndexError& found);

}  // namespace lt::ops::cuda
