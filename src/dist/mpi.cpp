#include "dist/mpi.h"

#include "core/error.h"

#ifdef LT_HAVE_MPI
#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <vector>

#include "dist/mpi_waits.h"

namespace lt::dist {

namespace {

extern "C" void finalize_mpi_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  close_collective_waits();
  MPI_Finalize();
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

void mpi_broadcast(std::span<char> bytes, double timeout_s) {
  bounded_collective("the broadcast of rank 0's NCCL id", timeout_s, [&](MPI_Request* r) {
    check_mpi(
        MPI_Ibcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, MPI_COMM_WORLD, r),
        "MPI_Ibcast");
  });
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
}

namespace {

struct HostComm {
  MPI_Comm comm = MPI_COMM_NULL;  // left to MPI_Finalize: freeing it is collective
  std::vector<int> members;       // the world ranks of this host, by local rank
  std::vector<int> others;        // the same but this rank
};

// The test's hosts of this many consecutive ranks (dist/mpi.h), or 0.
int test_ranks_per_host() {
  const char* v = std::getenv("LT_TEST_RANKS_PER_HOST");
  return v != nullptr ? std::max(0, std::atoi(v)) : 0;
}

// Split once. MPI_Comm_split_type has no non-blocking form, so a bounded
// barrier of every rank comes first: the split then waits only for ranks
// that are alive and have reached it.
const HostComm& host_comm(double timeout_s) {
  static std::optional<HostComm> host;
  if (host) return *host;
  bounded_collective(
      "the meeting of the ranks before they find which share a host", timeout_s,
      [](MPI_Request* r) { check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, r), "MPI_Ibarrier"); });
  HostComm h;
  int size = 1, world_rank = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank), "MPI_Comm_rank");
  if (const int per_host = test_ranks_per_host(); per_host > 0) {
    check_mpi(MPI_Comm_split(MPI_COMM_WORLD, world_rank / per_host, world_rank, &h.comm),
              "MPI_Comm_split");
  } else {
    check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &h.comm),
              "MPI_Comm_split_type");
  }
  check_mpi(MPI_Comm_size(h.comm, &size), "MPI_Comm_size");
  MPI_Group world_group = MPI_GROUP_NULL, host_group = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group");
  check_mpi(MPI_Comm_group(h.comm, &host_group), "MPI_Comm_group");
  std::vector<int> local(static_cast<size_t>(size)), world(static_cast<size_t>(size));
  std::iota(local.begin(), local.end(), 0);
  check_mpi(MPI_Group_translate_ranks(host_group, size, local.data(), world_group, world.data()),
            "MPI_Group_translate_ranks");
  MPI_Group_free(&host_group);
  MPI_Group_free(&world_group);
  h.members = world;
  for (int p : world)
    if (p != world_rank) h.others.push_back(p);
  host = std::move(h);
  return *host;
}

}  // namespace

HostRanks mpi_host_ranks(double timeout_s) {
  const HostComm& host = host_comm(timeout_s);
  HostRanks h;
  check_mpi(MPI_Comm_rank(host.comm, &h.local_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(host.comm, &h.local_size), "MPI_Comm_size");
  h.members = host.members;
  int first = h.local_rank == 0 ? 1 : 0;  // one per host
  bounded_collective("the count of hosts", timeout_s, [&](MPI_Request* r) {
    check_mpi(MPI_Iallreduce(&first, &h.hosts, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, r),
              "MPI_Iallreduce");
  });
  return h;
}

void mpi_host_broadcast(std::span<char> bytes, const std::string& what, double timeout_s) {
  const HostComm& host = host_comm(timeout_s);
  bounded_collective(
      what, timeout_s,
      [&](MPI_Request* r) {
        check_mpi(
            MPI_Ibcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, host.comm, r),
            "MPI_Ibcast");
      },
      host.others);
}

void mpi_host_barrier(const std::string& what, double timeout_s) {
  const HostComm& host = host_comm(timeout_s);
  bounded_collective(
      what, timeout_s,
      [&](MPI_Request* r) { check_mpi(MPI_Ibarrier(host.comm, r), "MPI_Ibarrier"); }, host.others);
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
void mpi_broadcast(std::span<char>, double) {
  no_mpi();
}
void mpi_abort(int) {}
HostRanks mpi_host_ranks(double) {
  no_mpi();
}
void mpi_host_broadcast(std::span<char>, const std::string&, double) {
  no_mpi();
}
void mpi_host_barrier(const std::string&, double) {
  no_mpi();
}

}  // namespace lt::dist

#endif
