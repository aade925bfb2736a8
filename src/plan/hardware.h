#pragma once
// HardwareProfile: what the planner knows about the machine it plans for,
// read from a YAML file (written by `lazytrain profile` or by hand).
//
// Units: sizes in GB = 10^9 bytes, bandwidths in GB/s = 10^9 bytes/s (the
// units docs/gpu-machine.md reports), compute in TFLOP/s. Every key is
// optional; a key left out takes the default below, which is the H200
// machine of docs/gpu-machine.md (measured 2026-11-29) except where noted.
// Unknown keys and values of the wrong type are refused, naming the file
// and the key.
#include <optional>
#include <string>

#include "plan/stage_times.h"

namespace lt::plan {

struct HardwareProfile {
  double gpu_memory_gb = 150.0;  // H200: 139.8 GiB usable
  double host_memory_gb = 128.0;
  double disk_gb = 64.0;  // free space under disk_path given to activations
  std::string disk_path = "/tmp";
  double h2d_gbps = 53.3;  // pinned, one direction alone
  double d2h_gbps = 52.1;
  double bidir_gbps = 41.0;  // each direction while both run at once
  // Not measured on the H200 machine (a virtio disk); conservative guesses.
  double disk_read_gbps = 1.0;
  double disk_write_gbps = 1.0;
  double host_mem_gbps = 87.0;           // triad, 16 threads; shared by copies and the optimizer
  double gpu_tflops = 760.0;             // sustained bf16 GEMM (cuBLASLt 8192^3 median)
  double cpu_adam_gparams_per_s = 4.56;  // lazytrain fp32 AdamW, 16 threads
  // lazytrain adamw8bit, 16 threads (bench/RESULTS.md, 2026-11-30).
  double cpu_adam8bit_gparams_per_s = 2.88;
  // The device's own updates (resident, ZenFlow's top-k, the stages a
  // streaming plan keeps on the GPU): AdamW and adamw8bit over one large
  // tensor with bf16 gradients, the bf16 copy written (`lazytrain profile`
  // measures them on a GPU). Neither is a pass at the memory's rate: the
  // 8-bit update is bound by its instructions (dequantize, update, requantize
  // bit for bit as the CPU does), and pricing both at one bandwidth put the
  // 7B's 8-bit update at 0.076 s where it took 0.120 (before session 36's
  // kernel; 0.075 s now). Defaults: the H200's profile (bench/RESULTS.md,
  // session 36; an H100 measured 77.8 and 122.1).
  double gpu_adam_gparams_per_s = 99.5;
  double gpu_adam8bit_gparams_per_s = 124.5;
  // The same two rates beside host<->device copies running flat out both
  // ways, as the streaming executor's update runs beside its weight and
  // activation copies (`lazytrain profile` measures them on a GPU, beside
  // copies running both ways at once at the bidirectional rate). On the
  // H200 that traffic costs the update ~25% (bench/RESULTS.md, "the
  // optimizer beside the copies"), more than a share of host_mem_gbps
  // accounts for. The cost model charges a plan the share of that cost its
  // forward's copies make of 2 x bidir_gbps: taken whole as a worst case, it
  // priced the 3B's update at 3.0 G parameters/s where the run made 4.6-5.0
  // beside its forward's uploads (issue 27, session 22), and kept the
  // planner off chunks of 32. Absent: the cost model estimates them from the
  // rates above and the host memory bandwidth the plan's copies leave.
  std::optional<double> cpu_adam_beside_copies_gparams_per_s;
  std::optional<double> cpu_adam8bit_beside_copies_gparams_per_s;
  // What a streaming run of this model measured its CPU updates at, over
  // the rate the cost model priced them at for that run's plan (for each
  // optimizer): the cost model multiplies its streaming rate by it. On the
  // H200 a run updated ~10% slower than the profile's rates priced (issue
  // 27: the compute and copy threads share the cores the optimizer's
  // threads were measured alone on), so a plan kept a fused tail too long
  // for the CPU behind it. `lazytrain train` writes it into the cached
  // profile it planned with (train/hardware_cache.h). Absent: 1.
  std::optional<double> cpu_adam_in_run_scale;
  std::optional<double> cpu_adam8bit_in_run_scale;
  // Budgets, not measurements: caps on the bytes that kept boundary
  // activations may use in each space. Absent: whatever the rest of the
  // memory budget leaves (a LazyTrain-style run fixes them by hand).
  std::optional<double> gpu_activation_gb;
  std::optional<double> host_activation_gb;
  // The links data parallel's collectives cross (`plan --gpus N`,
  // plan/data_parallel.h), GB/s per GPU as NCCL's tests report bus
  // bandwidth: between the GPUs of a node, and between nodes. Absent: that
  // file's defaults.
  std::optional<double> link_gbps;
  std::optional<double> node_link_gbps;
  // Measured per-stage times for one model and sequence length (written by
  // `lazytrain profile --model`; plan/stage_times.h). Absent: the FLOP
  // model at gpu_tflops.
  std::optional<StageTimes> stage_times;

  // Throws lt::Error naming `source` and the key.
  static HardwareProfile from_yaml_text(const std::string& text, const std::string& source);
  static HardwareProfile from_file(const std::string& path);
  std::string to_yaml() const;  // every key, with a comment line on units
};

inline constexpr double kBytesPerGB = 1e9;

}  // namespace lt::plan
