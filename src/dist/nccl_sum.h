#pragma once
// The GPU's data-parallel sum: NCCL's all-reduce on the current stream of
// GPU LOCAL_RANK. Compiled with NCCL only (CUDA builds where nccl.h was
// found: LT_HAVE_NCCL); elsewhere each function throws saying so.
//
// Nothing waits forever: the communicator is non-blocking
// (ncclConfig_t.blocking = 0), and every wait polls the stream and
// ncclCommGetAsyncError until the work is done, NCCL reports an error, or
// `timeout_s` passes; the last two abort the communicator (ncclCommAbort)
// and throw, naming this rank, so that a rank that died or hangs stops the
// others instead of holding them.
#include <array>
#include <memory>

#include "dist/world.h"
#include "exec/cross_rank_sum.h"

namespace lt::dist {

inline constexpr size_t kNcclIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
using NcclId = std::array<char, kNcclIdBytes>;

bool nccl_built_in();
// ncclGetUniqueId: made by rank 0, handed to the others (MPI_Bcast, or TCP
// under torchrun: dist/process.cpp).
NcclId make_nccl_id();
// One rank of `world` on CUDA device `device_index`.
std::unique_ptr<exec::CrossRankSum> make_nccl_sum(const World& world, int device_index,
                                                  const NcclId& id, double timeout_s);

}  // namespace lt::dist
