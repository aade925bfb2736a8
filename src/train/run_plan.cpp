#include "train/run_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>

#include "core/allocator.h"
#include "core/bytes_text.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "dist/process.h"
#include "models/context_limit.h"
#include "models/hf_mapping.h"
#include "plan/milp.h"
#include "plan/planner.h"
#include "plan/profile.h"
#include "plan/schedule_price.h"
#include "plan/state_placement.h"
#include "train/executor_auto.h"
#include "train/executor_choice.h"
#include "train/hardware_cache.h"
#include "train/no_decay.h"
#include "train/progress.h"
#include "train/schedule_auto.h"
#include "train/state_placement.h"
#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#endif

namespace lt::train {

namespace {

// Note [Stages on the device]: a schedule the run names by rule (all_gpu,
// every_k) leaves GPU memory that a planned one would fill with whole
// stages; exec.stages_on_device auto fills it the same way, the embedding
// first, while the schedule still fits the memory the run compared it with.
// No prediction weighs them here (a named schedule has none): each takes
// work off the CPU and copies off the links, at the cost of room left over.
void keep_stages_in_the_room(const TrainConfig& c, const ExecutorChoice& choice,
                             const models::ModelConfig& model, bool stand_in, RunPlan& p) {
  const auto& on_disk = p.placement.states_on_disk;
  if (c.exec.stages_on_device != "auto" || choice.available_bytes < 0 ||
      dist::this_world().distributed() ||
      std::find(on_disk.begin(), on_disk.end(), true) != on_disk.end())
    return;
  const int L = static_cast<int>(model.num_hidden_layers);
  const exec::Schedule s = exec::with_stages_on_device(
      p.schedule, L, model.tie_word_embeddings, [&](const exec::Schedule& with) {
        return streaming_shortfall(c, choice, model, with, stand_in).empty();
      });
  if (s.stages_on_device.empty()) return;
  p.schedule.stages_on_device = s.stages_on_device;
  p.reasons.push_back(fmt::format(
      "exec.stages_on_device auto: {} of the {} stages kept and updated on the device (0: embed, "
      "1..{}: blocks, {}: head: {}), in the room exec.schedule ({}) leaves in {}",
      s.stages_on_device.size(), L + 2, L, L + 1, fmt::join(s.stages_on_device, ", "),
      c.exec.schedule, choice.available_from));
}

// exec.mode streaming with a schedule by name runs it as it is, and
// exec.device_memory_gb caps the device: when the estimate of what the
// schedule needs is over the cap, the run may run out of memory at its
// first step. Said, not refused: the estimate is conservative (a block's
// working set is counted whole), and schedules over it run.
void warn_when_a_set_schedule_may_not_fit(const TrainConfig& c, const models::ModelConfig& model,
                                          const exec::Schedule& schedule, bool stand_in,
                                          RunPlan& p) {
  if (c.exec.device_memory_gb <= 0) return;
  ExecutorChoice capped;
  capped.available_bytes = std::llround(c.exec.device_memory_gb * 1e9);
  capped.available_from = fmt::format("exec.device_memory_gb ({})", c.exec.device_memory_gb);
  std::string shortfall = streaming_shortfall(c, capped, model, schedule, stand_in);
  if (shortfall.empty()) return;
  shortfall.erase(0, shortfall.find("the streaming schedule"));  // after the (empty) reason
  p.reasons.push_back(fmt::format(
      "warning: exec.mode {} runs {} as named: {} (an estimate that counts high), so the run may "
      "run out of device memory at its first step; exec.schedule: auto plans one that fits "
      "(recomputing or offloading boundaries)",
      c.exec.mode, c.exec.schedule, shortfall));
}

// A streaming schedule's predicted step, as the plan keeps it, and where
// the stage times that priced it (`stage_times_from`, the cost model's:
// "measured (...)" or the FLOP model's) were measured.
void take_prediction(const TrainConfig& c, const plan::StepPrediction& prediction,
                     const std::string& stage_times_from, RunPlan& p) {
  p.predicted_step_s = prediction.step_s;
  p.stage_times_device.clear();
  if (stage_times_from.starts_with("measured")) {
    const plan::HardwareProfile hw = configured_hardware(c);
    if (hw.stage_times) p.stage_times_device = hw.stage_times->device;
  }
  p.predicted_state_disk_s = prediction.exposed_state_disk_s;
  p.predicted_cpu_update_params_per_s = prediction.cpu_update_params_per_s;
  p.cpu_update_in_run_scale = prediction.cpu_update_in_run_scale;
}

// exec.schedule as the streaming executor runs it: the named schedule, or
// the planner's. Under exec.mode auto the default all_gpu is planned too:
// the planner's search holds it (every boundary on the device, whichever
// chunk asked_chunk or the profile prefers), so its plan is predicted no
// slower, and it adds what all_gpu cannot say for itself (stages on the
// device by predicted time, the fused tail, a predicted step). When the
// planner finds nothing, all_gpu still runs if it fits. A schedule the user
// names otherwise is kept, and its shortfall stops the run with the hint;
// exec.mode streaming runs all_gpu as it is.
// `asked_chunk`: exec.micro_batch as resolve_run settled it (0: not given).
// `planned`: the planner's plan for this run, made on the first call that
// plans and reused after (choose_fastest plans to compare, then the run
// takes that plan: a second, time-limited solve could differ from the one
// the comparison saw).
void choose_schedule(const TrainConfig& c, const models::ModelConfig& model,
                     const ExecutorChoice& choice, int64_t asked_chunk,
                     std::optional<plan::Plan>& planned, RunPlan& p) {
  const int blocks = static_cast<int>(model.num_hidden_layers);
  const bool stand_in = p.device.is_cpu();
  std::string name = c.exec.schedule;
  std::string all_gpu_shortfall;
  if (name == "all_gpu" && c.exec.mode == "auto") {
    exec::Schedule all = exec::Schedule::all_gpu(blocks);
    all.chunk_sequences = asked_chunk > 0 ? asked_chunk : p.accum_sequences;  // as it would run
    all_gpu_shortfall = streaming_shortfall(c, choice, model, all, stand_in);
    p.reasons.push_back("exec.mode auto: " +
                        (all_gpu_shortfall.empty()
                             ? std::string("the default schedule (all_gpu) fits")
                             : all_gpu_shortfall) +
                        "; planning the schedule instead (exec.schedule: auto)");
    name = "auto";
  }
  // Read once, for the plan and its hint (a named schedule needs none).
  const int64_t gpu_free_bytes = name == "auto" && p.device.is_cuda() && cuda_device_visible()
                                     ? cuda_free_bytes(p.device.index)
                                     : -1;
  if (name == "auto" && !planned) {
    try {
      planned = plan_for_run(c, model, stand_in, p.free_memory_of, asked_chunk, gpu_free_bytes,
                             p.placement);
    } catch (const Error& e) {
      if (c.exec.mode != "auto") throw;
      if (c.exec.schedule != "all_gpu" || !all_gpu_shortfall.empty())
        fail_does_not_fit("exec.mode auto: nothing fits: ",
                          all_gpu_shortfall.empty() ? choice.reason : all_gpu_shortfall, "; and ",
                          e.what());
      p.reasons.push_back(std::string("exec.mode auto: the planner found no schedule (") +
                          e.what() + "), and all_gpu fits: it runs");
      name = "all_gpu";
    }
  }
  if (name == "all_gpu") {
    p.schedule = exec::Schedule::all_gpu(blocks);
    p.reasons.push_back("schedule: all_gpu (every boundary kept on the device)");
  } else if (name == "every_k") {
    p.schedule = exec::Schedule::every_kth_gpu(blocks, static_cast<int>(c.exec.keep_every));
    p.reasons.push_back(fmt::format(
        "schedule: every_k (boundary i kept on the device when i % {} == 0, else recomputed)",
        c.exec.keep_every));
  } else if (name == "auto") {
    const plan::Plan& plan = *planned;
    p.plan_description = describe_plan(plan);
    p.schedule = plan.schedule;
    take_prediction(c, plan.prediction, plan.stage_times_from, p);
    p.predicted_gpu_peak_bytes = plan.budget.bytes(exec::MemorySpace::Gpu);
    p.budget = plan.budget;
    p.reasons.push_back(fmt::format(
        "schedule: the planner's (predicted step {:.4f} s{})", plan.prediction.step_s,
        plan.prediction.state_disk_busy_s > 0
            ? fmt::format("; the states on disk keep the disk busy {:.4f} s a step, {:.4f} s of "
                          "it exposed",
                          plan.prediction.state_disk_busy_s, plan.prediction.exposed_state_disk_s)
            : std::string()));
    const std::string hint = previous_norm_hint(c, model, stand_in, p.free_memory_of, asked_chunk,
                                                gpu_free_bytes, p.placement, plan);
    if (!hint.empty()) p.reasons.push_back(hint);
  } else {
    p.schedule = exec::load_schedule(c.exec.schedule);
    exec::validate(p.schedule, blocks, "exec.schedule (" + c.exec.schedule + ")");
    LT_CHECK(p.schedule.batch_size == 0 || p.schedule.batch_size == c.train.batch_size,
             "exec.schedule (", c.exec.schedule, "): batch_size ", p.schedule.batch_size,
             " differs from train.batch_size ", c.train.batch_size);
    p.reasons.push_back("schedule: " + c.exec.schedule);
  }
  // The planner chunked by asked_chunk itself.
  if (name != "auto" && asked_chunk > 0) p.schedule.use_chunk(asked_chunk);
  if (name != "auto" && c.exec.mode == "auto")  // the planner checked its own
    check_streaming_fits(c, choice, model, p.schedule, stand_in);
  if (name != "auto" && c.exec.mode != "auto")
    warn_when_a_set_schedule_may_not_fit(c, model, p.schedule, stand_in, p);
  if (name == "all_gpu" || name == "every_k")
    keep_stages_in_the_room(c, choice, model, stand_in, p);
}

// exec.mode offload or zenflow as set: auto held them to the device's
// memory, but as set nothing did, and a run past it started (loading the
// weights, on a large model minutes) and failed at its first step with
// advice for streaming schedules. The whole count runs high (on the CPU
// stand-in 1.25 times the demo model's peak, 1.9 times the test fixture's:
// the graph's transients), so a run over it is warned; one whose weights
// and gradients alone, counted exactly, exceed the device is refused.
void check_offload_set_fits(const TrainConfig& c, const models::ModelConfig& model, RunPlan& p) {
  const DeviceMemory memory = device_memory_for_run(c, p.device);
  const int64_t needed = p.budget.bytes(exec::MemorySpace::Gpu);
  if (memory.bytes < 0 || needed <= memory.bytes) return;
  const bool zen = p.executor == exec::ExecutorKind::ZenFlow;
  const std::string executor = exec::executor_name(p.executor);
  const int64_t weights =
      exec::offload_device_weights(model, p.sizes, zen ? c.exec.zenflow.topk_ratio : 0.0)
          .bytes(exec::MemorySpace::Gpu);
  if (weights <= memory.bytes) {
    p.reasons.push_back(fmt::format(
        "warning: exec.mode {}: its device set (the weights, gradients and activations of a "
        "micro-batch of {} sequences{}) needs an estimated {} on {}, more than {} has ({}): the "
        "run may run out of device memory at its first step (exec.mode streaming, or auto, "
        "streams the blocks and needs less)",
        executor, p.accum_sequences, zen ? ", and the top-k columns' states" : "",
        gigabytes(needed), p.device.str(), memory.from, gigabytes(memory.bytes)));
    return;
  }
  fail_does_not_fit(
      c.where_set("exec.mode"), "exec.mode ", executor,
      " keeps the whole model's weights and gradients on the device",
      zen ? ", with the top-k columns' states" : "", ": ", gigabytes(weights), " on ",
      p.device.str(), ", more than ", memory.from, " has (", gigabytes(memory.bytes),
      "), before any activation. Set exec.mode streaming (or auto), which streams the blocks "
      "through the device");
}

// ZenFlow's selective updates are another training than AdamW's (the
// losses differ from the first window on), which a user who asked for
// `auto` did not choose: said, with the exact executors' predictions.
std::string zenflow_trains_otherwise(const TrainConfig& c,
                                     const std::vector<ExecutorCandidate>& candidates,
                                     double streaming_s) {
  std::vector<std::string> exact;
  for (const ExecutorCandidate& e : candidates)
    if (e.fits && e.executor != exec::ExecutorKind::ZenFlow)
      exact.push_back(
          fmt::format("{} (predicted {:.3g} s a step)", exec::executor_name(e.executor), e.step_s));
  if (streaming_s > 0)
    exact.push_back(fmt::format("streaming (predicted {:.3g} s a step)", streaming_s));
  return fmt::format(
      "zenflow: its updates are not AdamW's: each step updates on the device only the {:g}% of "
      "each weight's columns with the largest gradients (exec.zenflow.topk_ratio), the rest on "
      "the CPU {}, so the losses differ from an exact run's; {}",
      c.exec.zenflow.topk_ratio * 100,
      c.exec.zenflow.update_interval > 0
          ? fmt::format("every {} steps (exec.zenflow.update_interval)",
                        c.exec.zenflow.update_interval)
          : std::string("at the end of each window (exec.zenflow.update_interval auto)"),
      exact.empty() ? std::string("no exact executor's plan fits this device")
                    : fmt::format("for exact AdamW set exec.mode: {}", fmt::join(exact, ", or ")));
}

// exec.mode auto: the fastest by prediction among the executors that fit
// (plan/executor_costs.h; the streaming planner's for streaming). When
// resident does not fit but ZenFlow or offload does, the planner plans the
// streaming schedule now (whatever exec.schedule names) to compare.
void choose_fastest(const TrainConfig& c, const models::ModelConfig& model,
                    const ExecutorChoice& choice, const std::vector<ExecutorCandidate>& candidates,
                    int64_t asked_chunk, std::optional<plan::Plan>& planned, RunPlan& p) {
  const ExecutorCandidate* best = fastest_fitting(candidates);
  double streaming_s = 0;
  if (choice.executor == exec::ExecutorKind::Streaming && best) {
    TrainConfig auto_schedule = c;
    auto_schedule.exec.schedule = "auto";
    RunPlan streaming = p;
    try {
      choose_schedule(auto_schedule, model, choice, asked_chunk, planned, streaming);
      streaming_s = streaming.predicted_step_s;
    } catch (const Error&) {
      streaming_s = 0;  // no streaming schedule fits: the candidate that does wins
    }
    if (streaming_s > 0 && streaming_s <= best->step_s) best = nullptr;
  }
  for (const std::string& line : candidate_table(candidates, streaming_s, p.device.is_cpu()))
    (p.device.is_cpu() ? p.cpu_price_table : p.reasons).push_back(line);
  if (!best) return;
  p.executor = best->executor;
  if (best->executor == exec::ExecutorKind::ZenFlow)
    p.reasons.push_back(zenflow_trains_otherwise(c, candidates, streaming_s));
  if (!p.device.is_cpu()) {
    p.reasons.push_back(fmt::format("executor: {} (the fastest prediction that fits, {:.3f} s)",
                                    exec::executor_name(best->executor), best->step_s));
    return;
  }
  // On the CPU the log has no table (cpu_price_table), so its one
  // "executor:" line says why: the memory's line, which already names the
  // executor where the prediction agrees (resident, with no limit set);
  // else that line with the GPU's pick added, not a second line to square
  // with it.
  if (best->executor == choice.executor) return;
  const auto line = std::find_if(p.reasons.begin(), p.reasons.end(),
                                 [](const std::string& r) { return r.starts_with("executor: "); });
  const std::string why = fmt::format(
      "executor: {} ({}; of the executors that fit, {} is the fastest the cost model predicts "
      "for the hardware profile's GPU, whose choice a CPU run takes; `lazytrain plan` lists the "
      "predictions)",
      exec::executor_name(best->executor), choice.reason, exec::executor_name(best->executor));
  if (line == p.reasons.end()) {
    p.reasons.push_back(why);
  } else {
    *line = why;
  }
}

// Where the stages' masters and optimizer states live, and the disk
// traffic that costs a step at the profile's disk rates.
std::string describe_states(const TrainConfig& c, const models::ModelConfig& model,
                            const exec::TrainSizes& sizes) {
  const plan::HardwareProfile hw = configured_hardware(c);
  const bool on_disk = std::find(sizes.states_on_disk.begin(), sizes.states_on_disk.end(), true) !=
                       sizes.states_on_disk.end();
  // The rates price the disk's traffic: said only where there is some.
  return plan::describe_state_placement(model, sizes, hw.disk_read_gbps, hw.disk_write_gbps) +
         (!on_disk ? std::string()
          : c.exec.hardware.empty() || c.exec.hardware == kDefaultHardware
              ? " (the default disk rates)"
              : " (rates from " + c.exec.hardware + ")");
}

// Note [Profile by default] (train/hardware_cache.h): a GPU run that plans
// or compares executors and names no exec.hardware reads (or measures once)
// this machine's profile with the model's stage times. A run with a fixed
// executor and schedule only reads one a run before measured; without one
// it has no predicted step: the FLOP model predicts a 3B on the H200 ~25%
// short (issue 27), a figure to mislead rather than to hold a run to.
// exec.hardware: defaults asks for the FLOP model by name.
void use_measured_profile(TrainConfig& c, const models::ModelConfig& model, RunPlan& p) {
  if (!c.exec.hardware.empty() || !p.device.is_cuda()) return;
#ifdef LT_WITH_CUDA
  const std::string device_name = gpu_machine_identity(p.device.index);
  const std::string dir = hardware_cache_dir();
  const int64_t seq_len = c.train.seq_len;
  // Several ranks measure nothing: each would time its share of the
  // host's cores (launch splits them) and cache it as the host's.
  const bool ranks = dist::this_world().distributed();
  if ((c.exec.mode != "auto" && c.exec.schedule != "auto") || ranks) {
    const std::string path = cached_profile(dir, device_name, model, seq_len);
    if (path.empty() && ranks) {
      p.reasons.push_back(
          "hardware: no measured profile of this model here, and a run of several ranks measures "
          "none (its ranks share this host's cores): the FLOP model prices the plan; run "
          "`lazytrain profile --model` once in one process, or set exec.hardware");
      return;
    }
    p.reasons.push_back(path.empty()
                            ? std::string("hardware: no measured profile of this model here, so no "
                                          "step is predicted (exec.mode auto, or lazytrain profile "
                                          "--model, measures one; exec.hardware: defaults predicts "
                                          "with the FLOP model)")
                            : fmt::format("hardware: the measured profile {}", path));
    c.exec.hardware = p.cached_profile_path = path;
    return;
  }
  plan::ProfileOptions options;
  if (!c.exec.disk_path.empty()) options.disk_path = c.exec.disk_path;
  const CachedProfile cached = ensure_profile(dir, device_name, model, seq_len, [&] {
    print_text(
        stderr,
        fmt::format("hardware: measuring this machine ({}) and the model's stages for the plan "
                    "(once; kept in {})\n",
                    device_name, dir));
    plan::ProfileReport measured = plan::measure_profile_for_model(options, model, seq_len);
    // What was not measured, and why (a chunk size that would not fit the
    // GPU's free memory, working sets left to the estimate).
    for (const std::string& note : measured.notes)
      print_text(stderr, fmt::format("hardware: {}\n", note));
    return measured.profile;
  });
  for (const std::string& note : cached.notes) p.reasons.push_back("hardware: " + note);
  p.reasons.push_back(
      cached.measured_now
          ? fmt::format("hardware: measured in {:.0f} s into {} (exec.hardware: defaults skips it)",
                        cached.measure_seconds, cached.path)
          : fmt::format("hardware: the measured profile {} (exec.hardware: defaults skips it)",
                        cached.path));
  c.exec.hardware = p.cached_profile_path = cached.path;
#else
  (void)model;
#endif
}

// A schedule the planner did not choose (all_gpu or every_k as named, a
// schedule file) is priced by the planner's cost model with the run's
// profile, so that a streaming run on a GPU always has a prediction to
// hold its steps to; the plan line says which stage times priced it. A
// prediction that cannot be made is said, and the run goes on without it.
void price_named_schedule(const TrainConfig& c, const models::ModelConfig& model, RunPlan& p) {
  if (!plan::have_milp_solver()) return;
  // With several processes the trainer runs every stage streamed and the
  // head apart (stages on the device and the fused tail are for one).
  exec::Schedule runs = p.schedule;
  if (dist::this_world().distributed()) {
    runs.stages_on_device.clear();
    runs.tail_blocks = 0;
    runs.tail_chunk_sequences = 0;
  }
  plan::SchedulePrice price;
  try {
    price = plan::price_schedule(model, configured_hardware(c), p.sizes, runs,
                                 c.train.clip_with_previous_norm);
  } catch (const Error& e) {
    p.reasons.push_back(std::string("schedule: no predicted step (") + e.what() + ")");
    return;
  }
  take_prediction(c, price.prediction, price.stage_times_from, p);
  p.reasons.push_back(fmt::format(
      "schedule: predicted step {:.4f} s (compute {:.4f}, recompute {:.4f}, exposed copies "
      "{:.4f}, optimizer {:.4f}, the CPU updating {:.2f} G params/s; the planner's cost model, "
      "stage times: {})",
      price.prediction.step_s, price.prediction.compute_s, price.prediction.recompute_s,
      price.prediction.exposed_weights_s + price.prediction.exposed_activations_s,
      price.prediction.optimizer_s, price.prediction.cpu_update_params_per_s / 1e9,
      price.stage_times_from));
}

}  // namespace

Device resolve_train_device(const std::string& name) {
#ifdef LT_WITH_CUDA
  const int gpus = cuda::device_count();
  const char* missing = "no CUDA device is visible (cudaGetDeviceCount found none)";
#else
  const int gpus = 0;
  const char* missing = "this build has no CUDA backend (configure with -DLT_CUDA=ON)";
#endif
  if (name == "cpu" || (name == "auto" && gpus == 0)) return Device::cpu();
  LT_CHECK(gpus > 0, "train.device: cuda, but ", missing, "; use cpu or auto");
  return Device::cuda(0);
}

std::string whole_model_read_back_refusal(const RunPlan& p, const models::ModelConfig& model) {
  // Offload and ZenFlow evaluate and generate from the device's weights,
  // which sync() leaves whole (Note [Offload states on disk]): nothing is
  // read back. (Their schedule is empty: the count below is streaming's.)
  if (p.executor != exec::ExecutorKind::Streaming) return "";
  const std::vector<bool>& disk = p.sizes.states_on_disk;
  const auto on_disk = std::count(disk.begin(), disk.end(), true);
  if (on_disk == 0 || p.placement.host_budget_bytes < 0) return "";
  exec::TrainSizes whole = p.sizes;
  whole.states_on_disk.clear();
  const int64_t host = exec::bytes_needed(model, whole, p.schedule).bytes(exec::MemorySpace::Host);
  if (host <= p.placement.host_budget_bytes) return "";
  return fmt::format(
      "{} of {} stages' master weights and optimizer states are on disk, and reading them all "
      "back needs {:.4g} GB of host memory, over the {:.4g} GB the run plans within",
      on_disk, disk.size(), static_cast<double>(host) / 1e9,
      static_cast<double>(p.placement.host_budget_bytes) / 1e9);
}

namespace {

// resolve_run less its check of the host memory.
RunPlan plan_run(const TrainConfig& requested, const models::ModelConfig& model,
                 PlanTarget target) {
  try {
    models::check_seq_len_fits(requested.train.seq_len, "config key 'train.seq_len'", model,
                               requested.model.path);
  } catch (const Error& e) {
    // Where the value came from (its default, when nothing set it) and
    // what would run.
    const auto origin = requested.key_origins.find("train.seq_len");
    fail(origin != requested.key_origins.end() ? origin->second + ": " : std::string(), e.what(),
         origin != requested.key_origins.end() ? " (" : " (train.seq_len is its default; ",
         "set it to at most ", model.exact_context(),
         ", e.g. --set train.seq_len=", model.exact_context(), ")");
  }
  RunPlan p;
  // exec.hardware: defaults plans for the built-in figures' GPU (an
  // H200's) as a named profile plans for its own; it was refused here,
  // for want of a GPU on this machine.
  const bool elsewhere = target == PlanTarget::ProfiledGpu && requested.train.device == "cuda" &&
                         !requested.exec.hardware.empty() && !cuda_device_visible();
  p.device = elsewhere ? Device::cuda(0) : resolve_train_device(requested.train.device);
  p.free_memory_of = elsewhere ? FreeMemoryOf::TheProfile : FreeMemoryOf::ThisMachine;
  if (elsewhere) {
    p.reasons.push_back("device: planned for the GPU of " + configured_hardware_name(requested) +
                        " (this machine has none)");
  }
  TrainConfig c = requested;  // train.dtype auto resolved for the helpers below
  c.train.dtype = resolve_compute_dtype(c.train.dtype, p.device.is_cuda());
  LT_CHECK(c.train.dtype == "f32" || p.device.is_cuda(),
           "train.dtype: bf16 compute needs train.device cuda; on the CPU use f32");
  p.compute_dtype = dtype_from_name(c.train.dtype);
  p.reasons.push_back(fmt::format("device: {} (train.device {}), computing in {}", p.device.str(),
                                  c.train.device, c.train.dtype));
  p.optimizer =
      c.optim.name == "adamw8bit" ? exec::OptimizerStates::EightBit : exec::OptimizerStates::Fp32;
  p.optimizer_block = c.optim.block_size;
  p.min_8bit_numel = c.optim.min_8bit_numel;
  const NoDecay no_decay = resolve_no_decay(model, c.optim.no_decay);
  p.no_decay = no_decay.substrings;
  // Said of patterns the user wrote: the default [bias, norm] names biases
  // that most models (Llama, Qwen3) do not have. A resume's saved
  // train_config.yaml sets every key, the default among them: not said.
  if (!no_decay.unmatched.empty() && c.key_origins.count("optim.no_decay") > 0 &&
      c.optim.no_decay != TrainConfig{}.optim.no_decay) {
    const std::vector<models::HfRule> rules = models::hf_rules(model);
    const auto first_block = std::find_if(rules.begin(), rules.end(), [](const auto& r) {
      return r.hf_name.find(".0.") != std::string::npos;
    });
    p.reasons.push_back(fmt::format(
        "warning: optim.no_decay: {} match{} no parameter name of this model, as the checkpoint "
        "names them (e.g. {}) or as lazytrain does (e.g. {}), so {} nothing{}",
        fmt::join(no_decay.unmatched, ", "), no_decay.unmatched.size() == 1 ? "es" : "",
        first_block->hf_name, first_block->internal.front(),
        no_decay.unmatched.size() == 1 ? "it keeps from weight decay"
                                       : "they keep from weight decay",
        // A typo all the same, though this run decays nothing to keep from.
        c.optim.weight_decay == 0 ? " (a likely typo; with optim.weight_decay 0 nothing decays "
                                    "in this run anyway)"
                                  : ""));
  }
  p.grad_accum = c.train.grad_accum;
  p.accum_sequences = c.train.batch_size / c.train.grad_accum;
  // exec.micro_batch, the streaming chunk the user asks for, settled here
  // once and passed down (to the planner, the budget and the schedule the
  // executor runs); no layer below reads it from the config again. Never
  // more than a micro-batch: the executor splits each micro-batch, never
  // joins them. 0: the schedule's chunk, or the planner's choice.
  const int64_t asked_chunk =
      c.exec.micro_batch > 0 ? std::min(c.exec.micro_batch, p.accum_sequences) : 0;

  use_measured_profile(c, model, p);
  const ExecutorChoice choice = choose_for_run(c, model, p.device);
  p.executor = choice.executor;
  p.reasons.push_back(
      fmt::format("executor: {} ({})", exec::executor_name(choice.executor), choice.reason));
  const std::vector<ExecutorCandidate> candidates =
      whole_model_candidates(c, model, p.device, choice);
  // The planner counts the states' placement in the host memory it leaves
  // the boundaries, so it is settled first, for the schedule that keeps
  // every boundary on the device (the planner's host count: the fixed bytes
  // and its disk transit buffers). A named schedule's is settled below.
  std::vector<std::string> planned_placement;
  const bool may_plan = c.exec.schedule == "auto" || c.exec.mode == "auto";
  if (choice.executor == exec::ExecutorKind::Streaming && may_plan) {
    p.sizes = streaming_sizes(c, p.device.is_cpu());
    const int64_t transit = exec::kMaxDiskTransitBuffers * exec::boundary_bytes(model, p.sizes);
    p.placement = resolve_host_placement(
        c, model, p.sizes, exec::Schedule::all_gpu(static_cast<int>(model.num_hidden_layers)),
        transit, p.free_memory_of, planned_placement);
    p.sizes.states_on_disk = p.placement.states_on_disk;
    p.sizes.f32_weight_uploads = p.placement.f32_weight_uploads;
  }
  std::optional<plan::Plan> planned;  // the planner's, made once
  if (c.exec.mode == "auto") choose_fastest(c, model, choice, candidates, asked_chunk, planned, p);
  // The executor cost model is of a GPU (the profile's): a CPU run gets no
  // prediction from it.
  // On a GPU, only with a profile (measured, named, or defaults by name):
  // an empty exec.hardware here is use_measured_profile finding none.
  const bool priced = !c.exec.hardware.empty();
  if (p.device.is_cuda() && priced && p.executor != exec::ExecutorKind::Streaming) {
    for (const ExecutorCandidate& e : candidates)
      if (e.executor == p.executor) p.predicted_step_s = e.step_s;
  }
  LT_CHECK(c.exec.state_placement != "disk" || p.executor != exec::ExecutorKind::Resident,
           "exec.state_placement: disk keeps the masters and optimizer states of a CPU-master "
           "executor (streaming, offload, zenflow) on disk; this run's executor is ",
           exec::executor_name(p.executor),
           " (set exec.mode: streaming or offload, or exec.state_placement: host)");
  LT_CHECK(!c.train.clip_with_previous_norm || p.executor == exec::ExecutorKind::Resident ||
               p.executor == exec::ExecutorKind::Streaming,
           "train.clip_with_previous_norm: true is for exec.mode resident or streaming; this "
           "run's executor is ",
           exec::executor_name(p.executor),
           " (set train.clip_with_previous_norm: false, or exec.mode: streaming)");
  if (c.train.clip_with_previous_norm && c.train.grad_clip > 0) {
    p.reasons.push_back(
        p.executor == exec::ExecutorKind::Streaming
            ? "clipping: with the previous step's gradient norm (train.clip_with_previous_norm), "
              "so each stage updates as its gradients land, during the backward"
            : "clipping: with the previous step's gradient norm (train.clip_with_previous_norm)");
  }
  // The whole-model executors take whole micro-batches: a chunk asked of
  // them was dropped without a word.
  if (c.exec.micro_batch > 0 && p.executor != exec::ExecutorKind::Streaming)
    p.reasons.push_back(fmt::format(
        "exec.micro_batch {}: not used by the {} executor, which runs whole micro-batches of {} "
        "sequences (train.batch_size {} / train.grad_accum {}); it chunks the streaming "
        "executor's; for fewer sequences at a time raise train.grad_accum",
        c.exec.micro_batch, exec::executor_name(p.executor), p.accum_sequences, c.train.batch_size,
        p.grad_accum));
  if (p.executor == exec::ExecutorKind::Resident) {
    // exec.mode auto held resident to the device's memory; as set, nothing
    // else does before the first step runs out of it.
    if (c.exec.mode == "resident") {
      const ResidentSetFit fit = resident_set_fit(c, model, p.device);
      if (!fit.refusal.empty()) fail_does_not_fit(fit.refusal);
      if (!fit.warning.empty()) p.reasons.push_back(fit.warning);
    }
    p.budget = resident_budget(c, model, p.device.is_cuda());
    p.sizes = streaming_sizes(c, p.device.is_cpu());
    p.sizes.compute_bytes = static_cast<int64_t>(dtype_size(p.compute_dtype));
    return p;
  }
  if (p.executor == exec::ExecutorKind::Offload || p.executor == exec::ExecutorKind::ZenFlow) {
    const bool zen = p.executor == exec::ExecutorKind::ZenFlow;
    LT_CHECK(p.device.is_cpu() || p.compute_dtype == DType::BF16, "train.dtype: exec.mode ",
             exec::executor_name(p.executor),
             " on a GPU computes in bf16 (the host keeps the f32 masters); set bf16, got ",
             c.train.dtype);
    p.sizes = streaming_sizes(c, p.device.is_cpu());
    const double topk = zen ? c.exec.zenflow.topk_ratio : 0.0;
    p.placement = resolve_offload_placement(c, model, p.sizes, p.accum_sequences, topk,
                                            p.free_memory_of, p.reasons);
    p.sizes.states_on_disk = p.placement.states_on_disk;
    p.budget = exec::offload_bytes_needed(model, p.sizes, p.accum_sequences, topk);
    if (c.exec.mode != "auto") check_offload_set_fits(c, model, p);
    p.reasons.push_back(describe_states(c, model, p.sizes));
    p.state_traffic = plan::state_traffic(model, p.sizes);
    // The synchronous step waits for its disk stages; ZenFlow's CPU update
    // runs beside a window of steps (not predicted here).
    if (!zen)
      p.predicted_state_disk_s = offload_state_disk_s(configured_hardware(c), model, p.sizes);
    if (p.predicted_step_s > 0) p.predicted_step_s += p.predicted_state_disk_s;
    return p;
  }
  LT_CHECK(p.device.is_cpu() || p.compute_dtype == DType::BF16,
           "train.dtype: the streaming executor (", choice.reason, ") on train.device ",
           c.train.device, " computes in bf16 (the host keeps the f32 masters); set bf16, got ",
           c.train.dtype);
  p.sizes = streaming_sizes(c, p.device.is_cpu());
  p.sizes.states_on_disk = p.placement.states_on_disk;
  p.sizes.f32_weight_uploads = p.placement.f32_weight_uploads;
  // Said here, where the chunk is used (the other executors take whole
  // micro-batches), once.
  if (c.exec.micro_batch > p.accum_sequences) {
    p.reasons.push_back(plan::chunk_past_sequences_line(
        "exec.micro_batch", c.exec.micro_batch, p.accum_sequences,
        p.grad_accum > 1 ? fmt::format("a micro-batch (train.batch_size {} / train.grad_accum {})",
                                       c.train.batch_size, p.grad_accum)
                         : std::string("train.batch_size"),
        p.grad_accum > 1 ? "micro-batch" : "batch"));
  }
  choose_schedule(c, model, choice, asked_chunk, planned, p);
  if (!p.plan_description.empty()) {  // the planner's, with the placement it planned for
    p.reasons.insert(p.reasons.end(), planned_placement.begin(), planned_placement.end());
  } else {
    p.placement =
        resolve_host_placement(c, model, p.sizes, p.schedule, 0, p.free_memory_of, p.reasons);
    p.sizes.states_on_disk = p.placement.states_on_disk;
    p.sizes.f32_weight_uploads = p.placement.f32_weight_uploads;
  }
  p.reasons.push_back(describe_states(c, model, p.sizes));
  // The chunk: exec.micro_batch (asked_chunk), else the schedule's (a
  // file's, or the planner's choice), else a whole micro-batch.
  const int64_t asked =
      p.schedule.chunk_sequences > 0 ? p.schedule.chunk_sequences : p.accum_sequences;
  p.chunk_sequences = std::min(asked, p.accum_sequences);
  const bool chunk_changed = p.schedule.chunk_sequences != p.chunk_sequences;
  p.schedule.chunk_sequences = p.chunk_sequences;
  // The planner's count stands (it has the measured working sets) unless
  // the chunk changed under it.
  p.state_traffic = plan::state_traffic(model, p.sizes);
  if (p.budget.items.empty() || chunk_changed)
    p.budget = exec::bytes_needed(model, p.sizes, p.schedule);
  if (p.predicted_step_s == 0 && p.device.is_cuda() && priced) price_named_schedule(c, model, p);
  return p;
}

// The step's token ids and targets, which a GPU run's batcher makes on
// the host (on the CPU they are among the plan's device bytes).
int64_t step_token_bytes(const TrainConfig& c, const RunPlan& p) {
  exec::TrainSizes step = p.sizes;
  step.batch_size = c.train.batch_size;
  step.seq_len = c.train.seq_len;
  return exec::token_bytes(step);
}

// The host bytes Note [The plan in host memory] counts for plan `p`: on
// the CPU, all of a resident plan's; on a GPU, its host space and the
// step's token ids and targets. -1 for a CPU-master executor on the CPU,
// whose host space its placement fitted.
int64_t host_bytes_counted(const TrainConfig& c, const RunPlan& p) {
  using enum exec::MemorySpace;
  if (!p.device.is_cpu()) return p.budget.bytes(Host) + step_token_bytes(c, p);
  if (p.executor != exec::ExecutorKind::Resident) return -1;
  return p.budget.bytes(Host) + p.budget.bytes(Gpu);
}

// What to change when a plan is short of host memory: the keys that size
// its batch.
std::string batch_keys_advice(const TrainConfig& c, const RunPlan& p) {
  // The activations are a micro-batch's; a step's ids are all its
  // micro-batches' at once.
  const bool fewer_per_micro_batch = p.device.is_cpu() && p.accum_sequences > 1;
  return "Lower train.batch_size or train.seq_len" +
         (fewer_per_micro_batch
              ? fmt::format(", or raise train.grad_accum ({} now): the activations are those of "
                            "one micro-batch, train.batch_size / train.grad_accum = {} sequences",
                            c.train.grad_accum, p.accum_sequences)
              : std::string());
}

}  // namespace

// Note [The plan in host memory]: on the CPU the device is the host, so
// every byte of the resident plan is host memory, and exec.mode auto
// compares it with nothing there (choose_for_run: no limit). A
// train.batch_size of 10^9 on the demo planned 760 TB as "resident fits",
// then failed in a host allocation of its first batch that named no key,
// with out.dir written. On a GPU, and for a CPU-master executor on the CPU
// stand-in, the plan's host space (masters, states, pinned buffers,
// boundaries) is fitted to the host budget by the placement
// (train/state_placement.h) and the planner; the stand-in's device space
// is capped by exec.device_memory_gb. Not counted on a GPU are the step's
// token ids and targets, which the batcher makes on the host for every
// micro-batch of a step before they are copied. A plan whose host bytes,
// so counted, exceed what is free now is refused here, before the weights
// load and anything is written to out.dir, naming the keys that size the
// batch (or the model, when one sequence a step is too many). A plan for
// another machine's GPU (PlanTarget::ProfiledGpu) has no free memory here
// to compare with.
//
// The count is of tensors. On the CPU it is the resident executor's
// allocator peak to within a few vectors (exec/memory_budget.h;
// memory_budget_test.cpp holds it to 2%): the demo at train.batch_size
// 100, 1000 and 10000 counted 65.71, 600.75 and 5901.94 MB, and measured
// 65.29, 600.34 and 5901.93 MB. (The count of f45b01c, one block's saved
// tensors more for a block's backward, beside the head step's transients,
// ran 30% high: 7.68 GB at 10000, which a refusal only past 1.5 times the
// free memory made up for.) The process holds more than its tensors, so
// a count past the free memory cannot fit, and one that the heap's share
// (host_heap_share) takes past it may not: that is warned about.
std::string host_memory_shortfall(const TrainConfig& c, const models::ModelConfig& model,
                                  const RunPlan& p, int64_t free_bytes) {
  using enum exec::MemorySpace;
  const bool on_cpu = p.device.is_cpu();
  const int64_t needed = host_bytes_counted(c, p);
  if (needed < 0 || free_bytes < 0 || needed <= free_bytes) return "";
  // What no batch makes smaller is the model's to say.
  if (on_cpu) {
    TrainConfig one = c;
    one.train.batch_size = one.train.grad_accum = 1;
    const int64_t least = resident_budget(one, model, false).bytes(Gpu);
    if (least > free_bytes)
      return fmt::format(
          "the model of '{}' ({} parameters; its f32 weights, gradients and optimizer states, and "
          "one sequence a step) needs {} of host memory, more than the {} free now, to train on "
          "the CPU",
          models::model_config_file(c.model.path), model.num_parameters(), bytes_text(least),
          bytes_text(free_bytes));
  }
  std::string parts;
  if (on_cpu) {
    const exec::MemoryItem* largest = nullptr;
    for (const exec::MemoryItem& item : p.budget.items)
      if (item.space == Gpu && (!largest || item.bytes > largest->bytes)) largest = &item;
    parts = " (on the CPU the device's memory is the host's" +
            (largest ? "; its largest part: " + largest->what + ", " + bytes_text(largest->bytes)
                     : std::string()) +
            ")";
  } else {
    parts = fmt::format(
        " (its host part, {}, and the step's token ids and targets, {}, which the batcher makes "
        "on the host)",
        bytes_text(p.budget.bytes(Host)), bytes_text(step_token_bytes(c, p)));
  }
  return fmt::format(
      "{}train.batch_size {} sequences of train.seq_len {} tokens: the run's plan (executor {} on "
      "{}) needs {} of host memory{}, more than the {} free now. {}",
      c.where_set("train.batch_size"), c.train.batch_size, c.train.seq_len,
      exec::executor_name(p.executor), p.device.str(), bytes_text(needed), parts,
      bytes_text(free_bytes), batch_keys_advice(c, p));
}

double host_heap_share(const TrainConfig& c, const models::ModelConfig& model, const RunPlan& p) {
  if (!p.device.is_cpu()) return kHostHeapShareOfLargeTensors;
  const int64_t hidden_tensor = p.accum_sequences * c.train.seq_len * model.hidden_size *
                                static_cast<int64_t>(dtype_size(p.compute_dtype));
  return hidden_tensor >= static_cast<int64_t>(CpuAllocator::kOwnMappingFrom)
             ? kHostHeapShareOfLargeTensors
             : kHostHeapShareOfSmallTensors;
}

std::string host_memory_warning(const TrainConfig& c, const models::ModelConfig& model,
                                const RunPlan& p, int64_t free_bytes) {
  const int64_t needed = host_bytes_counted(c, p);
  const double share = host_heap_share(c, model, p);
  if (needed < 0 || free_bytes < 0 || needed > free_bytes ||
      static_cast<double>(needed) * (1 + share) <= static_cast<double>(free_bytes))
    return "";
  return fmt::format(
      "the run's plan (executor {} on {}) counts {} of host memory in tensors, and {} is free now; "
      "processes held {:.0f}% more than their tensors, and beyond, in the C library's heap{} "
      "(Note [The plan in host memory]), so the run may run out of memory. If it does: {}",
      exec::executor_name(p.executor), p.device.str(), bytes_text(needed), bytes_text(free_bytes),
      100 * share,
      share == kHostHeapShareOfLargeTensors
          ? std::string()
          : " when, as here, a micro-batch's [tokens x hidden] tensors were under 32 MiB",
      batch_keys_advice(c, p));
}

RunPlan resolve_run(const TrainConfig& requested, const models::ModelConfig& model,
                    PlanTarget target) {
  RunPlan p = plan_run(requested, model, target);
  // Note [The plan in host memory]; this machine's free memory is no
  // limit of a plan for another's GPU.
  if (p.free_memory_of == FreeMemoryOf::ThisMachine) {
    const int64_t free = host_bytes_for_this_process(cpu_allocator().stats().current_bytes, 0);
    const std::string shortfall = host_memory_shortfall(requested, model, p, free);
    LT_CHECK(shortfall.empty(), shortfall);
    const std::string close = host_memory_warning(requested, model, p, free);
    if (!close.empty()) p.reasons.push_back("warning: " + close);
  }
  return p;
}

}  // namespace lt::train
