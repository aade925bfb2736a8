#pragma once
// One shared-memory segment per host for the ranks of that host
// (dist/shared_memory.h; exec/shared_weights.h lays the weights in it).
#include <memory>
#include <vector>

#include "dist/shared_memory.h"

namespace lt::dist {

struct HostSegment {
  std::shared_ptr<SharedMemory> memory;
  int local_rank = 0;  // among the ranks of this host
  int local_size = 1;
  int hosts = 1;             // that the run spans
  std::vector<int> members;  // the world ranks of this host, by local rank
};

// How the ranks of this run sit on hosts (a collective over every rank;
// MPI launches only: a torchrun-style launch says so in an lt::Error).
// Every wait on the other ranks, here and in open_host_segment, is
// bounded by `timeout_s` (dist.timeout_s) and names the ranks it waited
// for (dist/mpi.h).
HostSegment host_layout(double timeout_s);

// Collective over every rank of an MPI launch, each passing the same
// `bytes`: local rank 0 of each host creates a segment named after its
// process id, the others of the host map it, and once all have, local rank
// 0 unlinks the name (Note [Shared memory outlives no run]). An error on
// local rank 0 (no room in /dev/shm) reaches the others of its host as an
// lt::Error of their own rather than a hang.
HostSegment open_host_segment(size_t bytes, double timeout_s);

}  // namespace lt::dist
