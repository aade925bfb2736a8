#pragma once
// Everything this program asks of MPI (only these functions include
// <mpi.h>): start-up, the CPU's data-parallel sum, a broadcast for the
// NCCL id, the ranks of each host, and the abort that ends every rank. Without MPI in the build
// (LT_HAVE_MPI unset) each throws an lt::Error saying so.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "exec/cross_rank_sum.h"

namespace lt::dist {

bool mpi_built_in();
// MPI_Init_thread (funneled: only the main thread calls MPI) and an atexit
// MPI_Finalize; checks that MPI's rank and size are `rank` and `size`.
void mpi_start(int rank, int size);
// The CPU's collectives over MPI_COMM_WORLD (dist/mpi_sum.cpp): f32 CPU
// tensors and doubles. Every wait on the others is bounded by `timeout_s`
// (dist.timeout_s): past it the call throws, naming the ranks that had not
// reached the collective.
std::unique_ptr<exec::CrossRankSum> make_mpi_sum(double timeout_s);
// The collectives below wait on the other ranks at most `timeout_s`
// (dist.timeout_s), as make_mpi_sum's do: past it they throw, naming the
// ranks that had not reached them (dist/mpi_waits.h).
//
// Rank 0's `bytes` on every rank.
void mpi_broadcast(std::span<char> bytes, double timeout_s);
// MPI_Abort(MPI_COMM_WORLD): mpirun then ends every rank.
void mpi_abort(int code);

// The ranks of this host (MPI_Comm_split_type MPI_COMM_TYPE_SHARED, split
// once): this rank's place among them, how many, their world ranks, and
// how many hosts the run spans. Collective over every rank. Tests may cut
// one machine into hosts of LT_TEST_RANKS_PER_HOST consecutive ranks, to
// run the paths of several hosts on one.
struct HostRanks {
  int local_rank = 0;
  int local_size = 1;
  int hosts = 1;
  std::vector<int> members;  // the world ranks of this host, by local rank
};
HostRanks mpi_host_ranks(double timeout_s);
// Local rank 0's `bytes` on every rank of this host (`what` names it in
// an error).
void mpi_host_broadcast(std::span<char> bytes, const std::string& what, double timeout_s);
// Returns once every rank of this host has called it.
void mpi_host_barrier(const std::string& what, double timeout_s);

}  // namespace lt::dist
