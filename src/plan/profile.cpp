#include "plan/profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "exec/memory_budget.h"
#include "io/disk_offload.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "plan/planner.h"
#include "plan/profile_timing.h"

#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#include "ops/matmul.h"
#endif

namespace lt::plan {

namespace {

using timing::median_seconds;
using timing::sustained_seconds;

// memcpy over every pool thread; read + write bytes counted (as the figures
// of docs/gpu-machine.md are).
double host_memory_gbps(const ProfileOptions& o) {
  const int64_t n = o.memory_bytes;
  std::vector<char> a(n, 1), b(n, 0);
  auto copy = [&] {
    parallel_for(0, n, int64_t{1} << 22, [&](int64_t lo, int64_t hi) {
      std::memcpy(b.data() + lo, a.data() + lo, hi - lo);
    });
  };
  copy();  // touch the pages first
  return 2.0 * n / 1e9 / median_seconds(o.repeats, copy);
}

void disk_gbps(const ProfileOptions& o, double& write_gbps, double& read_gbps) {
  const std::string path =
      (std::filesystem::path(o.disk_path) / ("lazytrain-profile-" + std::to_string(::getpid())))
          .string();
  io::DiskOffloadFile::Options fo;
  fo.queue_depth = 16;
  fo.chunk_bytes = 4 << 20;
  io::DiskOffloadFile file(path, fo);
  std::vector<char> data(o.disk_bytes, 7);
  const io::DiskRegion region = file.allocate(o.disk_bytes);
  write_gbps =
      o.disk_bytes / 1e9 / median_seconds(o.repeats, [&] { file.write(region, data.data()); });
  read_gbps =
      o.disk_bytes / 1e9 / median_seconds(o.repeats, [&] { file.read(region, data.data()); });
}

// One step of `Optimizer` (AdamW or AdamW8bit, default options) over one
// tensor of `params` (optimizer_gparams_per_s).
template <typename Optimizer>
double adam_gparams_per_s(int64_t params, int repeats, bool gpu_streaming) {
  Tensor p = Tensor::zeros({params}, DType::F32);
  p.set_requires_grad(true);
  p.set_grad(Tensor::full({params}, 1e-3, gpu_streaming ? DType::BF16 : DType::F32));
  Optimizer adam({{"w", p}}, optim::AdamWOptions{});
  if (gpu_streaming) adam.set_bf16_shadow(0, Tensor::empty({params}, DType::BF16));
  adam.step(1e-4);  // allocates nothing more, but warms the pages
  return params / 1e9 / median_seconds(repeats, [&] { adam.step(1e-4); });
}

#ifdef LT_WITH_CUDA
// The device's own update over one tensor of `params` on cuda:0, as the
// resident executor runs it (bf16 gradients, the bf16 copy written), at the
// sustained clock. The gradients are random: equal values would make every
// code-table lookup of the 8-bit update hit one shared-memory bank entry.
template <typename Optimizer>
double device_adam_gparams_per_s(int64_t params, int repeats) {
  const Device gpu = Device::cuda(0);
  Generator gen(3);
  Tensor p = Tensor::zeros({params}, DType::F32, gpu);
  p.set_requires_grad(true);
  p.set_grad(Tensor::randn({params}, gen, DType::F32, 1e-3).to(gpu, DType::BF16));
  Optimizer adam({{"w", p}}, optim::AdamWOptions{});
  adam.set_bf16_shadow(0, Tensor::empty({params}, DType::BF16, gpu));
  const auto step = [&] { adam.step(1e-4); };
  step();  // the states' allocation
  return params / 1e9 /
         sustained_seconds(
             repeats, step, [&] { current_stream(gpu).synchronize(); }, [] {});
}
#endif

}  // namespace

double optimizer_gparams_per_s(bool eight_bit, int64_t params, int repeats, bool gpu_streaming) {
  return eight_bit ? adam_gparams_per_s<optim::AdamW8bit>(params, repeats, gpu_streaming)
                   : adam_gparams_per_s<optim::AdamW>(params, repeats, gpu_streaming);
}

Device stage_timing_device() {
#ifdef LT_WITH_CUDA
  if (cuda::device_count() > 0) return Device::cuda(0);
#endif
  return Device::cpu();
}

ProfileReport measure_profile(const ProfileOptions& o) {
  LT_CHECK(o.repeats >= 1 && o.disk_bytes > 0 && o.memory_bytes > 0 && o.adam_params > 0,
           "profile: sizes and repeats must be positive");
  ProfileReport r;
  HardwareProfile& p = r.profile;
  p.disk_path = o.disk_path;
  p.host_memory_gb =
      static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE) / kBytesPerGB;
  p.disk_gb = std::filesystem::space(o.disk_path).available / kBytesPerGB;
  r.measured = {"host_memory_gb", "disk_gb"};
  p.host_mem_gbps = host_memory_gbps(o);
  disk_gbps(o, p.disk_write_gbps, p.disk_read_gbps);
  const bool gpu_streaming = stage_timing_device().is_cuda();
  p.cpu_adam_gparams_per_s =
      optimizer_gparams_per_s(false, o.adam_params, o.repeats, gpu_streaming);
  p.cpu_adam8bit_gparams_per_s =
      optimizer_gparams_per_s(true, o.adam_params, o.repeats, gpu_streaming);
  r.measured.insert(r.measured.end(), {"host_mem_gbps", "disk_write_gbps", "disk_read_gbps",
                                       "cpu_adam_gparams_per_s", "cpu_adam8bit_gparams_per_s"});
#ifdef LT_WITH_CUDA
  if (cuda::device_count() > 0) {
    p.gpu_memory_gb = cuda::device_total_memory(0) / kBytesPerGB;
    const CopyRates c = measure_copy_rates(0, int64_t{1} << 30, o.repeats);
    p.h2d_gbps = c.h2d_gbps;
    p.d2h_gbps = c.d2h_gbps;
    p.bidir_gbps = c.bidir_gbps;
    // A square bf16 GEMM of 8192 (as docs/gpu-machine.md reports it).
    constexpr int64_t n = 8192;
    const Device gpu = Device::cuda(0);
    Tensor a = Tensor::full({n, n}, 0.01, DType::BF16, gpu);
    Tensor b = Tensor::full({n, n}, 0.01, DType::BF16, gpu);
    Tensor product;
    const auto gemm = [&] { product = ops::matmul(a, b); };
    gemm();  // warm-up: the heuristic's choice, the workspace
    p.gpu_tflops = 2.0 * n * n * n / 1e12 /
                   sustained_seconds(
                       o.repeats + 2, gemm, [&] { current_stream(gpu).synchronize(); }, [] {});
    {
      BackgroundCopies traffic(0, int64_t{256} << 20);
      p.cpu_adam_beside_copies_gparams_per_s =
          optimizer_gparams_per_s(false, o.adam_params, o.repeats, true);
      p.cpu_adam8bit_beside_copies_gparams_per_s =
          optimizer_gparams_per_s(true, o.adam_params, o.repeats, true);
      traffic.gbps();  // throws if the copies stopped on an error
    }
    p.gpu_adam_gparams_per_s = device_adam_gparams_per_s<optim::AdamW>(o.adam_params, o.repeats);
    p.gpu_adam8bit_gparams_per_s =
        device_adam_gparams_per_s<optim::AdamW8bit>(o.adam_params, o.repeats);
    r.measured.insert(r.measured.end(), {"gpu_memory_gb", "h2d_gbps", "d2h_gbps", "bidir_gbps",
                                         "gpu_tflops", "cpu_adam_beside_copies_gparams_per_s",
                                         "cpu_adam8bit_beside_copies_gparams_per_s",
                                         "gpu_adam_gparams_per_s", "gpu_adam8bit_gparams_per_s"});
  } else {
    r.notes.push_back("no GPU visible: the GPU keys keep their defaults");
  }
#else
  r.notes.push_back("built without CUDA: the GPU keys keep their defaults (the H200 machine's)");
#endif
  return r;
}

