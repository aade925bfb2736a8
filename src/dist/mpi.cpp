#include "dist/mpi.h"

#include "core/error.h"

#ifdef LT_HAVE_MPI
#include <algorithm>
#include <cstdlib>

#include "dist/mpi_check.h"

namespace lt::dist {

namespace {

extern "C" void finalize_mpi_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

bool mpi_built_in() {
  return true;
}

void mpi_start(int rank, int size) {
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  std::atexit(finalize_mpi_at_exit);
  int mpi_rank = 0, mpi_size = 1;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &mpi_size), "MPI_Comm_size");
  LT_CHECK(mpi_rank == rank && mpi_size == size, "MPI says rank ", mpi_rank, " of ", mpi_size,
           ", the launcher's environment rank ", rank, " of ", size,
           " (is this lazytrain linked with another MPI than the mpirun that started it?)");
}

void mpi_broadcast(std::span<char> bytes) {
  check_mpi(MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, MPI_COMM_WORLD),
            "MPI_Bcast");
}

bool mpi_any(bool flag) {
  int value = flag ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
            "MPI_Allreduce");
  return value != 0;
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
}

namespace {

MPI_Comm host_comm() {
  static MPI_Comm comm = [] {
    MPI_Comm c = MPI_COMM_NULL;  // left to MPI_Finalize: freeing it is collective
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &c),
              "MPI_Comm_split_type");
    return c;
  }();
  return comm;
}

}  // namespace

HostRanks mpi_host_ranks() {
  HostRanks h;
  check_mpi(MPI_Comm_rank(host_comm(), &h.local_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(host_comm(), &h.local_size), "MPI_Comm_size");
  int first = h.local_rank == 0 ? 1 : 0;  // one per host
  check_mpi(MPI_Allreduce(&first, &h.hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  return h;
}

void mpi_host_broadcast(std::span<char> bytes) {
  check_mpi(MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, host_comm()),
            "MPI_Bcast");
}

void mpi_host_barrier() {
  check_mpi(MPI_Barrier(host_comm()), "MPI_Barrier");
}

}  // namespace lt::dist

#else  // no MPI in this build

namespace lt::dist {

namespace {
[[noreturn]] void no_mpi() {
  fail(
      "this lazytrain was built without MPI, which a run of several processes on the CPU needs: "
      "install libopenmpi-dev (scripts/install-deps.sh) and rebuild");
}
}  // namespace

bool mpi_built_in() {
  return false;
}
void mpi_start(int, int) {
  no_mpi();
}
std::unique_ptr<exec::CrossRankSum> make_mpi_sum(double) {
  no_mpi();
}
void mpi_broadcast(std::span<char>) {
  no_mpi();
}
bool mpi_any(bool) {
  no_mpi();
}
void mpi_abort(int) {}
HostRanks mpi_host_ranks() {
  no_mpi();
}
void mpi_host_broadcast(std::span<char>) {
  no_mpi();
}
void mpi_host_barrier() {
  no_mpi();
}

}  // namespace lt::dist

#endif
