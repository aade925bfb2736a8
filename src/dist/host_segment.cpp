#include "dist/host_segment.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <thread>

#include "core/error.h"
#include "dist/mpi.h"
#include "dist/process.h"

namespace lt::dist {

namespace {

using Clock = std::chrono::steady_clock;

// The name local rank 0 made, or (first byte 0) its error, for the others.
using NameOrError = std::array<char, 512>;

}  // namespace

HostSegment torchrun_host_layout(const World& w) {
  LT_CHECK(w.local_size > 0,
           "dist.share_weights: a torchrun-style launch must set LOCAL_WORLD_SIZE (torchrun and "
           "lazytrain launch do) for the ranks of a host to find each other; or set "
           "dist.share_weights false");
  const int first = w.rank - w.local_rank;
  LT_CHECK(w.local_rank < w.local_size && first % w.local_size == 0 && w.size % w.local_size == 0,
           "dist.share_weights: RANK=", w.rank, ", LOCAL_RANK=", w.local_rank,
           ", LOCAL_WORLD_SIZE=", w.local_size, " and WORLD_SIZE=", w.size,
           " do not make each host a block of LOCAL_WORLD_SIZE consecutive ranks, as torchrun "
           "numbers them; set dist.share_weights false");
  HostSegment s;
  s.local_rank = w.local_rank;
  s.local_size = w.local_size;
  s.hosts = w.size / w.local_size;
  for (int r = first; r < first + w.local_size; ++r) s.members.push_back(r);
  return s;
}

HostSegment host_layout(double timeout_s) {
  const World& w = this_world();
  if (w.launcher == Launcher::Torchrun) return torchrun_host_layout(w);
  LT_CHECK(w.launcher == Launcher::Mpi, "dist.share_weights: a run of one process shares nothing");
  const HostRanks h = mpi_host_ranks(timeout_s);
  HostSegment s;
  s.local_rank = h.local_rank;
  s.local_size = h.local_size;
  s.hosts = h.hosts;
  s.members = h.members;
  return s;
}

std::shared_ptr<SharedMemory> open_named_host_segment(const std::string& name, size_t bytes,
                                                      bool create, double timeout_s) {
  if (create) return std::make_shared<SharedMemory>(SharedMemory::create(name, bytes));
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    try {
      return std::make_shared<SharedMemory>(SharedMemory::attach(name, bytes));
    } catch (const Error& e) {
      // Not made yet, or made but not yet its full size: local rank 0 may
      // still be starting up.
      if (Clock::now() > deadline)
        fail("waited dist.timeout_s = ", timeout_s, " s for local rank 0 of this host to make ",
             "the shared weights' segment /dev/shm", name, " of ", bytes,
             " bytes (it failed, or is hung or slower than the timeout): ", e.what());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

HostSegment open_host_segment(size_t bytes, double timeout_s) {
  HostSegment s = host_layout(timeout_s);
  if (this_world().launcher == Launcher::Torchrun) {
    LT_CHECK(!run_token().empty(),
             "dist.share_weights: a torchrun-style launch names the segment after the run, "
             "known once NCCL is open");
    const int host = s.members.front() / s.local_size;
    s.memory = open_named_host_segment("/lazytrain-" + run_token() + "-" + std::to_string(host),
                                       bytes, s.local_rank == 0, timeout_s);
    return s;
  }
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