std::string profile_yaml(const ProfileReport& r) {
  const std::string yaml = r.profile.to_yaml();
  std::string out;
  bool any_default = false;
  for (size_t at = 0; at < yaml.size();) {
    const size_t end = std::min(yaml.find('\n', at), yaml.size());
    std::string line = yaml.substr(at, end - at);
    at = end + 1;
    // Top-level keys only: disk_path is the option given, stage_times says
    // its own device.
    const size_t colon = line.find(':');
    const std::string key = colon == std::string::npos ? "" : line.substr(0, colon);
    const bool figure = !key.empty() && key[0] != '#' && key[0] != ' ' && key != "disk_path" &&
                        key != "stage_times";
    if (figure && std::find(r.measured.begin(), r.measured.end(), key) == r.measured.end()) {
      line += "  # default, not measured here";
      any_default = true;
    }
    out += line + "\n";
  }
  if (any_default) {
    // Below to_yaml's first line, its header comment, which says what the file is.
    const size_t first = out.find('\n') + 1;
    out.insert(first,
               "# keys marked `default` are the documented defaults (the H200 machine's), not "
               "this machine's: it has no GPU to measure; run `lazytrain profile` where "
               "train.device cuda runs for a GPU's own\n");
  }
  return out;
}

ProfileReport measure_profile_for_model(const ProfileOptions& options,
                                        const models::ModelConfig& config, int64_t seq_len,
                                        std::vector<int64_t> batch_sizes) {
  ProfileReport r = measure_profile(options);
  const Device device = stage_timing_device();
  if (batch_sizes.empty()) batch_sizes = default_stage_batch_sizes(device, seq_len);
  r.profile.stage_times =
      measure_stage_times(config, seq_len, batch_sizes, device, options.repeats, &r.notes);
  r.measured.push_back("stage_times (" + device.str() + ", seq_len " + std::to_string(seq_len) +
                       ")");
  if (device.is_cpu())
    r.notes.push_back(
        "stage_times were timed on the CPU (f32): a step predicted from them is this CPU's "
        "compute, not a GPU's; time them where train.device cuda runs for a GPU's");
  const std::vector<int64_t>& timed = r.profile.stage_times->batch_sizes;
  const auto working = working_set_sizes(config, seq_len, timed, device);
  const int64_t bend = exec::loss_chunk_rows(config.vocab_size, !device.is_cpu());
  if (!working) {
    r.notes.push_back(fmt::format(
        "the working sets (stage_times.block_backward_bytes, head_step_bytes) were not "
        "written: batch sizes {} at seq_len {} lie on both sides of one loss chunk ({} tokens), "
        "where the head's working set bends; the planner estimates them instead",
        fmt::join(timed, " and "), seq_len, bend));
  } else if (working->first != timed.front() || working->second != timed.back()) {
    r.notes.push_back(fmt::format(
        "the working sets (stage_times.block_backward_bytes, head_step_bytes) are lines through "
        "batch sizes {} and {}, on one side of one loss chunk ({} tokens at seq_len {}): they "
        "over-estimate on the other side",
        working->first, working->second, bend, seq_len));
  }
  return r;
}

}  // namespace lt::plan
