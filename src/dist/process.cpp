#include "dist/process.h"

#include <fmt/format.h>

#include <cstdlib>
#include <mutex>

#include "core/error.h"
#include "dist/mpi.h"
#include "dist/nccl_sum.h"
#include "dist/tcp_rendezvous.h"

namespace lt::dist {

namespace {

struct ProcessState {
  World world;
  bool mpi_started = false;
  std::string run_token;  // from the NCCL id (run_token())
};

ProcessState& state() {
  static ProcessState s = [] {
    // Set before any NCCL call, in every rank, whatever the launcher.
    ::setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/1);
    ProcessState p;
    p.world = world_from_environment(process_environment());
    if (p.world.launcher == Launcher::Mpi && p.world.distributed()) {
      mpi_start(p.world.rank, p.world.size);
      p.mpi_started = true;
    }
    return p;
  }();
  return s;
}

}  // namespace

const World& this_world() {
  return state().world;
}

std::unique_ptr<exec::CrossRankSum> open_cross_rank_sum(Device device, double timeout_s) {
  const ProcessState& p = state();
  const World& w = p.world;
  if (!w.distributed()) return nullptr;
  if (device.is_cpu()) {
    LT_CHECK(w.launcher == Launcher::Mpi, "a ", launcher_name(w.launcher),
             "-style launch (RANK, WORLD_SIZE, ...) runs its ranks over NCCL, on GPUs: on the "
             "CPU start the ranks with mpirun, or with lazytrain launch --via mpirun");
    return make_mpi_sum(timeout_s);
  }
  LT_CHECK(device.index == w.local_rank, "rank ", w.rank, " uses GPU LOCAL_RANK = ", w.local_rank,
           ", but its model is on ", device.str());
  NcclId id{};
  if (w.rank == 0) id = make_nccl_id();
  if (p.mpi_started) {
    mpi_broadcast(id, timeout_s);
  } else {
    const std::vector<char> shared = share_from_rank0(
        w, w.rank == 0 ? std::vector<char>(id.begin(), id.end()) : std::vector<char>{},
        kNcclIdBytes, timeout_s);
    std::copy(shared.begin(), shared.end(), id.begin());
  }
  uint64_t hash = 0xcbf29ce484222325;  // FNV-1a: the id's random bytes, mixed into 64 bits
  for (char c : id) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3;
  state().run_token = fmt::format("{:016x}", hash);
  return make_nccl_sum(w, w.local_rank, id, timeout_s);
}

const std::string& run_token() {
  return state().run_token;
}

void abort_other_ranks() {
  if (state().mpi_started) mpi_abort(1);
}

}  // namespace lt::dist
