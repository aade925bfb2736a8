#pragma once
// The distributed side of this process, set up on first use and once per
// process: the world read from the launcher's environment (dist/world.h),
// MPI initialized when mpirun or srun started the process (finalized at
// exit), and NCCL_NVLS_ENABLE=0 in the environment of every rank (NVLink
// multicast is never used: docs/distributed.md).
#include <memory>
#include <string>

#include "core/device.h"
#include "dist/world.h"
#include "exec/cross_rank_sum.h"

namespace lt::dist {

const World& this_world();

// Adds up across ranks on `device`: MPI's all-reduce on the CPU, NCCL's on a
// CUDA device (rank r on GPU LOCAL_RANK). Throws lt::Error when this build
// or this launch cannot: no MPI in the build, a torchrun-style launch on the
// CPU, a CUDA device without NCCL. `timeout_s` (dist.timeout_s) bounds every
// wait on the others: the torchrun bootstrap, NCCL's and MPI's collectives
// (an MPI rank that gives up names the ranks that had not arrived). Null in a one-process run. A
// CUDA device must be GPU LOCAL_RANK.
std::unique_ptr<exec::CrossRankSum> open_cross_rank_sum(Device device, double timeout_s);

// A name every rank of this run knows and no other run uses (16 hex
// digits hashed from the NCCL id rank 0 handed out): the shared weights'
// segment of a torchrun-style launch is named after it. Empty before
// open_cross_rank_sum has opened NCCL.
const std::string& run_token();

// After an error on this rank: the others would wait for it in their next
// collective, so an MPI job is aborted (MPI_Abort, which mpirun turns into
// the end of every rank). A no-op in a one-process run.
void abort_other_ranks();

}  // namespace lt::dist
