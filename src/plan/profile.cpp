#include "plan/profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <limits>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/random.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "exec/memory_budget.h"
#include "io/disk_offload.h"
#include "models/causal_lm.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "plan/planner.h"
#include "plan/stage_times_fields.h"

#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#include "ops/matmul.h"
#endif

namespace lt::plan {

namespace {

using Clock = std::chrono::steady_clock;

template <typename Fn>
double median_seconds(int repeats, Fn&& fn) {
  std::vector<double> s;
  for (int k = 0; k < repeats; ++k) {
    const auto t0 = Clock::now();
    fn();
    s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

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

// A GPU's clock under sustained load is set by its power cap: on the H200
// a streaming training step draws 620-700 W and runs at 1.58-1.83 GHz,
// while short bursts run at 1.98 GHz (nvidia-smi beside
// bench/plan_vs_fixed.sh, 2026-11-30). Stage times taken from bursts came
// out 12% short of the run's. So on a GPU each figure is taken after
// kSustainSeconds of the same work queued back to back, and over batches of
// runs queued back to back (as the executor queues a stage's chunks), each
// batch lasting at least kMinBatchSeconds.
constexpr double kSustainSeconds = 0.5;
constexpr double kMinBatchSeconds = 0.1;
constexpr int kMaxRunsPerBatch = 1000;

// Seconds per `run` at the sustained clock; `finish` waits for the queued
// work and `reset` undoes what the runs leave behind (gradients).
template <typename Run, typename Finish, typename Reset>
double sustained_seconds(int repeats, Run&& run, Finish&& finish, Reset&& reset) {
  const auto batch_of = [&](int runs) {
    for (int k = 0; k < runs; ++k) run();
    finish();
    reset();
  };
  const double single = median_seconds(1, [&] { batch_of(1); });
  const int runs = static_cast<int>(std::clamp(std::ceil(kMinBatchSeconds / std::max(single, 1e-9)),
                                               1.0, static_cast<double>(kMaxRunsPerBatch)));
  const auto start = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - start).count() < kSustainSeconds)
    batch_of(runs);
  return median_seconds(repeats, [&] { batch_of(runs); }) / runs;
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

std::vector<int64_t> default_stage_batch_sizes(Device device, int64_t seq_len) {
  if (device.is_cpu()) return {1, 2};
  const int64_t chunk = min_chunk_sequences(seq_len);
  if (chunk == 1) return {1, 2, kMaxChunkGrowth};
  return {chunk / 2, chunk, kMaxChunkGrowth * chunk};
}

std::optional<std::pair<int64_t, int64_t>> working_set_sizes(
    const models::ModelConfig& config, int64_t seq_len, const std::vector<int64_t>& batch_sizes,
    Device device) {
  const int64_t bend = exec::loss_chunk_rows(config.vocab_size, !device.is_cpu());
  std::vector<int64_t> above, below;
  for (int64_t b : batch_sizes) {
    if (b * seq_len >= bend) above.push_back(b);
    if (b * seq_len <= bend) below.push_back(b);
  }
  for (const auto& side : {above, below})
    if (side.size() >= 2) return std::make_pair(side.front(), side.back());
  return std::nullopt;
}

namespace {

// Note [Cold inputs]: in a run, each chunk of a stage reads activations
// written long before (a boundary, a gradient from the next stage), so they
// come from device memory. Timed again and again on one input, a small
// chunk's input stays in the GPU's L2 (50 MB on the H200; a 3B block's
// input at chunks of 8 is 34 MB), and the profile priced chunks of 8 about
// 3% faster than runs made them, while chunks of 32 (134 MB, no such help)
// came out 1% slow (bench/RESULTS.md, sessions 27-28; issue 27). So the
// timed runs cycle through inputs that together hold kColdInputBytes, more
// than any GPU's L2. Measured on the H200 (session 31), the block's times
// per 64 sequences moved by under 0.5% (backward 50.9 ms at chunks of 8,
// 52.5 at 32), so L2 was not what priced chunks of 32 slow; the inputs stay
// cycled because a run's are.
constexpr int64_t kColdInputBytes = int64_t{256} << 20;
constexpr int kMaxColdInputCopies = 8;

int cold_input_copies(int64_t input_bytes) {
  return static_cast<int>(
      std::clamp<int64_t>((kColdInputBytes + input_bytes - 1) / std::max<int64_t>(input_bytes, 1),
                          1, kMaxColdInputCopies));
}

// Device bytes free for a measurement: what the driver reports free, and
// what the caching allocator keeps from earlier measurements (at most its
// high-water mark `peak_bytes`) beyond the `current_bytes` it hands out.
int64_t device_room_bytes([[maybe_unused]] Device device, [[maybe_unused]] int64_t peak_bytes,
                          [[maybe_unused]] int64_t current_bytes) {
#ifdef LT_WITH_CUDA
  if (device.is_cuda())
    return static_cast<int64_t>(cuda::device_free_memory(device.index)) + peak_bytes -
           current_bytes;
#endif
  return std::numeric_limits<int64_t>::max();  // the CPU: sizes there are small (CI)
}

}  // namespace

StageTimes measure_stage_times(const models::ModelConfig& config, int64_t seq_len,
                               std::vector<int64_t> batch_sizes, Device device, int repeats,
                               std::vector<std::string>* notes) {
  std::sort(batch_sizes.begin(), batch_sizes.end());
  LT_CHECK(batch_sizes.size() >= 2 && batch_sizes.front() > 0 &&
               std::adjacent_find(batch_sizes.begin(), batch_sizes.end()) == batch_sizes.end(),
           "profile: --batch-sizes needs two or more different sizes > 0");
  LT_CHECK(seq_len > 0 && repeats >= 1, "profile: --seq-len and --repeats must be > 0");
  // Every block has the same shape: one is timed.
  models::ModelConfig one = config;
  one.num_hidden_layers = 1;
  Generator gen(1);
  models::CausalLM model = models::CausalLM::random(one, gen);
  const DType dtype = device.is_cpu() ? DType::F32 : DType::BF16;
  if (!device.is_cpu()) model.to(device, dtype);
  const models::Stage& embed = *model.stages().at(0);
  const models::Stage& block = *model.stages().at(1);
  const models::Stage& head = *model.stages().at(2);
  const auto finish = [&] { current_stream(device).synchronize(); };
  const auto clear_grads = [&] {
    for (const auto& [name, p] : model.parameters()) p.set_grad(Tensor());
  };
  // The streaming executor's uses (exec/streaming_plan.h): a no-grad
  // forward, and for backward a forward under grad mode then its backward.
  // Gradients accumulate over a batch of runs, as over a stage's chunks.
  auto time = [&](auto&& run) {
    const auto once = [&] {
      run();
      finish();
      clear_grads();
    };
    once();  // warm-up: first-touch allocations, GEMM heuristics
    if (device.is_cpu()) return median_seconds(repeats, once);
    return sustained_seconds(repeats, run, finish, clear_grads);
  };
  // Device bytes a use holds at its peak beyond what was held before it:
  // the second of two runs, so that the parameters' .grad from the first
  // is there and added into, as a stage's later chunks add into it.
  Allocator& memory = default_allocator(device);
  auto working_set = [&](auto&& run) {
    run();
    finish();
    const int64_t before = memory.stats().current_bytes;
    memory.reset_peak();
    run();
    finish();
    const int64_t held = memory.stats().peak_bytes - before;
    clear_grads();
    return static_cast<double>(held);
  };
  // Per batch size, in kStageTimeCurves' order, and in kStageBytesFits'.
  std::vector<std::array<double, std::size(kStageTimeCurves)>> seconds;
  std::vector<std::array<double, std::size(kStageBytesFits)>> bytes;
  std::vector<int64_t> timed;  // the sizes measured, ascending
  int64_t high_water = 0;      // the allocator's highest peak so far
  for (int64_t batch : batch_sizes) {
    if (timed.size() >= 2) {
      // What this size would hold: its inputs (ids and targets, x and dy)
      // and the larger working set, on the line through the two sizes
      // before it (which over-estimates past the head's bend).
      const int64_t tokens = batch * seq_len;
      const double inputs =
          static_cast<double>(tokens) *
          (2 * sizeof(int64_t) + 2 * config.hidden_size * dtype_size(dtype)) *
          static_cast<double>(cold_input_copies(tokens * config.hidden_size *
                                                static_cast<int64_t>(dtype_size(dtype))));
      double working = 0;
      for (size_t k = 0; k < std::size(kStageBytesFits); ++k)
        working = std::max(
            working, fit_line(timed.end()[-2], bytes.end()[-2][k], timed.back(), bytes.back()[k])
                         .at(static_cast<double>(batch)));
      const int64_t need = static_cast<int64_t>(inputs + working);
      const int64_t room = device_room_bytes(device, high_water, memory.stats().current_bytes);
      if (need > room) {
        if (notes)
          notes->push_back(fmt::format(
              "stage_times: batch size {} was not timed: it would hold about {:.1f} GB on {}, "
              "and {:.1f} GB are free; the times above batch {} extrapolate its last segment",
              batch, need / 1e9, device.str(), room / 1e9, timed.back()));
        continue;
      }
    }
    timed.push_back(batch);
    std::vector<int64_t> id_values(static_cast<size_t>(batch * seq_len));
    for (auto& id : id_values)
      id = static_cast<int64_t>(gen.below(static_cast<uint64_t>(config.vocab_size)));
    const Tensor cpu_ids = Tensor::from_vector(id_values, {batch, seq_len});
    const Tensor ids = cpu_ids.to(device);
    const models::StageContext ctx = model.context(
        seq_len, models::shift_targets(cpu_ids).to(device), static_cast<double>(batch * seq_len));
    // Note [Cold inputs]: each timed run reads the next of several inputs.
    std::vector<Tensor> xs, dys;
    const int copies = cold_input_copies(batch * seq_len * config.hidden_size *
                                         static_cast<int64_t>(dtype_size(dtype)));
    for (int k = 0; k < copies; ++k) {
      xs.push_back(Tensor::randn({batch, seq_len, config.hidden_size}, gen).to(device, dtype));
      dys.push_back(Tensor::randn({batch, seq_len, config.hidden_size}, gen, DType::F32, 1e-3)
                        .to(device, dtype));
    }
    size_t turn = 0;
    const auto next_input = [&] { return turn++ % xs.size(); };
    auto no_grad = [&](const models::Stage& st, const Tensor& in) {
      NoGradGuard guard;
      (void)st.forward(in, ctx);
    };
    // As the executor's backward use runs it: the output is only backpropagated.
    models::StageContext backward_ctx = ctx;
    backward_ctx.output_unread = true;
    auto with_grad = [&](const models::Stage& st, const Tensor& in, const Tensor& dy,
                         bool input_grad) {
      Tensor leaf = in.detach();
      if (input_grad) leaf.set_requires_grad(true);
      Tensor out = st.forward(leaf, backward_ctx);
      if (out.numel() == 1)
        backward(out);
      else
        backward(out, dy);
    };
    const auto block_forward = [&] { no_grad(block, xs[next_input()]); };
    const auto block_backward = [&] {
      const size_t k = next_input();
      with_grad(block, xs[k], dys[k], true);
    };
    const auto head_step = [&] { with_grad(head, xs[next_input()], Tensor(), true); };
    // In kStageTimeCurves' order (the fits below walk it).
    static_assert(std::size(kStageTimeCurves) == 5, "one timing per fit in kStageTimeCurves");
    seconds.push_back({time([&] { no_grad(embed, ids); }),
                       time([&] { with_grad(embed, ids, dys[0], false); }), time(block_forward),
                       time(block_backward), time(head_step)});
    static_assert(std::size(kStageBytesFits) == 2, "one measurement per fit in kStageBytesFits");
    bytes.push_back({working_set(block_backward), working_set(head_step)});
    high_water = std::max(high_water, memory.stats().peak_bytes);
  }
  StageTimes t = StageTimes::for_model(config, seq_len);
  t.device = device.is_cpu() ? "cpu" : "cuda";
  t.batch_sizes = timed;
  // Timing noise can make a larger chunk measure faster than a smaller
  // one, but a stage never gets faster with more sequences: each figure is
  // at least the one before it.
  for (size_t k = 0; k < std::size(kStageTimeCurves); ++k) {
    StageCurve& curve = t.*kStageTimeCurves[k].member;
    curve.batches = timed;
    for (const auto& at_size : seconds)
      curve.seconds.push_back(
          std::max(at_size[k], curve.seconds.empty() ? 0.0 : curve.seconds.back()));
  }
  // The working sets: lines through two sizes on one side of the head's
  // bend (working_set_sizes), with slope at least 0 and through the larger
  // of the two figures at the larger size.
  if (const auto sizes = working_set_sizes(config, seq_len, timed, device)) {
    const size_t lo =
        static_cast<size_t>(std::find(timed.begin(), timed.end(), sizes->first) - timed.begin());
    const size_t hi =
        static_cast<size_t>(std::find(timed.begin(), timed.end(), sizes->second) - timed.begin());
    for (size_t k = 0; k < std::size(kStageBytesFits); ++k) {
      LinearFit& fit = t.*kStageBytesFits[k].member;
      const double at_lo = bytes[lo][k], at_hi = bytes[hi][k];
      fit = fit_line(timed[lo], at_lo, timed[hi], at_hi);
      fit.b = std::max(0.0, fit.b);
      fit.a = std::max(at_lo, at_hi) - fit.b * static_cast<double>(timed[hi]);
    }
  }
  return t;
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
