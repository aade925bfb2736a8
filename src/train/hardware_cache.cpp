#include "train/hardware_cache.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

#include "core/error.h"
#include "io/atomic_file.h"
#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#endif
#include "plan/stage_times.h"

namespace lt::train {

namespace {

namespace fs = std::filesystem;

// Bumped when what a profile measures changes, so older files are measured
// again. 2: stage times at three chunk sizes (4, 8 and 32 at seq 1024,
// plan/profile.h) where format 1 had two; a file of format 1 still reads,
// but its line through 4 and 8 would price chunks of 32 without their GEMM
// efficiency and keep the planner at chunks of 8, so it is measured again
// (under another name) rather than silently kept. 3: the backward use no
// longer runs the block's last GEMM (StageContext::output_unread), so a
// format-2 block_backward over-prices it by that GEMM. 4: the device's own
// update rates (gpu_adam(8bit)_gparams_per_s), which a format-3 file lacks
// and would take from the defaults of another GPU. 5: the chunk sizes timed
// in turns (Note [Sizes timed in turns], plan/profile_timing.h), where a
// format-4 file timed the largest last, on a hotter GPU, and priced it
// 1-4% slow.
constexpr int kCacheFormat = 5;

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ULL;
  return h;
}

std::string file_safe(const std::string& name) {
  std::string out;
  for (char ch : name) {
    const bool keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
    out += keep ? ch : '_';
  }
  return out.empty() ? "device" : out;
}

// Why the cached file cannot serve this run, or "" when it can.
std::string unusable(const fs::path& path, const models::ModelConfig& model, int64_t seq_len) {
  try {
    const plan::HardwareProfile hw = plan::HardwareProfile::from_file(path.string());
    if (!hw.stage_times) return "it has no stage_times";
    hw.stage_times->check_model(model);
    if (hw.stage_times->seq_len != seq_len)
      return fmt::format("its stage_times are for seq_len {}", hw.stage_times->seq_len);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

std::string hardware_cache_dir() {
  if (const char* dir = std::getenv("LT_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return (fs::path(xdg) / "lazytrain").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "lazytrain").string();
  return (fs::temp_directory_path() / "lazytrain-cache").string();
}

std::string gpu_machine_identity(int index) {
#ifdef LT_WITH_CUDA
  return machine_identity(cuda::device_name(index),
                          fmt::format("driver {}", cuda::driver_version()));
#else
  (void)index;
  return "no cuda";
#endif
}

std::string machine_identity(const std::string& device_name, const std::string& driver) {
  std::string cpu = "unknown cpu";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    if (const size_t colon = line.find(':'); colon != std::string::npos)
      cpu = line.substr(line.find_first_not_of(' ', colon + 1));
    break;
  }
  const double memory_gib =
      static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE) / (1 << 30);
  return fmt::format("{} | {} | host {}, {} threads, {:.0f} GiB", device_name, driver, cpu,
                     std::thread::hardware_concurrency(), memory_gib);
}

std::string profile_cache_name(const std::string& device_name, const models::ModelConfig& model,
                               int64_t seq_len) {
  const plan::StageTimes shape = plan::StageTimes::for_model(model, seq_len);
  const std::string key =
      fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", kCacheFormat, device_name, shape.model_type,
                  shape.hidden_size, shape.intermediate_size, shape.num_attention_heads,
                  shape.num_key_value_heads, shape.head_dim, shape.vocab_size,
                  model.num_hidden_layers, seq_len);
  const std::string gpu = device_name.substr(0, device_name.find(" |"));
  return fmt::format("hardware-{}-{}-seq{}-{:016x}.yaml", file_safe(gpu),
                     file_safe(shape.model_type), seq_len, fnv1a(key));
}

std::string cached_profile(const std::string& dir, const std::string& device_name,
                           const models::ModelConfig& model, int64_t seq_len) {
  const fs::path path = fs::path(dir) / profile_cache_name(device_name, model, seq_len);
  std::error_code ec;
  if (!fs::exists(path, ec) || !unusable(path, model, seq_len).empty()) return "";
  return path.string();
}

CachedProfile ensure_profile(const std::string& dir, const std::string& device_name,
                             const models::ModelConfig& model, int64_t seq_len,
                             const std::function<plan::HardwareProfile()>& measure) {
  CachedProfile out;
  const fs::path path = fs::path(dir) / profile_cache_name(device_name, model, seq_len);
  std::error_code ec;
  if (fs::exists(path, ec)) {
    const std::string why = unusable(path, model, seq_len);
    if (why.empty()) {
      out.path = path.string();
      return out;
    }
    out.notes.push_back(fmt::format("the cached profile {} cannot be used ({}): measuring again",
                                    path.string(), why));
  }
  const auto start = std::chrono::steady_clock::now();
  const plan::HardwareProfile measured = measure();
  out.measure_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.measured_now = true;
  LT_CHECK(measured.stage_times && measured.stage_times->seq_len == seq_len,
           "hardware profile: the measurement for the cache has no stage times at seq_len ",
           seq_len);
  const std::string text = measured.to_yaml();
  // What is kept must read back, or every later run would measure again.
  plan::HardwareProfile::from_yaml_text(text, "the measured hardware profile");
  try {
    fs::create_directories(dir);
    io::write_file_atomic(path, text);
    out.path = path.string();
    return out;
  } catch (const std::exception& e) {
    const fs::path fallback = fs::temp_directory_path() / path.filename();
    out.notes.push_back(fmt::format(
        "could not keep the measured profile in {} ({}): this run uses {}, and the next run "
        "measures again (set LT_CACHE_DIR to a writable folder)",
        dir, e.what(), fallback.string()));
    io::write_file_atomic(fallback, text);
    out.path = fallback.string();
    return out;
  }
}

std::string keep_cpu_update_rate(const std::string& path, exec::OptimizerStates optimizer,
                                 double measured_params_per_s, double priced_params_per_s,
                                 double scale_used) {
  if (measured_params_per_s <= 0 || priced_params_per_s <= 0 || scale_used <= 0) return "";
  const double scale = measured_params_per_s * scale_used / priced_params_per_s;
  const std::string rates =
      fmt::format("the CPU updated {:.2f} G params/s where the plan priced {:.2f}",
                  measured_params_per_s / 1e9, priced_params_per_s / 1e9);
  if (std::abs(scale / scale_used - 1) < 0.02) return "hardware: " + rates + " (as planned)";
  try {
    plan::HardwareProfile hw = plan::HardwareProfile::from_file(path);
    const bool fp32 = optimizer == exec::OptimizerStates::Fp32;
    std::optional<double>& kept = fp32 ? hw.cpu_adam_in_run_scale : hw.cpu_adam8bit_in_run_scale;
    // One run's rate moves 3-4% from the one before on the same machine
    // (the H100's 3B runs of 2026-12-06: 0.90, 0.93, 0.87, 0.93): each run
    // weighs half against what the runs before it kept, so one run's luck
    // does not decide the next plan alone.
    const std::optional<double> kept_before = kept;
    const double next = kept ? (*kept + scale) / 2 : scale;
    kept = next;
    io::write_file_atomic(path, hw.to_yaml());
    return fmt::format(
        "hardware: {}; the next plan of this model prices them {:.3f}x the "
        "profile's rate ({} in {}{})",
        rates, next, fp32 ? "cpu_adam_in_run_scale" : "cpu_adam8bit_in_run_scale", path,
        kept_before ? fmt::format(", the mean of this run's {:.3f}x and the {:.3f}x kept before",
                                  scale, *kept_before)
                    : "");
  } catch (const std::exception& e) {
    return fmt::format("hardware: {}; not kept for the next plan ({})", rates, e.what());
  }
}

}  // namespace lt::train
