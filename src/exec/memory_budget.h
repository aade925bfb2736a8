#pragma once
// bytes_needed: the one function that counts the bytes a streaming step
// needs in each memory space (GPU, host, disk) for a model, a batch shape
// and a Schedule (DESIGN.md, "Key interfaces"). The planner calls it to
// decide, the executor to allocate, and `lazytrain plan` prints it.
//
// Boundary activations and GPU compute are bf16 (2 bytes); the master
// weights and the optimizer live on the host in fp32.
#include <cstdint>
#include <string>
#include <vector>

#include "exec/schedule.h"
#include "models/config.h"

namespace lt::exec {

enum class OptimizerStates {
  Fp32,      // AdamW: m and v in fp32, 8 bytes per parameter
  EightBit,  // adamw8bit: 1-byte codes for m and v + an fp32 scale per 2048
};

struct TrainSizes {
  int64_t batch_size = 1;  // sequences per optimizer step
  int64_t seq_len = 1;     // tokens per sequence
  OptimizerStates optimizer = OptimizerStates::Fp32;
};

enum class MemorySpace { Gpu, Host, Disk };
const char* memory_space_name(MemorySpace space);  // "gpu", "host", "disk"

struct MemoryItem {
  MemorySpace space;
  std::string what;  // e.g. "weight double buffer (bf16)"
  int64_t bytes = 0;
};

struct MemoryBudget {
  std::vector<MemoryItem> items;
  int64_t bytes(MemorySpace space) const;  // the sum of that space's items
  void add(MemorySpace space, std::string what, int64_t bytes);
};

// Parameters of one transformer block, and of what is not in a block
// (embeddings, final norm, untied lm_head), derived from num_parameters().
int64_t block_parameters(const models::ModelConfig& config);
int64_t edge_parameters(const models::ModelConfig& config);

// Bytes of one boundary activation for the whole batch: B * T * hidden * 2.
int64_t boundary_bytes(const models::ModelConfig& config, const TrainSizes& sizes);

// Everything that does not depend on where boundaries go: weights, their
// buffers, optimizer state, gradient buffers and the working sets of one
// micro-batch of `micro_batch` sequences (0: the whole batch).
MemoryBudget fixed_bytes(const models::ModelConfig& config, const TrainSizes& sizes,
                         int64_t micro_batch);

// The peak bytes per space of a step that runs `schedule`: fixed_bytes plus
// the kept boundaries, the recompute buffer of the longest recomputed run,
// and the staging for offloaded boundaries. The schedule must have
// num_hidden_layers + 1 boundaries.
MemoryBudget bytes_needed(const models::ModelConfig& config, const TrainSizes& sizes,
                          const Schedule& schedule);

// Longest run of consecutive recomputed boundaries in the schedule (0 if
// none). Backward rematerializes such a run all at once.
int longest_recompute_run(const Schedule& schedule);

}  // namespace lt::exec
