#include "dist/world.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <vector>

#include "core/error.h"

namespace lt::dist {

namespace {

int parse_int(const std::string& name, const std::string& value, int min) {
  int out = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  LT_CHECK(ec == std::errc() && end == value.data() + value.size() && out >= min,
           "environment variable ", name, "='", value, "' is not an integer >= ", min);
  return out;
}

int required_int(const EnvironmentLookup& env, const std::string& name, int min,
                 const std::string& launcher) {
  const auto value = env(name);
  LT_CHECK(value.has_value(), launcher, " sets ", name, " but not ", name);
  return parse_int(name, *value, min);
}

// The first of `names` that is set, for MPI launchers whose spelling varies.
std::optional<std::string> first_set(const EnvironmentLookup& env,
                                     std::initializer_list<const char*> names, std::string* which) {
  for (const char* n : names) {
    if (auto v = env(n)) {
      *which = n;
      return v;
    }
  }
  return std::nullopt;
}

World mpi_world(const EnvironmentLookup& env) {
  World w;
  w.launcher = Launcher::Mpi;
  std::string name;
  if (auto v = first_set(env, {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}, &name))
    w.rank = parse_int(name, *v, 0);
  if (auto v =
          first_set(env, {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, &name))
    w.size = parse_int(name, *v, 1);
  if (auto v =
          first_set(env, {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}, &name))
    w.local_rank = parse_int(name, *v, 0);
  if (auto v = first_set(env, {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}, &name))
    w.local_size = parse_int(name, *v, 1);
  return w;
}

World torchrun_world(const EnvironmentLookup& env) {
  static const std::vector<std::string> names = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                 "MASTER_PORT"};
  std::string set, missing;
  for (const std::string& n : names) {
    std::string& list = env(n) ? set : missing;
    list += (list.empty() ? "" : ", ") + n;
  }
  LT_CHECK(missing.empty(), "a torchrun-style launch sets ", set, " but not ", missing,
           ": set all five (torchrun --no-python does) or none");
  World w;
  w.launcher = Launcher::Torchrun;
  const std::string how = "torchrun";
  w.size = required_int(env, "WORLD_SIZE", 1, how);
  w.rank = required_int(env, "RANK", 0, how);
  w.local_rank = required_int(env, "LOCAL_RANK", 0, how);
  if (env("LOCAL_WORLD_SIZE")) w.local_size = required_int(env, "LOCAL_WORLD_SIZE", 1, how);
  w.master_addr = *env("MASTER_ADDR");
  w.master_port = required_int(env, "MASTER_PORT", 1, how);
  LT_CHECK(w.master_port <= 65535, "environment variable MASTER_PORT=", w.master_port,
           " is not a TCP port (1..65535)");
  LT_CHECK(w.rank < w.size, "environment variable RANK=", w.rank,
           " is not below WORLD_SIZE=", w.size);
  return w;
}

}  // namespace

int ranks_on_this_host(const World& world) {
  return world.local_size > 0 ? std::min(world.local_size, world.size) : world.size;
}

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::Mpi:
      return "mpi";
    case Launcher::Torchrun:
      return "torchrun";
    case Launcher::None:
      break;
  }
  return "none";
}

EnvironmentLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

World world_from_environment(const EnvironmentLookup& env) {
  // mpirun and srun are recognized first: a torchrun-style variable left
  // in an MPI job's environment must not turn it into a torchrun job.
  // (Slurm's own SLURM_PROCID is set in any job step, MPI or not; srun
  // --mpi=pmix adds PMIX_RANK.)
  if (env("OMPI_COMM_WORLD_SIZE") || env("PMIX_RANK") || env("PMI_SIZE")) return mpi_world(env);
  for (const char* n : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"})
    if (env(n)) return torchrun_world(env);
  return World{};
}

void check_batch_divides(int64_t batch_size, int64_t grad_accum, const World& world,
                         const std::string& set_at) {
  if (!world.distributed()) return;
  LT_CHECK(batch_size % world.size == 0, set_at, "train.batch_size ", batch_size,
           " is the global batch and must divide by the world size ", world.size,
           " (each rank reads batch_size / world size sequences)");
  const int64_t rows = batch_size / std::max<int64_t>(grad_accum, 1);
  LT_CHECK(rows % world.size == 0, set_at, "train.batch_size ", batch_size, " / train.grad_accum ",
           grad_accum, " = ", rows,
           " sequences per micro-batch, which must divide by the world size ", world.size);
}

std::string describe_data_parallel(int64_t batch_size, int64_t grad_accum, const World& world,
                                   bool over_nccl) {
  const int64_t accum = std::max<int64_t>(grad_accum, 1);
  const int64_t rows = batch_size / accum;  // a micro-batch, all ranks
  return fmt::format(
      "dist: {} ranks, data parallel: each rank runs {} of train.batch_size {} sequences a "
      "step{}, and the ranks sum their gradients over {} before each update",
      world.size, batch_size / world.size, batch_size,
      accum > 1 ? fmt::format(" ({} of each micro-batch of {}, train.grad_accum {})",
                              rows / world.size, rows, accum)
                : std::string(),
      over_nccl ? "NCCL" : "MPI");
}

}  // namespace lt::dist
