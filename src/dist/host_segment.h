#pragma once
// One shared-memory segment per host for the ranks of that host
// (dist/shared_memory.h; exec/shared_weights.h lays the weights in it).
#include <memory>
#include <string>
#include <vector>

#include "dist/shared_memory.h"
#include "dist/world.h"

namespace lt::dist {

struct HostSegment {
  std::shared_ptr<SharedMemory> memory;
  int local_rank = 0;  // among the ranks of this host
  int local_size = 1;
  int hosts = 1;             // that the run spans
  std::vector<int> members;  // the world ranks of this host, by local rank
};

// How the ranks of this run sit on hosts. MPI: a collective over every
// rank; every wait on the other ranks, here and in open_host_segment, is
// bounded by `timeout_s` (dist.timeout_s) and names the ranks it waited
// for (dist/mpi.h). torchrun-style: from the environment alone
// (torchrun_host_layout).
HostSegment host_layout(double timeout_s);

// A torchrun-style launch's hosts: each a block of LOCAL_WORLD_SIZE
// consecutive ranks, as torchrun numbers them. Throws an lt::Error naming
// the variables when LOCAL_WORLD_SIZE is unset or the ranks do not fall so.
HostSegment torchrun_host_layout(const World& world);

// Every rank, each passing the same `bytes`: local rank 0 of each host
// creates a segment, the others of the host map it.
//  - MPI: named after local rank 0's process id and broadcast to the
//    host's ranks; once all have mapped it, local rank 0 unlinks the name
//    (Note [Shared memory outlives no run]). An error on local rank 0 (no
//    room in /dev/shm) reaches the others of its host as an lt::Error of
//    their own rather than a hang.
//  - torchrun-style (no MPI): named after the run (run_token(), after
//    open_cross_rank_sum) and the host (open_named_host_segment); the
//    caller unlinks it once every rank of the host has mapped it (a
//    barrier in the segment: exec/shared_weights.h).
HostSegment open_host_segment(size_t bytes, double timeout_s);

// Local rank 0 (`create`) makes `name` of `bytes` bytes; another rank maps
// it, retrying until it exists with that size, and throws past
// `timeout_s`, naming the segment and local rank 0.
std::shared_ptr<SharedMemory> open_named_host_segment(const std::string& name, size_t bytes,
                                                      bool create, double timeout_s);

}  // namespace lt::dist
