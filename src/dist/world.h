#pragma once
// Who this process is in a data-parallel run, read from the launcher's
// environment (docs/distributed.md):
//  - MPI: mpirun / srun (OpenMPI's OMPI_COMM_WORLD_*, PMIx's PMIX_RANK,
//    srun --mpi=pmix's PMIX_RANK); rank and size then come from
//    MPI itself once it is initialized.
//  - torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, all
//    five (a half-set environment is an error naming what is missing).
//  - neither: one process, no communication at all.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace lt::dist {

enum class Launcher { None, Mpi, Torchrun };
const char* launcher_name(Launcher launcher);

struct World {
  Launcher launcher = Launcher::None;
  int rank = 0;
  int size = 1;
  int local_rank = 0;  // which GPU of its host this rank uses
  int local_size =
      0;  // the ranks of this host (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE); 0 if unset
  std::string master_addr;  // torchrun: where rank 0 hands out the NCCL id
  int master_port = 0;
  bool distributed() const { return size > 1; }
};

// The ranks that share this host's cores and memory: local_size when the
// launcher says, else every rank (one host, as `lazytrain launch` runs).
int ranks_on_this_host(const World& world);

// Reads one environment variable; nullopt when unset.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvironmentLookup process_environment();

// The world as the environment describes it. Under MPI, rank and size are
// the launcher's variables (MPI_Comm_rank agrees; dist/process.h checks).
// Throws lt::Error naming the variable that is missing or malformed.
World world_from_environment(const EnvironmentLookup& env);

// train.batch_size is the global batch: every micro-batch of `rows`
// sequences is cut into world.size equal shards. Throws lt::Error naming
// train.batch_size (and train.grad_accum when it is the cause) otherwise.
// `set_at` leads the message: where train.batch_size was set ("FILE (line
// N): "), or "".
void check_batch_divides(int64_t batch_size, int64_t grad_accum, const World& world,
                         const std::string& set_at = "");

// The line rank 0 logs at the start of a run of several ranks: how many,
// what each runs of train.batch_size (and of each micro-batch, with
// train.grad_accum), and over what the gradients are summed (`over_nccl`:
// NCCL on GPUs; else MPI). After check_batch_divides.
std::string describe_data_parallel(int64_t batch_size, int64_t grad_accum, const World& world,
                                   bool over_nccl);

}  // namespace lt::dist
