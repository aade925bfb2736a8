// `lazytrain plan`: solve the LazyTrain MILP for a model on a machine and
// print (or write) the Schedule.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/shell_expanded_path.h"
#include "core/error.h"
#include "exec/schedule.h"
#include "io/atomic_file.h"
#include "io/hf_folder.h"
#include "models/context_limit.h"
#include "plan/data_parallel.h"
#include "plan/planner.h"
#include "train/config.h"
#include "train/executor_choice.h"
#include "train/report.h"
#include "train/run_plan.h"
#include "train/run_setup.h"

namespace lt::cli {

models::ModelConfig load_model_config(const std::string& path, const std::string& named_by) {
  LT_CHECK(std::filesystem::exists(path), path, ": no such file or folder (expected a Hugging ",
           "Face model folder or a config.json)");
  check_model_folder(path, named_by);
  return models::ModelConfig::from_file(models::model_config_file(path));
}

void check_model_folder(const std::string& path, const std::string& named_by) {
  if (std::filesystem::is_directory(path))
    if (const std::string why = io::not_a_model_folder(path); !why.empty()) fail(named_by, why);
}

int64_t default_seq_len(const models::ModelConfig& config) {
  return std::min(kDefaultSeqLen, config.exact_context());
}

namespace {

struct PlanArgs {
  std::string model;
  std::string hardware;
  int64_t batch_size = 0;
  int64_t seq_len = 0;  // left out: default_seq_len
  int64_t micro_batch = 0;
  int max_recompute = 8;
  double time_limit_s = 60;
  std::string optimizer = "adamw";
  bool json = false;
  std::string out;
  std::string config;  // a train config: print the run plan `train` would run
  std::vector<std::string> overrides;
  int gpus = 1;  // data parallel: plan a rank's share of the batch, and the collectives
  int gpus_per_node = 8;
  bool clip_with_previous_norm = false;  // train.clip_with_previous_norm's pipeline
  bool stream_every_stage = false;       // PlanOptions::stages_on_device false
  bool apart_tail = false;               // PlanOptions::fused_tail false
};

// `--gpus N`: the plan above is one rank's; what data parallel adds.
// `zero`: the same rank's plan priced as ZeRO-1 updates (each rank 1/N of
// the parameters).
nlohmann::json print_data_parallel(const plan::Plan& r, const plan::Plan& zero,
                                   const PlanArgs& args, const plan::HardwareProfile& hw,
                                   const models::ModelConfig& config, exec::OptimizerStates opt,
                                   int64_t optimizer_block) {
  plan::DataParallelOptions o;
  o.gpus = args.gpus;
  o.gpus_per_node = args.gpus_per_node;
  o.link_gbps = hw.link_gbps;
  o.node_link_gbps = hw.node_link_gbps;
  o.optimizer = opt;
  o.optimizer_block = optimizer_block;
  const int64_t host = r.budget.bytes(exec::MemorySpace::Host);
  const plan::DataParallelPlan d = plan::plan_data_parallel(config, o, host);
  const auto gb = [](int64_t bytes) { return static_cast<double>(bytes) / plan::kBytesPerGB; };
  const double step_s = r.prediction.step_s + d.collectives_s;
  // Every rank's tokens in the step of the slowest.
  const auto global_tokens_per_s = [&](double s) {
    return s > 0 ? static_cast<double>(d.gpus * r.schedule.batch_size * r.sizes.seq_len) / s : 0;
  };
  const double tokens_per_s = global_tokens_per_s(step_s);
  const double zero_step_s = zero.prediction.step_s + d.collectives_s;
  nlohmann::json j = {{"gpus", d.gpus},
                      {"nodes", d.nodes},
                      {"ranks_per_node", d.ranks_per_node},
                      {"global_batch_size", r.schedule.batch_size * d.gpus},
                      {"rank_batch_size", r.schedule.batch_size},
                      {"gpu_bytes_per_rank", r.budget.bytes(exec::MemorySpace::Gpu)},
                      {"host_bytes_per_rank", host},
                      {"host_bytes_per_node", d.host_bytes_per_node},
                      {"bus_gbps", d.bus_gbps},
                      {"link_from", d.link_from},
                      {"traffic_bytes_per_rank", d.traffic_bytes},
                      {"collectives_s", d.collectives_s},
                      {"step_s", step_s},
                      {"tokens_per_s", tokens_per_s},
                      {"zero1_saves_host_bytes_per_rank", d.zero_saves_bytes_per_rank},
                      {"zero1_host_bytes_per_node", d.zero_host_bytes_per_node},
                      {"zero1_step_s", zero_step_s},
                      {"zero1_tokens_per_s", global_tokens_per_s(zero_step_s)}};
  if (args.json) return j;
  fmt::print(
      "data parallel: {} GPUs ({} node{} of {}), global batch {} = {} x the batch above\n"
      "  per rank: gpu {:.2f} GB, host {:.2f} GB; per node: host {:.2f} GB ({} ranks)\n"
      "  collectives a step: {:.3f} GB per rank (all-reduce of the bf16 gradients, or ZeRO-1's "
      "reduce-scatter + all-gather) over {:.0f} GB/s ({}): {:.3f} s\n"
      "  predicted step <= {:.3f} s ({:.0f} tokens/s): the rank's step + the collectives, not "
      "overlapped\n"
      "  ZeRO-1 (dist.zero 1; the CPU-master executors) would keep {:.2f} GB "
      "less optimizer state per rank: host {:.2f} GB per node{}; each rank updating 1/{} of the "
      "parameters: predicted step <= {:.3f} s ({:.0f} tokens/s)\n"
      "{}",
      d.gpus, d.nodes, d.nodes > 1 ? "s" : "", d.ranks_per_node, r.schedule.batch_size * d.gpus,
      d.gpus, gb(r.budget.bytes(exec::MemorySpace::Gpu)), gb(host), gb(d.host_bytes_per_node),
      d.ranks_per_node, gb(d.traffic_bytes), d.bus_gbps, d.link_from, d.collectives_s, step_s,
      tokens_per_s, gb(d.zero_saves_bytes_per_rank), gb(d.zero_host_bytes_per_node),
      d.ranks_per_node > 1
          ? " (each node's ranks sharing one copy of the weights: dist.share_weights)"
          : "",
      d.gpus, zero_step_s, global_tokens_per_s(zero_step_s),
      d.ranks_per_node > 1
          ? fmt::format("  CPU updates priced at 1/{} of the profile's rates and host memory "
                        "bandwidth: a node's ranks share its cores and memory\n",
                        d.ranks_per_node)
          : std::string());
  return j;
}

// Note [Plan flags with --config]: with a train config, the flags that
// shape a --model plan set the run's keys, as train's --set does: a user
// who gives --seq-len 512 expects the plan of 512 tokens, and each of these
// flags means what its key means (--micro-batch is exec.micro_batch, the
// chunk). They used to be dropped without a word. A flag and a --set of its
// key are refused (neither silently wins), and so are the flags that have
// no key: the solver's limits and data parallel's --gpus, which a run takes
// from `lazytrain launch`.
std::vector<std::string> config_overrides(const PlanArgs& args, const CLI::App& cmd) {
  const plan::PlanOptions run_plans;  // as a run's plan_for_run leaves them
  // With neither --config nor --model the demo's config is planned.
  const std::string with_config = args.config.empty()
                                      ? "leave it out for the demo's run plan, or give --model"
                                      : "leave it out with --config";
  for (const auto& [flag, run_takes] :
       {std::pair<const char*, std::string>{
            "--max-recompute",
            fmt::format("at most {} blocks between kept boundaries", run_plans.max_recompute)},
        {"--time-limit", fmt::format("{:g} s", run_plans.time_limit_s)}}) {
    LT_CHECK(cmd.count(flag) == 0, flag,
             " is for a plan of --model: a train config has no key for it (a run's planner takes ",
             run_takes, "); ", with_config);
  }
  for (const char* flag : {"--gpus", "--gpus-per-node"}) {
    LT_CHECK(cmd.count(flag) == 0, flag,
             " is for a plan of --model: with --config the plan is of one process, as `lazytrain "
             "train` runs it (a data-parallel run's ranks come from `lazytrain launch`); ",
             with_config);
  }
  std::vector<std::pair<const char*, std::string>> flags;  // flag, key=value
  const auto given = [&](const char* flag) { return cmd.count(flag) > 0; };
  if (given("--batch-size"))
    flags.emplace_back("--batch-size", fmt::format("train.batch_size={}", args.batch_size));
  if (given("--seq-len"))
    flags.emplace_back("--seq-len", fmt::format("train.seq_len={}", args.seq_len));
  if (given("--micro-batch"))
    flags.emplace_back("--micro-batch", fmt::format("exec.micro_batch={}", args.micro_batch));
  // Quoted as JSON strings, which YAML reads as they are.
  if (given("--hardware"))
    flags.emplace_back("--hardware", "exec.hardware=" + nlohmann::json(args.hardware).dump());
  if (given("--optimizer"))
    flags.emplace_back("--optimizer", "optim.name=" + nlohmann::json(args.optimizer).dump());
  if (args.clip_with_previous_norm)
    flags.emplace_back("--clip-with-previous-norm", "train.clip_with_previous_norm=true");
  if (args.stream_every_stage)
    flags.emplace_back("--stream-every-stage", "exec.stages_on_device=none");
  if (args.apart_tail) flags.emplace_back("--no-fused-tail", "exec.fused_tail=off");
  std::vector<std::string> overrides;
  for (const auto& [flag, assignment] : flags) {
    const std::string key = assignment.substr(0, assignment.find('=') + 1);  // "train.seq_len="
    for (const std::string& o : args.overrides) {
      LT_CHECK(o.rfind(key, 0) != 0, flag, " and --set ", o, " both set ",
               key.substr(0, key.size() - 1), ": give one");
    }
    overrides.push_back(assignment);
  }
  overrides.insert(overrides.end(), args.overrides.begin(), args.overrides.end());
  return overrides;
}

// `plan --config run.yaml`: the RunPlan `lazytrain train run.yaml` resolves
// (train::resolve_run, the same call), printed instead of run; the flags
// set their keys (Note [Plan flags with --config]).
void print_run_plan(const PlanArgs& args, const CLI::App& cmd) {
  // The data is not read: a recipe plans before its data is there.
  for (const std::string& w : train::overrides_given_twice(args.overrides))
    fmt::print(stderr, "{}\n", w);
  train::TrainConfig c = train::load_train_config(args.config, config_overrides(args, cmd),
                                                  train::DataFiles::kNotRead);
  for (const std::string& w : c.comment_warnings()) fmt::print(stderr, "{}\n", w);
  // train.seq_len left at its default runs at a shorter model's context,
  // as train runs it (plan refused the default there).
  if (const std::string note = train::fit_default_seq_len(c); !note.empty())
    fmt::print(stderr, "config: {}\n", note);
  // What train says of its config at the start (a key that does nothing, a
  // rate far outside the usual), said before the plan too.
  for (const std::string& note : c.adjustments()) fmt::print(stderr, "config: {}\n", note);
  if (const std::string lr = c.learning_rate_warning(); !lr.empty()) fmt::print(stderr, "{}\n", lr);
  // A plan of exit 0 read as "train will run" (a review found configs with
  // no data file or a tokenizer too large for the model planned quietly).
  const std::vector<std::string> missing = train::input_files_not_there(c);
  fmt::print(stderr,
             "plan: not checked here, as train checks them when it starts: the data's rows, the "
             "tokenizer against the model, out.dir's earlier runs{}\n",
             missing.empty() ? "" : fmt::format("; not there now: {}", fmt::join(missing, ", ")));
  if (!args.out.empty()) io::check_can_write(args.out, "--out");  // before the solve
  const models::ModelConfig model = load_model_config(c.model.path, "config key 'model.path': ");
  // With --json a run that does not fit its memory is an answer, as `plan
  // --model` gives it: {"feasible": false, ...} and status 3; any other
  // error (a missing file, keys that do not go together) stays status 1.
  train::RunPlan p;
  try {
    p = train::resolve_run(c, model, train::PlanTarget::ProfiledGpu);
  } catch (const DoesNotFit& e) {
    if (!args.json) throw;
    fmt::print("{}\n", nlohmann::json({{"feasible", false}, {"error", e.what()}}).dump(2));
    fmt::print(stderr, "lazytrain: error: {}\n", e.what());
    throw CLI::RuntimeError(3);
  }
  // The schedule the run would take, to give it as exec.schedule.
  LT_CHECK(args.out.empty() || p.executor == exec::ExecutorKind::Streaming,
           "--out writes the streaming executor's schedule; this run's executor is ",
           exec::executor_name(p.executor), ", which has none");
  if (!args.out.empty()) exec::save_schedule(p.schedule, args.out);
  const auto gb = [](int64_t bytes) { return static_cast<double>(bytes) / plan::kBytesPerGB; };
  if (args.json) {
    nlohmann::json j;
    // The keys `plan --model --json` shares, under its names.
    j["feasible"] = true;
    j["device"] = p.device.str();
    j["compute_dtype"] = dtype_name(p.compute_dtype);
    j["executor"] = exec::executor_name(p.executor);
    j["optimizer"] = p.optimizer == exec::OptimizerStates::Fp32 ? "adamw" : "adamw8bit";
    j["batch_size"] = p.sizes.batch_size;
    j["seq_len"] = p.sizes.seq_len;
    j["grad_accum"] = p.grad_accum;
    j["accum_sequences"] = p.accum_sequences;
    // Sequences through a stage at once: a streaming chunk, else the
    // whole micro-batch.
    j["micro_batch"] =
        p.executor == exec::ExecutorKind::Streaming ? p.chunk_sequences : p.accum_sequences;
    if (p.executor == exec::ExecutorKind::Streaming) {
      j["chunk_sequences"] = p.chunk_sequences;
      j["schedule"] = exec::to_json(p.schedule);
    }
    // null: no prediction (why is among the reasons).
    j["predicted_step_s"] = p.predicted_step_s > 0 ? nlohmann::json(p.predicted_step_s) : nullptr;
    j["predicted_tokens_per_s"] =
        p.predicted_step_s > 0
            ? nlohmann::json(static_cast<double>(p.sizes.batch_size * p.sizes.seq_len) /
                             p.predicted_step_s)
            : nullptr;
    if (p.executor != exec::ExecutorKind::Resident) {
      // exec.state_placement: the stages (0: embed, 1..L: blocks, L + 1:
      // head) whose masters and optimizer states live on disk.
      nlohmann::json on_disk = nlohmann::json::array();
      for (size_t s = 0; s < p.sizes.states_on_disk.size(); ++s)
        if (p.sizes.states_on_disk[s]) on_disk.push_back(s);
      j["states_on_disk"] = {{"stages", on_disk},
                             {"read_bytes_per_step", p.state_traffic.read_bytes},
                             {"write_bytes_per_step", p.state_traffic.write_bytes},
                             {"predicted_exposed_s", p.predicted_state_disk_s}};
      if (p.device.is_cuda() && p.executor == exec::ExecutorKind::Streaming)
        j["weight_uploads"] = p.sizes.f32_weight_uploads ? "f32" : "bf16";
    }
    for (auto space : {exec::MemorySpace::Gpu, exec::MemorySpace::Host, exec::MemorySpace::Disk})
      j["peak_bytes"][train::memory_space_label(space, p.device)] = p.budget.bytes(space);
    j["reasons"] = p.reasons;
    if (!p.cpu_price_table.empty()) j["cpu_price_table"] = p.cpu_price_table;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  for (const auto& line : p.reasons) fmt::print("{}\n", line);
  for (const auto& line : p.cpu_price_table) fmt::print("{}\n", line);
  if (!p.plan_description.empty()) fmt::print("{}\n", p.plan_description);
  fmt::print("batch {} x seq {}: {} micro-batch(es) of {} sequences", p.sizes.batch_size,
             p.sizes.seq_len, p.grad_accum, p.accum_sequences);
  if (p.executor == exec::ExecutorKind::Streaming)
    fmt::print(", through each stage in chunks of {}", p.chunk_sequences);
  // On the CPU the device's bytes are host memory under the device's budget.
  fmt::print("\nbytes: {}{} {:.3f} GB, host {:.3f} GB, disk {:.3f} GB\n",
             train::memory_space_label(exec::MemorySpace::Gpu, p.device),
             p.device.is_cuda() ? "" : " (host memory)", gb(p.budget.bytes(exec::MemorySpace::Gpu)),
             gb(p.budget.bytes(exec::MemorySpace::Host)),
             gb(p.budget.bytes(exec::MemorySpace::Disk)));
  for (const auto& item : p.budget.items)
    fmt::print("  {:<6} {:>10.3f} GB  {}\n", train::memory_space_label(item.space, p.device),
               gb(item.bytes), item.what);
  if (!args.out.empty()) fmt::print("schedule written to {}\n", args.out);
}

// The executor `train` with exec.mode auto would run on this machine (its
// gpu_memory_gb), for the plan's batch size (or --batch-size) with one
// forward over the plan's chunk (or --micro-batch; else the whole batch):
// resident when it fits with the margin, else streaming when the plan is
// feasible, else none. Resident computes in bf16 beside f32 masters.
// What `train` would run: an executor, or none (nothing fits).
struct PlannedExecutor {
  train::ExecutorChoice choice;
  bool fits = true;
  std::string name() const { return fits ? exec::executor_name(choice.executor) : "none"; }
};

PlannedExecutor executor_for(const plan::Plan& r, const plan::PlanOptions& o,
                             const plan::HardwareProfile& hw, const models::ModelConfig& config) {
  PlannedExecutor none;
  none.fits = false;
  const int64_t batch = o.batch_size > 0 ? o.batch_size : r.feasible ? r.schedule.batch_size : 0;
  if (batch == 0) {
    none.choice.reason = "no batch size fits the streaming executor, none was given for resident";
    return none;
  }
  const int64_t micro = r.feasible              ? r.schedule.chunk_sequences
                        : o.chunk_sequences > 0 ? std::min(o.chunk_sequences, batch)
                                                : batch;
  exec::TrainSizes sizes{batch, o.seq_len, o.optimizer, 2};
  sizes.optimizer_block = o.optimizer_block;
  const int64_t resident = exec::resident_bytes_needed(config, sizes, micro, /*on_gpu=*/true)
                               .bytes(exec::MemorySpace::Gpu);
  PlannedExecutor c;
  c.choice =
      train::choose_executor(resident, std::llround(hw.gpu_memory_gb * 1e9), "gpu_memory_gb");
  if (c.choice.executor == exec::ExecutorKind::Streaming && !r.feasible) {
    c.fits = false;
    c.choice.reason += "; no streaming schedule fits either";
  }
  return c;
}

nlohmann::json plan_json(const plan::Plan& r, const plan::PlanOptions& o,
                         const PlannedExecutor& planned) {
  const train::ExecutorChoice& choice = planned.choice;
  nlohmann::json j;
  j["feasible"] = r.feasible;
  // The schedule's own "executor" (streaming) is replaced below by the choice.
  j["executor_reason"] = choice.reason;
  j["resident_bytes"] = choice.resident_bytes;
  j["max_recompute"] = o.max_recompute;
  j["solver"] = {{"seconds", r.solve_s},
                 {"proven_optimal", r.solution.proven_optimal},
                 {"objective", r.solution.objective},
                 {"bound", r.solution.bound}};
  if (!r.feasible) {
    j["executor"] = planned.name();
    j["short"] = nlohmann::json::array();
    for (const auto& s : r.shortages)
      j["short"].push_back({{"space", s.space}, {"bytes", s.bytes}, {"detail", s.detail}});
    return j;
  }
  nlohmann::json schedule = exec::to_json(r.schedule);
  for (auto it = schedule.begin(); it != schedule.end(); ++it) j[it.key()] = it.value();
  // The chunk by the name --micro-batch and exec.micro_batch give it (and
  // batches_tried uses); "chunk_sequences" is the schedule file's name.
  j["micro_batch"] = r.schedule.chunk_sequences;
  j["executor"] = planned.name();
  j["seq_len"] = r.sizes.seq_len;
  j["predicted_step_s"] = r.prediction.step_s;
  j["stage_times"] = r.stage_times_from;
  j["predicted_tokens_per_s"] = r.prediction.tokens_per_s;
  j["predicted_split_s"] = {{"compute", r.prediction.compute_s},
                            {"recompute", r.prediction.recompute_s},
                            {"exposed_weights", r.prediction.exposed_weights_s},
                            {"exposed_activations", r.prediction.exposed_activations_s},
                            {"optimizer", r.prediction.optimizer_s},
                            {"device_updates", r.prediction.device_updates_s}};
  j["stages_on_device"] = r.schedule.stages_on_device;
  j["search_stopped_at_time_limit"] = r.search_stopped_at_limit;
  j["peak_bytes"] = r.schedule.predicted_peak_bytes;
  // Seconds each compute window (0..L: blocks, then the head step) waits
  // for offload traffic, per link; forward windows for d2h and disk_write,
  // backward windows for h2d and disk_read.
  for (int li = 0; li < plan::kNumLinks; ++li)
    j["exposed_per_window_s"][plan::link_name(static_cast<plan::Link>(li))] =
        r.solution.window_exposed_s[li];
  nlohmann::json counts = {{"gpu", 0}, {"host", 0}, {"disk", 0}, {"recompute", 0}};
  for (auto p : r.schedule.boundaries)
    counts[exec::placement_name(p)] = counts[exec::placement_name(p)].get<int>() + 1;
  j["counts"] = counts;
  j["batches_tried"] = nlohmann::json::array();
  for (const auto& t : r.batches_tried)
    j["batches_tried"].push_back({{"batch_size", t.batch_size},
                                  {"micro_batch", t.chunk_sequences},
                                  {"predicted_tokens_per_s", t.tokens_per_s}});
  return j;
}

void print_plan(const plan::Plan& r, const plan::PlanOptions& o, const models::ModelConfig& c,
                const PlannedExecutor& planned) {
  const auto gb = [](double bytes) { return bytes / plan::kBytesPerGB; };
  fmt::print("executor: {} ({})\n", planned.name(), planned.choice.reason);
  if (!r.feasible) {
    fmt::print("No streaming schedule fits:\n");
    for (const auto& s : r.shortages) {
      if (s.bytes == 0)  // no placement found, or the instance too large: no count of bytes
        fmt::print("  {}\n", s.detail);
      else
        fmt::print("  {} is short by {:.2f} GB ({} bytes): {}\n", s.space, gb(s.bytes), s.bytes,
                   s.detail);
    }
    return;
  }
  const auto& s = r.schedule;
  const int64_t L = c.num_hidden_layers;
  const double params = static_cast<double>(c.num_parameters());
  fmt::print(
      "model: {} blocks, {} parameters, hidden {}, FFN {}\n", L,
      params >= 1e9 ? fmt::format("{:.3f} B", params / 1e9) : fmt::format("{:.3f} M", params / 1e6),
      c.hidden_size, c.intermediate_size);
  // As the executor cuts the batch (split_rows, exec/streaming.cpp): whole
  // chunks, then the rest as one short chunk.
  const int64_t chunks = (s.batch_size + s.chunk_sequences - 1) / s.chunk_sequences;
  const int64_t last = s.batch_size - (chunks - 1) * s.chunk_sequences;
  fmt::print("streaming schedule: batch {} x seq {}: micro-batch {} ({} chunk{}{})\n", s.batch_size,
             r.sizes.seq_len, s.chunk_sequences, chunks, chunks == 1 ? "" : "s",
             last < s.chunk_sequences ? fmt::format(", the last of {}", last) : std::string());
  if (o.batch_size == 0) {
    // Why this batch: what the others were predicted to give.
    std::string tried;
    for (const auto& t : r.batches_tried)
      tried += fmt::format("{}{}{} ({:.0f}, chunks of {})", tried.empty() ? "" : ", ",
                           t.batch_size == s.batch_size ? "*" : "", t.batch_size, t.tokens_per_s,
                           t.chunk_sequences);
    const std::string preferred =
        o.chunk_sequences > 0
            ? fmt::format("batches of >= {} sequences (--micro-batch) preferred", o.chunk_sequences)
            : fmt::format("chunks of >= {} tokens preferred", plan::kMinChunkTokens);
    fmt::print(
        "  batches planned (predicted tokens/s): {}{}\n  * kept: the smallest within {:g}% of the "
        "fastest, {}\n",
        tried,
        r.first_batch_not_fitting > 0 ? fmt::format("; {} does not fit", r.first_batch_not_fitting)
                                      : std::string(),
        plan::kBatchMargin * 100, preferred);
  }
  int counts[4] = {0, 0, 0, 0};
  for (auto p : s.boundaries) ++counts[static_cast<int>(p)];
  fmt::print(
      "boundaries (0..{}, {:.3f} GB each): {} gpu, {} host, {} disk, {} recompute "
      "(max recompute length {})\n",
      L, gb(static_cast<double>(exec::boundary_bytes(c, r.sizes))), counts[0], counts[1], counts[2],
      counts[3], o.max_recompute);
  bool any_read_window = false;
  for (size_t i = 0; i < s.boundaries.size(); ++i) {
    const int window = s.read_window(static_cast<int>(i));
    any_read_window |= window >= 0;
    fmt::print("{:>5} {:<10}{}", i,
               // "disk@w5": read back from backward window 5 on.
               window >= 0 ? fmt::format("{}@w{}", exec::placement_name(s.boundaries[i]), window)
                           : std::string(exec::placement_name(s.boundaries[i])),
               (i % 6 == 5 || i + 1 == s.boundaries.size()) ? "\n" : "");
  }
  if (any_read_window)
    fmt::print("  (@wN: read back from backward window N on; window L is the head)\n");
  const auto& p = r.prediction;
  fmt::print("predicted step {:.3f} s ({:.0f} tokens/s), stage times: {}\n", p.step_s,
             p.tokens_per_s, r.stage_times_from);
  fmt::print(
      "  compute {:.3f} s, recompute {:.3f} s, exposed weight/gradient copies {:.3f} s, "
      "exposed activation copies {:.3f} s, optimizer {:.3f} s, updates on the device {:.3f} s\n",
      p.compute_s, p.recompute_s, p.exposed_weights_s, p.exposed_activations_s, p.optimizer_s,
      p.device_updates_s);
  if (!s.stages_on_device.empty())
    fmt::print("stages kept and updated on the device (0: embed, 1..{}: blocks, {}: head): {}\n",
               s.boundaries.size() - 1, s.boundaries.size(), fmt::join(s.stages_on_device, ", "));
  if (s.tail_blocks > 0)
    fmt::print("the last {} block(s) and the head run as one use, chunk by chunk (fused_tail){}\n",
               s.tail_blocks, exec::tail_chunk_phrase(s));
  if (r.search_stopped_at_limit)
    fmt::print(
        "the search for stages kept on the device and a fused tail stopped at the time limit: a "
        "longer --time-limit may find a faster step\n");
  fmt::print("predicted peak: gpu {:.2f} GB, host {:.2f} GB, disk {:.2f} GB\n",
             gb(r.budget.bytes(exec::MemorySpace::Gpu)),
             gb(r.budget.bytes(exec::MemorySpace::Host)),
             gb(r.budget.bytes(exec::MemorySpace::Disk)));
  for (const auto& item : r.budget.items)
    fmt::print("  {:<5} {:>10.3f} GB  {}\n", exec::memory_space_name(item.space), gb(item.bytes),
               item.what);
  fmt::print("solver: CBC, {:.2f} s, {}\n", r.solve_s,
             r.solution.proven_optimal ? "proven optimal"
                                       : fmt::format("incumbent at the time limit (bound {:.4g} s, "
                                                     "objective {:.4g} s)",
                                                     r.solution.bound, r.solution.objective));
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand(
      "plan",
      "Solve the activation schedule (keep on GPU/host/disk or recompute) for a model (no "
      "arguments: the demo's run plan)");
  cmd->add_option("--model", args->model, "Hugging Face model folder or config.json")
      ->check(shell_expanded_path());
  // As train: `lazytrain plan run.yaml` takes the config positionally too.
  cmd->add_option("config,--config", args->config,
                  "a train config (YAML): print the run plan `lazytrain train` would run; "
                  "--batch-size, --seq-len, --micro-batch, --hardware, --optimizer, "
                  "--clip-with-previous-norm, --stream-every-stage and --no-fused-tail set its "
                  "keys, as --set would")
      ->check(shell_expanded_path());
  cmd->add_option("--set", args->overrides,
                  "with --config (or neither it nor --model: the demo's config): override a key "
                  "(as train's --set)")
      ->allow_extra_args(false);
  cmd->add_option("--hardware", args->hardware,
                  "hardware profile YAML (default: the H200 machine's figures)")
      ->check(shell_expanded_path());
  CLI::Option* batch_size_given =
      cmd->add_option("--batch-size", args->batch_size,
                      fmt::format("sequences per step (default: the smallest within {:g}% of the "
                                  "fastest, chunks of >= {} tokens preferred)",
                                  plan::kBatchMargin * 100, plan::kMinChunkTokens));
  CLI::Option* seq_len_given =
      cmd->add_option("--seq-len", args->seq_len,
                      fmt::format("tokens per sequence (default: {}, or the model's "
                                  "max_position_embeddings when shorter)",
                                  kDefaultSeqLen));
  cmd->add_option(
      "--micro-batch", args->micro_batch,
      "sequences per chunk (0 or left out: chosen); more than the batch is the whole batch, as "
      "train takes exec.micro_batch");
  cmd->add_option("--max-recompute", args->max_recompute, "most blocks between two kept boundaries")
      ->capture_default_str();
  cmd->add_option("--time-limit", args->time_limit_s, "seconds for the solver, all batch sizes")
      ->capture_default_str();
  cmd->add_option("--optimizer", args->optimizer, "adamw or adamw8bit")->capture_default_str();
  cmd->add_flag("--clip-with-previous-norm", args->clip_with_previous_norm,
                "as train.clip_with_previous_norm: updates (and states on disk) during the "
                "backward");
  cmd->add_flag("--stream-every-stage", args->stream_every_stage,
                "keep no stage whole on the device, even where there is room (stages_on_device)");
  cmd->add_flag("--no-fused-tail", args->apart_tail,
                "run the last blocks and the head apart, never as one use (exec.fused_tail: off)");
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->add_option("--out", args->out, "write the schedule JSON here")->check(shell_expanded_path());
  cmd->add_option("--gpus", args->gpus,
                  "data parallel over N GPUs: plan a rank's share of --batch-size (which must "
                  "divide by N), then the collectives and memory per rank and node")
      ->capture_default_str();
  cmd->add_option("--gpus-per-node", args->gpus_per_node, "with --gpus: GPUs of one machine")
      ->capture_default_str();
  cmd->callback([args, cmd, batch_size_given, seq_len_given] {
    // Left out, the planner searches; a 0 given is a mistake, not a search.
    LT_CHECK(batch_size_given->count() == 0 || args->batch_size > 0,
             "--batch-size must be a number of sequences (leave it out for the planner's "
             "choice), got ",
             args->batch_size);
    // Left out, the default applies; a 0 given is a mistake, as -5 is.
    LT_CHECK(seq_len_given->count() == 0 || args->seq_len > 0,
             "--seq-len must be a number of tokens (leave it out for the default), got ",
             args->seq_len);
    LT_CHECK(args->micro_batch >= 0,
             "--micro-batch must be a number of sequences (0 or left out: the planner's choice), "
             "got ",
             args->micro_batch);
    if (!args->config.empty()) {
      LT_CHECK(args->model.empty(), "--model and --config: give one (the config names its model)");
      print_run_plan(*args, *cmd);
      return;
    }
    // Neither: the demo's run, as `lazytrain train` with no arguments runs
    // it (plan refused, asking for --model, what train runs).
    if (args->model.empty()) {
      fmt::print(stderr,
                 "plan: no --config or --model: the plan of the demo's run (the embedded config "
                 "`lazytrain train` runs with no arguments)\n");
      print_run_plan(*args, *cmd);
      return;
    }
    // As the --model flags are refused with --config (Note [Plan flags with
    // --config]): --set sets a train config's key, and a plan of --model
    // has none. It used to be dropped without a word.
    LT_CHECK(args->overrides.empty(), "--set ", args->overrides.empty() ? "" : args->overrides[0],
             " is for a plan of --config: it sets a key of the train config, and --model has "
             "none (its plan takes --batch-size, --seq-len, --micro-batch, --hardware and "
             "--optimizer); give --config FILE, or leave --set out");
    if (!args->out.empty()) io::check_can_write(args->out, "--out");  // before the solve
    const models::ModelConfig config = load_model_config(args->model, "--model ");
    const plan::HardwareProfile node = args->hardware.empty()
                                           ? plan::HardwareProfile{}
                                           : plan::HardwareProfile::from_file(args->hardware);
    LT_CHECK(args->optimizer == "adamw" || args->optimizer == "adamw8bit",
             "--optimizer must be adamw or adamw8bit, got '", args->optimizer, "'");
    LT_CHECK(args->max_recompute >= 1, "--max-recompute must be >= 1");
    LT_CHECK(args->time_limit_s > 0, "--time-limit must be > 0");
    LT_CHECK(args->gpus >= 1, "--gpus must be at least 1, got ", args->gpus);
    LT_CHECK(args->batch_size % args->gpus == 0, "--batch-size ", args->batch_size,
             " is the global batch and must divide by --gpus ", args->gpus);
    LT_CHECK(!args->clip_with_previous_norm || args->gpus == 1,
             "--clip-with-previous-norm: updates during the backward are for one process so far "
             "(train.clip_with_previous_norm refuses several)");
    LT_CHECK(args->gpus_per_node >= 1, "--gpus-per-node must be at least 1, got ",
             args->gpus_per_node);
    const plan::HardwareProfile hw =
        plan::rank_share_of_node(node, std::min(args->gpus, args->gpus_per_node));
    plan::PlanOptions o;
    o.batch_size = args->batch_size / args->gpus;  // one rank's share (0: the planner's choice)
    o.seq_len = seq_len_given->count() > 0 ? args->seq_len : default_seq_len(config);
    models::check_seq_len_fits(o.seq_len, "--seq-len", config, args->model);
    // More than the batch is the whole batch, settled once here for
    // everything below (the plan, the resident count), as resolve_run
    // settles exec.micro_batch against a micro-batch of train.batch_size
    // (plan has no grad_accum: the batch).
    o.chunk_sequences = args->micro_batch;
    if (o.batch_size > 0 && o.chunk_sequences > o.batch_size) {
      if (!args->json)
        fmt::print("{}\n", plan::chunk_past_sequences_line(
                               "--micro-batch", o.chunk_sequences, o.batch_size,
                               args->gpus > 1
                                   ? fmt::format("a rank's share of --batch-size {} over --gpus {}",
                                                 args->batch_size, args->gpus)
                                   : std::string("--batch-size"),
                               "batch"));
      o.chunk_sequences = o.batch_size;
    }
    o.max_recompute = args->max_recompute;
    o.time_limit_s = args->time_limit_s;
    o.optimizer =
        args->optimizer == "adamw" ? exec::OptimizerStates::Fp32 : exec::OptimizerStates::EightBit;
    o.updates_during_backward = args->clip_with_previous_norm;
    o.stages_on_device = !args->stream_every_stage && args->gpus == 1;
    o.fused_tail = !args->apart_tail && args->gpus == 1;
    const plan::Plan r = plan::make_plan(config, hw, o);
    const PlannedExecutor choice = executor_for(r, o, hw, config);
    std::optional<plan::Plan> zero;
    if (args->gpus > 1) {
      plan::PlanOptions same_batch = o;  // ZeRO-1's step at the batch planned above
      same_batch.batch_size = r.schedule.batch_size;
      zero = plan::make_plan(
          config,
          plan::rank_share_of_node(node, std::min(args->gpus, args->gpus_per_node), args->gpus),
          same_batch);
    }
    if (args->json) {
      nlohmann::json j = plan_json(r, o, choice);
      if (zero)
        j["data_parallel"] =
            print_data_parallel(r, *zero, *args, hw, config, o.optimizer, o.optimizer_block);
      fmt::print("{}\n", j.dump(2));
    } else {
      print_plan(r, o, config, choice);
      if (zero) print_data_parallel(r, *zero, *args, hw, config, o.optimizer, o.optimizer_block);
    }
    if (!choice.fits) throw CLI::RuntimeError(3);
    if (!args->out.empty() && r.feasible) {
      exec::save_schedule(r.schedule, args->out);
      if (!args->json) fmt::print("schedule written to {}\n", args->out);
    }
  });
}

}  // namespace lt::cli
