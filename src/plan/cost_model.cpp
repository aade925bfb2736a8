#include "plan/cost_model.h"

#include "plan/executor_costs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "exec/streaming_plan.h"
#include "plan/state_placement.h"

namespace lt::plan {

namespace {

// Host memory traffic of one parameter's optimizer update (docs/gpu-machine.md):
// fp32 AdamW reads p, m, v (12 B) and the bf16 gradient (2 B), writes p, m,
// v (12 B) and the bf16 copy the GPU streams (2 B): 28 B. With 8-bit states
// m and v are 1 B each: 4 + 2 + 2 read, 4 + 2 write, 2 out = 16 B.
constexpr double kFp32AdamBytesPerParam = 28;
constexpr double kEightBitAdamBytesPerParam = 16;
// The optimizer never gets less than this share of host memory bandwidth,
// however busy the copies are (they are not all simultaneous).
constexpr double kMinOptimizerHostShare = 0.1;

double seconds(double flops, const HardwareProfile& hw) {
  return flops / (hw.gpu_tflops * 1e12);
}

// How the streaming executor spends its compute (exec/streaming_plan.h):
// forward runs each block once without grad; the head runs forward and
// backward per chunk in one step; backward runs each block's forward again
// under grad mode and then its backward (twice a forward). So a block costs
// 4 forwards per step and the head 3, before any recompute.
constexpr double kBlockBackwardForwards = 3;
constexpr double kHeadStepForwards = 3;

// Compute windows: forward window w < L is block w's forward, backward
// window w < L its backward (re-forward + backward), and window L, in both
// directions, is the head step between forward and backward (a fused
// tail's step is longer: priced as the head's, the less capacity).
double window_s(const CostModel& m, int w, bool backward) {
  const int L = static_cast<int>(m.config.num_hidden_layers);
  if (w == L) return m.head_step_s;
  return backward ? m.block_backward_s : m.block_forward_s;
}

}  // namespace

double block_forward_flops(const models::ModelConfig& c, const exec::TrainSizes& s) {
  const double tokens = static_cast<double>(s.batch_size) * s.seq_len;
  const double matmul = 2.0 * exec::block_parameters(c) * tokens;
  const double attention =
      2.0 * s.batch_size * double(s.seq_len) * s.seq_len * c.num_attention_heads * c.head_dim;
  return matmul + attention;
}

double block_output_gemm_flops(const models::ModelConfig& c, const exec::TrainSizes& s) {
  return 2.0 * static_cast<double>(c.intermediate_size) * c.hidden_size *
         (static_cast<double>(s.batch_size) * s.seq_len);
}

double head_forward_flops(const models::ModelConfig& c, const exec::TrainSizes& s) {
  return 2.0 * c.vocab_size * c.hidden_size * double(s.batch_size) * s.seq_len;
}

CostModel make_cost_model(const models::ModelConfig& config, const HardwareProfile& hardware,
                          const exec::TrainSizes& sizes, int64_t chunk_sequences,
                          int max_recompute) {
  LT_CHECK(max_recompute >= 1, "plan: the maximum recompute length must be >= 1, got ",
           max_recompute);
  CostModel m;
  m.config = config;
  m.hardware = hardware;
  m.sizes = sizes;
  m.chunk_sequences = chunk_sequences;
  m.max_recompute = max_recompute;
  m.block_forward_s = seconds(block_forward_flops(config, sizes), hardware);
  m.head_forward_s = seconds(head_forward_flops(config, sizes), hardware);
  m.block_train_s = kBlockBackwardForwards * m.block_forward_s;
  m.block_backward_s = m.block_train_s - seconds(block_output_gemm_flops(config, sizes), hardware);
  m.head_step_s = kHeadStepForwards * m.head_forward_s;
  m.stage_times_from = fmt::format("FLOP model at gpu_tflops = {}", hardware.gpu_tflops);
  if (hardware.stage_times) {
    const StageTimes& t = *hardware.stage_times;
    t.check_model(config);  // another model's times are refused, not ignored
    if (t.seq_len == sizes.seq_len) {
      const int64_t b = sizes.batch_size;
      m.block_forward_s = t.block_forward.chunked(b, chunk_sequences);
      m.block_backward_s = t.block_backward.chunked(b, chunk_sequences);
      // The output's GEMM, which the measured backward use skipped, at the
      // measured forward's rate.
      m.block_train_s = m.block_backward_s + m.block_forward_s *
                                                 block_output_gemm_flops(config, sizes) /
                                                 block_forward_flops(config, sizes);
      m.head_step_s = t.head_step.chunked(b, chunk_sequences);
      m.head_forward_s = m.head_step_s / kHeadStepForwards;
      m.embed_s = t.embed_forward.chunked(b, chunk_sequences) +
                  t.embed_backward.chunked(b, chunk_sequences);
      m.stage_times_from = fmt::format("measured ({}: stage_times, on {} at batch {})", t.source,
                                       t.device, fmt::join(t.batch_sizes, ", "));
    } else {
      m.stage_times_from = fmt::format(
          "FLOP model at gpu_tflops = {} ({}: stage_times are for seq_len {}, the "
          "plan is for {})",
          hardware.gpu_tflops, t.source, t.seq_len, sizes.seq_len);
    }
  }
  m.tail_block_train_s = m.block_train_s;
  m.tail_head_step_s = m.head_step_s;
  m.block_weight_gb =
      static_cast<double>(exec::block_parameters(config) * sizes.upload_bytes_per_parameter()) /
      kBytesPerGB;
  m.block_gradient_gb =
      static_cast<double>(exec::block_parameters(config) * sizes.compute_bytes) / kBytesPerGB;
  m.boundary_gb = exec::boundary_bytes(config, sizes) / kBytesPerGB;
  return m;
}

void use_tail_chunk(CostModel& m, int64_t tail_chunk) {
  m.tail_chunk_sequences = tail_chunk;
  m.tail_block_train_s = m.block_train_s;
  m.tail_head_step_s = m.head_step_s;
  if (tail_chunk <= 0) return;
  const CostModel pieces =
      make_cost_model(m.config, m.hardware, m.sizes, tail_chunk, m.max_recompute);
  m.tail_block_train_s = pieces.block_train_s;
  m.tail_head_step_s = pieces.head_step_s;
}

ActivationRoom activation_room(const CostModel& m) {
  using exec::MemorySpace;
  const exec::MemoryBudget fixed = exec::fixed_bytes(m.config, m.sizes, m.chunk_sequences);
  const HardwareProfile& hw = m.hardware;
  ActivationRoom room;
  // The MILP counts kept GPU boundaries and the longest recomputed run; the
  // executor holds at most kMaxTransientBoundaries more (boundaries in use
  // or in transit, the boundary gradient), and the host up to
  // kMaxDiskTransitBuffers for disk boundaries (exec/memory_budget.h).
  room.gpu_gb = hw.gpu_memory_gb - fixed.bytes(MemorySpace::Gpu) / kBytesPerGB -
                exec::kMaxTransientBoundaries * m.boundary_gb;
  room.gpu_kept_gb = hw.gpu_activation_gb.value_or(std::numeric_limits<double>::infinity());
  room.host_gb = hw.host_memory_gb - fixed.bytes(MemorySpace::Host) / kBytesPerGB -
                 exec::kMaxDiskTransitBuffers * m.boundary_gb;
  if (hw.host_activation_gb) room.host_gb = std::min(room.host_gb, *hw.host_activation_gb);
  room.disk_gb = hw.disk_gb;
  return room;
}

PlanInstance build_instance(const CostModel& m) {
  const int L = static_cast<int>(m.config.num_hidden_layers);
  const HardwareProfile& hw = m.hardware;
  PlanInstance in;
  in.num_blocks = L;
  in.boundary_gb.assign(L + 1, m.boundary_gb);
  in.forward_s.assign(L, m.block_forward_s);
  in.max_recompute = m.max_recompute;
  const ActivationRoom room = activation_room(m);
  in.gpu_gb = room.gpu_gb;
  in.gpu_kept_gb = room.gpu_kept_gb;
  in.host_gb = room.host_gb;
  in.disk_gb = room.disk_gb;
  // Tie-breakers far below any recompute: keeping a boundary must always
  // beat recomputing it when both fit, the GPU the host, the host the disk.
  in.keep_penalty_s = 1e-4 * m.block_forward_s;
  in.offload_penalty_s = 2e-4 * m.block_forward_s;
  in.disk_penalty_s = 1e-3 * m.block_forward_s;
  const auto duration = [&](int w, bool backward) { return window_s(m, w, backward); };
  for (int li = 0; li < kNumLinks; ++li) {
    const Link link = static_cast<Link>(li);
    const bool backward = link == Link::HostToDevice || link == Link::DiskRead;
    // Both PCIe directions are busy in every window (weights come in while
    // activations or gradients go out), so each gets the bidirectional rate.
    double gbps = hw.bidir_gbps;
    if (link == Link::DiskWrite) gbps = hw.disk_write_gbps;
    if (link == Link::DiskRead) gbps = hw.disk_read_gbps;
    LinkWindows& lw = in.links[li];
    lw.gbps = gbps;
    for (int w = 0; w <= L; ++w) {
      lw.capacity_gb.push_back(gbps * duration(w, backward));
      // Backward window w prefetches block w-1's weights (the head's window
      // prefetches block L-1). Forward weight traffic does not share the
      // device->host direction, and gradients go out in the d2h direction of
      // backward windows, where activations never travel.
      lw.mandatory_gb.push_back(link == Link::HostToDevice && w >= 1 ? m.block_weight_gb : 0.0);
    }
  }
  return in;
}

double cpu_update_in_run_scale(const HardwareProfile& hw, exec::OptimizerStates optimizer) {
  const std::optional<double>& scale = optimizer == exec::OptimizerStates::Fp32
                                           ? hw.cpu_adam_in_run_scale
                                           : hw.cpu_adam8bit_in_run_scale;
  return scale ? std::clamp(*scale, 0.25, 2.0) : 1.0;
}

namespace {

// Parameters a second the CPU update runs at during the forward: the
// profile's rate beside the copies when measured. Otherwise the lesser of
// the CPU's (the profile's measured rate for the optimizer in use) and what
// host memory bandwidth allows once the forward's copies (weights in,
// activations out) take their share; the bandwidth is host_mem_gbps, or
// what the measured rate itself moves if that is more (a triad measures
// less than AdamW's streams reach). Times the in-run scale a run measured.
double update_params_per_s(const CostModel& m, const PlanInstance& in, const PlanSolution& sol,
                           double forward_s) {
  const HardwareProfile& hw = m.hardware;
  const bool fp32 = m.sizes.optimizer == exec::OptimizerStates::Fp32;
  const std::optional<double>& beside_copies =
      fp32 ? hw.cpu_adam_beside_copies_gparams_per_s : hw.cpu_adam8bit_beside_copies_gparams_per_s;
  const double bytes_pp = fp32 ? kFp32AdamBytesPerParam : kEightBitAdamBytesPerParam;
  const double cpu_params_per_s =
      (fp32 ? hw.cpu_adam_gparams_per_s : hw.cpu_adam8bit_gparams_per_s) * 1e9;
  const double scale = cpu_update_in_run_scale(hw, m.sizes.optimizer);
  LT_CHECK(sol.placements.empty() || sol.placements.size() == in.boundary_gb.size(),
           "predict_step: ", sol.placements.size(), " placements for ", in.boundary_gb.size(),
           " boundaries");
  double offloaded_gb = 0;
  for (size_t i = 0; i < sol.placements.size(); ++i)
    if (sol.placements[i] == exec::Placement::Host || sol.placements[i] == exec::Placement::Disk)
      offloaded_gb += in.boundary_gb[i];
  // What the forward's copies move while the optimizer chases it (the
  // blocks on the device upload nothing).
  int streamed_blocks = 0;
  for (int b = 1; b <= in.num_blocks; ++b) streamed_blocks += m.stage_on_device(b) ? 0 : 1;
  const double copy_gbps =
      (streamed_blocks * m.block_weight_gb + offloaded_gb) / std::max(forward_s, 1e-12);
  if (beside_copies) {
    // The profile measured the rate beside copies running both ways at once
    // at the bidirectional rate; a plan whose copies move a share of that
    // costs the update that share of the difference (HardwareProfile::
    // cpu_adam_beside_copies_gparams_per_s).
    const double share = std::clamp(copy_gbps / (2 * std::max(hw.bidir_gbps, 1e-12)), 0.0, 1.0);
    return scale * (cpu_params_per_s - share * (cpu_params_per_s - *beside_copies * 1e9));
  }
  const double host_bw_gbps = std::max(hw.host_mem_gbps, cpu_params_per_s * bytes_pp / kBytesPerGB);
  const double host_gbps =
      std::max(host_bw_gbps - copy_gbps, kMinOptimizerHostShare * host_bw_gbps);
  return scale * std::min(cpu_params_per_s, host_gbps * kBytesPerGB / bytes_pp);
}

// The recomputes of a schedule with a fused tail: the solver's segments
// were priced without it, but the tail's input boundary stays on the
// device from its forward and the boundaries above it never exist, so
// only what the stage plan still recomputes is run (a block's no-grad
// forward each; the embed stage's is ~0). Offloaded boundaries never go
// with a tail: the solver's figure then.
double tail_recompute_s(const CostModel& m, const PlanInstance& in, const PlanSolution& sol) {
  exec::Schedule s;
  s.boundaries = sol.placements;
  s.tail_blocks = m.tail_blocks;
  for (exec::Placement p : s.boundaries)
    if (p == exec::Placement::Host || p == exec::Placement::Disk) return sol.recompute_s;
  if (s.boundaries.size() != static_cast<size_t>(in.num_blocks) + 1) return sol.recompute_s;
  double sum = 0;
  for (const exec::StageUse& use : exec::plan_stage_uses(s, in.num_blocks))
    if (use.work == exec::StageWork::Recompute && use.stage >= 1)
      sum += in.forward_s.at(static_cast<size_t>(use.stage) - 1);
  return sum;
}

}  // namespace

StepPrediction predict_step(const CostModel& m, const PlanInstance& in, const PlanSolution& sol) {
  const int L = in.num_blocks;
  const HardwareProfile& hw = m.hardware;
  StepPrediction p;
  // The forward the CPU's updates run beside: the tail's blocks have none.
  const double forward_s = (L - m.tail_blocks) * m.block_forward_s + m.head_forward_s;
  p.compute_s = L * (m.block_forward_s + m.block_backward_s) + m.head_step_s + m.embed_s;
  // The fused tail runs its blocks' forward once, under grad mode, and
  // their backward: as resident trains a block (block_train_s), the
  // output's GEMM too, which a backward use skips (on the H200 a 3B block
  // saves 12.5 ms of its 17.5 ms forward).
  const int first_tail = L + 1 - m.tail_blocks;  // the tail's first stage (L + 1: none)
  // In chunks of its own, at their rates (Note [The tail's own chunks]).
  const double head_step_s = m.tail_blocks > 0 ? m.tail_head_step_s : m.head_step_s;
  p.compute_s += m.tail_blocks * (m.tail_block_train_s - m.block_forward_s - m.block_backward_s) +
                 head_step_s - m.head_step_s;
  p.recompute_s = m.tail_blocks > 0 ? tail_recompute_s(m, in, sol) : sol.recompute_s;
  for (double e : sol.exposed_s) p.exposed_activations_s += e;
  // The first block's weights arrive before any compute; each later block's
  // while the previous one computes. The tail's all load during the forward
  // before it: its first block's into a block slot, its later blocks' and
  // the head's into slots of their own.
  // Blocks on the device (stages 1..L) load nothing.
  const double w_gb = m.block_weight_gb;
  p.exposed_weights_s = m.stage_on_device(1) ? 0.0 : w_gb / hw.h2d_gbps;
  for (int stage = 2; stage <= L && stage < first_tail; ++stage)
    if (!m.stage_on_device(stage))
      p.exposed_weights_s += std::max(0.0, w_gb / hw.bidir_gbps - m.block_forward_s);
  // The head's weights (a tied head's: the embedding's too, unless the
  // embed stage is on the device) load behind the last forward.
  const double head_gb =
      m.stage_on_device(L + 1)
          ? 0.0
          : static_cast<double>(exec::stage_weight_elements(m.config, L + 1, m.stage_on_device(0)) *
                                m.sizes.upload_bytes_per_parameter()) /
                kBytesPerGB;
  if (m.tail_blocks > 0) {
    double tail_gb = head_gb;
    for (int stage = std::max(first_tail, 2); stage <= L; ++stage)
      tail_gb += m.stage_on_device(stage) ? 0.0 : w_gb;
    const double before_s = first_tail >= 2 ? m.block_forward_s : 0.0;  // embed's: ~0
    p.exposed_weights_s += std::max(0.0, tail_gb / hw.bidir_gbps - before_s);
  } else {
    p.exposed_weights_s += std::max(0.0, head_gb / hw.bidir_gbps - m.block_forward_s);
  }
  // Backward: weight prefetch (the h2d link's mandatory traffic) and each
  // block's gradients going out during its window.
  const LinkWindows& h2d = in.link(Link::HostToDevice);
  for (int w = 0; w <= L; ++w) {
    // The tail's blocks (stages first_tail..L, windows first_tail-1..L-1)
    // have no backward windows: their backward is the tail step's.
    if (w < L && w + 1 >= first_tail) continue;
    p.exposed_weights_s += std::max(0.0, h2d.mandatory_gb[w] - h2d.capacity_gb[w]) / h2d.gbps;
    if (w < L && !m.stage_on_device(w + 1))
      p.exposed_weights_s += std::max(
          0.0, m.block_gradient_gb / hw.bidir_gbps - (m.block_backward_s - m.block_forward_s));
  }
  // The tail's blocks' gradients go out as one download after it, during
  // the next block's backward window (the embed stage's when the tail
  // takes every block).
  int tail_streamed = 0;
  for (int stage = first_tail; stage <= L; ++stage)
    tail_streamed += m.stage_on_device(stage) ? 0 : 1;
  const double after_tail_s = first_tail >= 2 ? m.block_backward_s - m.block_forward_s : m.embed_s;
  if (tail_streamed > 0)
    p.exposed_weights_s +=
        std::max(0.0, tail_streamed * m.block_gradient_gb / hw.bidir_gbps - after_tail_s);
  // The optimizer updates stage k (forward order) while the next step's
  // forward runs stages before k, and stage k's forward waits for it.
  const double params_per_s = update_params_per_s(m, in, sol, forward_s);
  p.cpu_update_params_per_s = params_per_s;
  p.cpu_update_in_run_scale = cpu_update_in_run_scale(hw, m.sizes.optimizer);
  const double block_params = static_cast<double>(exec::block_parameters(m.config));
  // Stages in forward order: the embedding (with a tied head, all of the
  // shared matrix: the embed stage owns it and is updated first), blocks,
  // the head's own (a final norm and an untied lm_head); their forward
  // times: ~0, rho, head.
  std::vector<StageUpdate> stages;
  // The stages on the device update on the GPU before the CPU's are
  // queued, on the step's critical path.
  double device_update_s = 0;
  const auto add_stage = [&](double params, double forward_s, double backward_s) {
    StageUpdate st;
    const size_t s = stages.size();
    if (m.stage_on_device(static_cast<int>(s))) {
      device_update_s += device_update_seconds(hw, m.sizes.optimizer, params);
    } else {
      st.update_s = params / params_per_s;
    }
    st.forward_s = forward_s;
    st.backward_s = backward_s;
    st.on_disk = s < m.sizes.states_on_disk.size() && m.sizes.states_on_disk[s];
    if (st.on_disk) {
      const auto bytes = static_cast<double>(exec::master_and_state_bytes(
          exec::stage_parameters(m.config, static_cast<int>(s)), m.sizes));
      st.read_s = bytes / (hw.disk_read_gbps * kBytesPerGB);
      st.write_s = bytes / (hw.disk_write_gbps * kBytesPerGB);
    }
    stages.push_back(st);
  };
  add_stage(static_cast<double>(exec::embed_parameters(m.config)), 0.0, m.embed_s);
  // The tail's blocks have no forward of their own: the tail step waits for
  // their updates, and the head's, when it starts.
  for (int j = 0; j < L; ++j)
    add_stage(block_params, j + 1 >= first_tail ? 0.0 : m.block_forward_s, m.block_backward_s);
  add_stage(static_cast<double>(exec::head_parameters(m.config)), m.head_forward_s, head_step_s);
  const auto pipeline_of = [&](const std::vector<StageUpdate>& s) {
    return m.updates_during_backward ? predict_update_pipeline_during_backward(s)
                                     : predict_update_pipeline(s, /*reads_at_step_start=*/true);
  };
  const UpdatePipeline pipeline = pipeline_of(stages);
  p.optimizer_s = pipeline.exposed_s;
  p.state_disk_busy_s = pipeline.disk_busy_s;
  if (pipeline.disk_busy_s > 0) {
    for (StageUpdate& st : stages) st.on_disk = false;
    p.exposed_state_disk_s = std::max(0.0, p.optimizer_s - pipeline_of(stages).exposed_s);
  }
  p.device_updates_s = device_update_s;
  p.step_s = p.compute_s + p.device_updates_s + p.recompute_s + p.exposed_weights_s +
             p.exposed_activations_s + p.optimizer_s;
  p.tokens_per_s = m.sizes.batch_size * double(m.sizes.seq_len) / p.step_s;
  return p;
}

}  // namespace lt::plan
