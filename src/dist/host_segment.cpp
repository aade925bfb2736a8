#include "dist/host_segment.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include "core/error.h"
#include "dist/mpi.h"
#include "dist/process.h"

namespace lt::dist {

namespace {

// The name local rank 0 made, or (first byte 0) its error, for the others.
using NameOrError = std::array<char, 512>;

}  // namespace

HostSegment host_layout(double timeout_s) {
  const World& w = this_world();
  LT_CHECK(w.launcher == Launcher::Mpi,
           "dist.share_weights: the ranks of a host find each other through MPI, but this run "
           "was started by ",
           launcher_name(w.launcher), "; start it with mpirun, or set dist.share_weights false");
  const HostRanks h = mpi_host_ranks(timeout_s);
  HostSegment s;
  s.local_rank = h.local_rank;
  s.local_size = h.local_size;
  s.hosts = h.hosts;
  s.members = h.members;
  return s;
}

HostSegment open_host_segment(size_t bytes, double timeout_s) {
  HostSegment s = host_layout(timeout_s);
  static std::atomic<int> made{0};  // segments this process made: a unique name
  NameOrError message{};
  std::optional<SharedMemory> mine;
  std::exception_ptr failure;
  if (s.local_rank == 0) {
    const std::string name =
        "/lazytrain-" + std::to_string(::getpid()) + "-" + std::to_string(made++);
    try {
      mine.emplace(SharedMemory::create(name, bytes));
      std::strncpy(message.data(), name.c_str(), message.size() - 1);
    } catch (const std::exception& e) {
      failure = std::current_exception();
      std::strncpy(message.data() + 1, e.what(), message.size() - 2);
    }
  }
  mpi_host_broadcast(message, "local rank 0's name of the shared weights' segment", timeout_s);
  if (failure) std::rethrow_exception(failure);
  LT_CHECK(message[0] != '\0',
           "local rank 0 of this host could not make the shared weights: ", message.data() + 1);
  if (s.local_rank != 0) {
    try {
      mine.emplace(SharedMemory::attach(message.data(), bytes));
    } catch (...) {
      failure = std::current_exception();
    }
  }
  // Every rank of the host has it mapped (or has failed to): the name can go.
  mpi_host_barrier("the mapping of the shared weights' segment by every rank of this host",
                   timeout_s);
  if (mine) mine->unlink();
  if (failure) std::rethrow_exception(failure);
  s.memory = std::make_shared<SharedMemory>(std::move(*mine));
  return s;
}

}  // namespace lt::dist
