#pragma once
// Private to src/dist's MPI files (LT_HAVE_MPI only): every MPI collective
// this program runs is non-blocking, and its wait is bounded by
// dist.timeout_s and names the ranks it waited for (Note [Naming the rank
// that does not come], dist/mpi_waits.cpp). One count of collectives per
// process, for the step's (dist/mpi_sum.cpp) and the set-up's
// (dist/mpi.cpp) alike: every rank starts the same collectives in the same
// order, so the k-th of one rank is the k-th of every other.
#include <span>
#include <string>

#include "dist/mpi_check.h"

namespace lt::dist {

// Counts the collective this rank is about to start and tells the other
// ranks it got there; returns its number.
int64_t begin_collective();

// Polls `requests` until all are done, or throws past `timeout_s` naming,
// among the world ranks `among` (empty: every other rank), those that have
// not reached collective `sequence` or went silent inside it. `what` names
// the collective in the error.
void bounded_wait(std::span<MPI_Request> requests, int64_t sequence, const std::string& what,
                  double timeout_s, std::span<const int> among = {});

// Starts one collective (`start` fills in its request) and waits for it,
// bounded as above.
template <class Start>
void bounded_collective(const std::string& what, double timeout_s, Start&& start,
                        std::span<const int> among = {}) {
  const int64_t sequence = begin_collective();
  MPI_Request request = MPI_REQUEST_NULL;
  start(&request);
  bounded_wait(std::span<MPI_Request>(&request, 1), sequence, what, timeout_s, among);
}

// Cancels the arrival notices' receives, if any were posted: MPI_Finalize
// must find no request pending. Called just before it.
void close_collective_waits();

}  // namespace lt::dist
