#pragma once
// ZeRO-1's optimizer states saved per shard (docs/distributed.md): each
// rank writes its own pieces' AdamW states to one file of the checkpoint,
// optimizer-shard-<r>-of-<N>.safetensors, and the checkpoint's
// optimizer.safetensors records the world size N ("zero.world_size") and
// the step. A resume, on any number of ranks, with or without ZeRO,
// assembles the whole model's states from the N files
// (whole_state_from_shards), or a ZeRO-1 rank reads only the parts of
// them that it keeps (ZeroShardFiles): re-sharding.
//
// A shard file, per piece of a parameter `name` (exec/zero_shards.h):
//   <name>.exp_avg, <name>.exp_avg_sq   f32 [length]
//     or with adamw8bit, for a parameter it quantizes (optim/adamw8bit.h),
//   <name>.{exp_avg,sqrt_exp_avg_sq}.codes   u8 [length]
//   <name>.{exp_avg,sqrt_exp_avg_sq}.scales  f32 [its blocks]
//   <name>.step                         i64: the parameter's AdamW step
//   <name>.begin                        i64: the piece's first element
// and "zero.rank", "zero.world_size", "step" (i64 scalars), with adamw8bit
// "zero.block_size".
#include <filesystem>
#include <memory>
#include <string>

#include "exec/zero_optimizer.h"

namespace lt::exec {

inline constexpr const char* kZeroWorldSizeKey = "zero.world_size";
// adamw8bit: the states' block size (each piece starts on a block).
inline constexpr const char* kZeroBlockSizeKey = "zero.block_size";

std::string zero_shard_file_name(int rank, int world);

// This rank's file.
void write_zero_shard(const std::filesystem::path& path, const ZeroOptimizer& optimizer);

// The `world` shard files in `dir`, read in parts: opening reads each
// file's header and its scalars (the pieces' first elements and steps);
// source() then reads, of each file, only the bytes of the pieces that
// overlap the units asked for, so a rank resuming with ZeRO-1 reads about
// 1/N of the states whatever the world size that wrote them (re-sharding).
// Throws naming the file that is missing or does not fit `params`, or the
// part of a state no shard covers.
class ZeroShardFiles {
 public:
  ZeroShardFiles(const std::filesystem::path& dir, const nn::NamedParameters& params,
                 int64_t world);
  ~ZeroShardFiles();
  ZeroShardFiles(const ZeroShardFiles&) = delete;
  ZeroShardFiles& operator=(const ZeroShardFiles&) = delete;
  // For ZeroOptimizer::load_state_parts; lives no longer than this.
  ZeroOptimizer::StateSource source() const;
  // Whether parameter i's states are AdamW8bit's (codes and scales).
  bool quantized(size_t i) const;
  // adamw8bit: the states' block size; else 0.
  int64_t block_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The whole model's states, as one AdamW names them (optim/adamw.h), from
// the `world` shard files in `dir` (all of every file). Throws as
// ZeroShardFiles does.
optim::NamedTensors whole_state_from_shards(const std::filesystem::path& dir,
                                            const nn::NamedParameters& params, int64_t world);

}  // namespace lt::exec
