#pragma once
// The main job: `lazytrain train`. Builds the model, data, optimizer and
// executor from a TrainConfig, runs the steps, writes metrics.jsonl and
// checkpoints, and resumes exactly from one.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "train/config.h"

namespace lt::train {

struct TrainRunOptions {
  std::string resume;         // "", "latest" or a checkpoint folder
  bool resuming = false;      // --resume was given (then an empty resume is an error)
  bool sample_at_end = true;  // print a greedy sample from the trained model
  // The config file the run was read from ("" for the embedded default or a
  // resume on the checkpoint's own): a run refuses to rewrite it as out.dir's
  // config.yaml unless a run wrote it (Note [out.dir's config.yaml]).
  std::string config_file;
  // Test hook: the CPU stand-in's gradient slabs and upload copies are
  // counted apart from host memory, as a GPU's pinned memory is
  // (exec::StandInOptions::separate_host_memory), so that
  // setup_host_peak_bytes counts what it would on a GPU.
  bool stand_in_pinned_apart = false;
  // Test hook: the free bytes of out.dir's file system, in place of
  // std::filesystem::space, for the message of a save short of room (Note
  // [A save short of room], train/checkpoint.h); null: the file system's.
  std::function<int64_t(const std::filesystem::path&)> free_disk_bytes = nullptr;
};

struct TrainRunResult {
  int64_t steps_done = 0;       // optimizer steps completed in total (after resume)
  double final_loss = 0;        // loss of the last step that had a trained token
  bool interrupted = false;     // SIGINT/SIGTERM: saved and stopped early
  std::string last_checkpoint;  // saved, or else resumed from; empty: none
  bool saved = false;           // whether this run saved a checkpoint
  // Host memory (cpu_allocator) that setting up the run held at its peak
  // beyond what the process held before: loading the weights, building the
  // optimizer and the executor, restoring a checkpoint.
  int64_t setup_host_peak_bytes = 0;
};

TrainRunResult run_training(const TrainConfig& config, const TrainRunOptions& options);

}  // namespace lt::train
