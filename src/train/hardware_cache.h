#pragma once
// Note [Profile by default]
// The planner and exec.mode auto price a run with the hardware profile's
// stage times. Without a measured profile they fall back to the FLOP model
// at the profile's GEMM rate, which on the H200 predicts a 3B step about
// 25% short (bench/RESULTS.md): a user who never ran `lazytrain profile`
// got plans priced for a GPU that does not exist. So a GPU run that needs
// a prediction (exec.mode auto, exec.schedule auto) and names no
// exec.hardware measures this machine and the model's stages once (what
// `lazytrain profile --model` measures; tens of seconds) and keeps the
// result in a cache folder, keyed by the machine (the GPU's name, the CUDA
// driver, the host's CPU, threads and memory: machine_identity), the
// model's shape and the sequence length; later runs read it, and a run on
// another machine, driver or host measures its own. `exec.hardware: defaults` keeps
// the built-in figures (the FLOP model), a path names a profile.
//
// The cache folder: $LT_CACHE_DIR, else $XDG_CACHE_HOME/lazytrain, else
// $HOME/.cache/lazytrain. A cached file that cannot be read, or is of
// another model, is measured again (with a note); a folder that cannot be
// written gives a note and the measured profile in a temporary file.
#include <functional>
#include <string>
#include <vector>

#include "exec/memory_budget.h"
#include "models/config.h"
#include "plan/hardware.h"

namespace lt::train {

std::string hardware_cache_dir();

// What else than the GPU's name a profile depends on: `driver` (e.g.
// "driver 13000") and this host's CPU model, hardware threads and memory,
// which set the CPU optimizer's and the copies' rates.
std::string machine_identity(const std::string& device_name, const std::string& driver);

// machine_identity of CUDA device `index`: its name and this driver
// (a build without CUDA: "no cuda"). What measured profiles and the fusion
// compiler's chain choices (autograd/chain_choice.h) are kept by.
std::string gpu_machine_identity(int index);

// The cached profile's file name for this machine, model shape and seq_len.
// `device_name`: the GPU's name, or machine_identity's whole string (the
// file name keeps what comes before its first '|').
std::string profile_cache_name(const std::string& device_name, const models::ModelConfig& model,
                               int64_t seq_len);

struct CachedProfile {
  std::string path;
  bool measured_now = false;
  double measure_seconds = 0;
  std::vector<std::string> notes;  // what was measured again or not written, and why
};

// The cached profile's path for this device, model and seq_len when `dir`
// holds a usable one, else "" (nothing is measured). A run with a fixed
// exec.mode prices its plan line with it when a run before measured one.
std::string cached_profile(const std::string& dir, const std::string& device_name,
                           const models::ModelConfig& model, int64_t seq_len);

// The profile for this device, model and seq_len in `dir`: read when a
// valid one is there, else measured with `measure` (which must return a
// profile with this model's stage times at seq_len) and written atomically.
CachedProfile ensure_profile(const std::string& dir, const std::string& device_name,
                             const models::ModelConfig& model, int64_t seq_len,
                             const std::function<plan::HardwareProfile()>& measure);

// Note [The run's CPU update rate]: after a streaming run priced with the
// cached profile at `path`, keeps what its CPU updates measured
// (`measured_params_per_s`, the median over its steps) over what the plan
// priced without the profile's in-run scale (`priced_params_per_s` /
// `scale_used`) as that optimizer's in-run scale (HardwareProfile::
// cpu_adam_in_run_scale), written atomically: the next plan of this model
// on this machine prices the updates at the rate this run measured, or,
// where an earlier run kept one, at the mean of that scale and this run's.
// A change under 2% is not written. Returns the line the run prints; a
// profile that cannot be read or written gives a note, never an error (the
// run's work is done by then).
std::string keep_cpu_update_rate(const std::string& path, exec::OptimizerStates optimizer,
                                 double measured_params_per_s, double priced_params_per_s,
                                 double scale_used);

}  // namespace lt::train
