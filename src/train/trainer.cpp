#include "train/trainer.h"

#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "core/allocator.h"
#include "core/shell_syntax.h"
#include "data/batching.h"
#include "data/json_fields.h"
#include "data/prompt_rows.h"
#include "dist/process.h"
#include "dist/shard.h"
#include "exec/evaluate.h"
#include "exec/offload.h"
#include "exec/resident.h"
#include "exec/staged_states.h"
#include "exec/stand_in_device.h"
#include "exec/streaming.h"
#include "exec/streaming_disk.h"
#include "exec/zero_checkpoint.h"
#include "exec/zero_optimizer.h"
#include "io/atomic_file.h"
#include "io/weight_values.h"
#include "models/context_limit.h"
#include "ops/op_profile.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/compile_setup.h"
#include "train/earlier_run.h"
#include "train/generation.h"
#include "train/generation_setup.h"
#include "train/hardware_cache.h"
#include "train/host_weights.h"
#include "train/math_eval.h"
#include "train/math_report.h"
#include "train/out_dir_lock.h"
#include "train/progress.h"
#include "train/report.h"
#include "train/run_plan.h"
#include "train/run_setup.h"
#include "train/schedule_auto.h"
#include "train/trained_template.h"
#include "train/weight_check.h"
#include "train/weights_source.h"
#ifdef LT_WITH_CUDA
#include "exec/cuda/streaming_device_cuda.h"
#endif

namespace lt::train {

namespace fs = std::filesystem;

namespace {

// Note [Stopping a run]: the first SIGINT/SIGTERM asks the run to stop
// after the step in flight (an evaluation in flight is abandoned), save and
// exit; a second one ends the process at once, by that signal, unsaved (the
// last checkpoint stays: saves are atomic). Only async-signal-safe calls
// here.
// A closed terminal sends SIGHUP twice (the shell resends it to its jobs,
// and the kernel to the foreground group as the shell exits): a SIGHUP
// never counts as the second request, which would end the run unsaved.
std::atomic<int> stop_signal{0};
// Under mpirun: a SIGTERM from the rank's parent (mpirun, or its orted) is
// mpirun ending the job (a rank failed, or mpirun itself was signalled; its
// SIGKILL follows within a second), not a stop `lazytrain launch` forwards
// (the launcher signals the ranks itself). Said as such: "the run saves"
// promised a save the SIGKILL cuts short.
bool under_mpirun = false;
// The second stop's message names the checkpoint a resume takes; the
// handler may only write(2) what is already there, so the main thread
// fills the buffer the handler is not reading and then flips to it.
struct ResumeLine {
  std::array<std::array<char, 4096>, 2> text{};
  std::array<size_t, 2> size{};
  std::atomic<int> current{-1};  // -1: nothing saved or resumed from yet
};
ResumeLine resume_line;

void note_resumable_checkpoint(const fs::path& checkpoint) {
  const std::string line = "; resume with --resume " + shell_word(checkpoint.string()) + "\n";
  const int next = resume_line.current.load() == 0 ? 1 : 0;
  if (line.size() > resume_line.text[next].size()) return;  // the line without it
  std::copy(line.begin(), line.end(), resume_line.text[next].begin());
  resume_line.size[next] = line.size();
  resume_line.current.store(next);
}

extern "C" void on_stop_signal(int sig, siginfo_t* info, void*) {
  if (sig == SIGTERM && under_mpirun && info != nullptr && info->si_pid == ::getppid()) {
    static const char ending[] =
        "\nSIGTERM from mpirun: it is ending the job (a rank failed, or it was signalled), and "
        "ends this rank within a second or so; a save may not finish (the last checkpoint "
        "stays)\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, ending, sizeof(ending) - 1);
    stop_signal.store(sig);
    OutDirLock::remove_uncommitted();  // set up but not yet training: out.dir as it was
    return;
  }
  if (sig == SIGHUP) {
    int none = 0;
    if (!stop_signal.compare_exchange_strong(none, sig)) return;
  } else if (stop_signal.exchange(sig) != 0) {
    static const char leaving[] =
        "\nsecond stop request: exiting now, unsaved (the last checkpoint stays; a save in "
        "flight leaves its .step-N.tmp folder, removed when a run next starts in out.dir)";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, leaving, sizeof(leaving) - 1);
    const int line = resume_line.current.load();
    if (line >= 0) {
      n = ::write(STDERR_FILENO, resume_line.text[line].data(), resume_line.size[line]);
    } else {
      n = ::write(STDERR_FILENO, "\n", 1);
    }
    OutDirLock::remove_uncommitted();  // a stop in the scoring before training
    struct sigaction by_default {};
    by_default.sa_handler = SIG_DFL;
    ::sigaction(sig, &by_default, nullptr);
    std::raise(sig);
    return;
  }
  static const char said[] =
      "\nstop requested: the run saves after the step in flight and exits (signal again to exit "
      "now, unsaved)\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, said, sizeof(said) - 1);
}

// Thrown out of an evaluation's progress callback when a stop is requested
// (Note [Stopping a run]): an evaluation can take minutes, and the step it
// follows is done.
struct EvaluationStopped {};
void throw_if_stop_requested(int64_t, int64_t) {
  if (stop_signal.load() != 0) throw EvaluationStopped{};
}

// Installs SIGINT/SIGTERM/SIGHUP handlers for the run and restores the old
// ones. A signal the run was started with ignored stays ignored, as the
// shell meant it: a script's `lazytrain train ... &` runs with SIGINT
// ignored so that the terminal's Ctrl-C, meant for the script, does not
// reach it (it is ignored during setup, and was caught once the first step
// began), and nohup ignores SIGHUP.
// SIGHUP (the ssh session or terminal closed) stops the run as SIGTERM
// does. (`lazytrain train` ignores SIGPIPE: cli/train.cpp.)
class StopSignals {
 public:
  StopSignals() {
    stop_signal.store(0);
    under_mpirun = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
    catch_unless_ignored(SIGINT, old_int_);
    catch_unless_ignored(SIGTERM, old_term_);
    catch_unless_ignored(SIGHUP, old_hup_);
  }
  ~StopSignals() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGHUP, &old_hup_, nullptr);
    // Installed while the out.dir lock was uncommitted, the old handlers
    // are its setup handler, which its commit could not take back.
    OutDirLock::release_signals();
  }
  bool requested() const { return stop_signal.load() != 0; }
  // Started with SIGINT ignored: Ctrl-C and `kill -INT` do nothing.
  bool interrupt_ignored() const { return ignored(old_int_); }

 private:
  static bool ignored(const struct sigaction& old) {
    return old.sa_handler == SIG_IGN && (old.sa_flags & SA_SIGINFO) == 0;
  }
  static void catch_unless_ignored(int sig, struct sigaction& old) {
    ::sigaction(sig, nullptr, &old);
    if (ignored(old)) return;
    struct sigaction caught {};
    caught.sa_sigaction = on_stop_signal;
    caught.sa_flags = SA_SIGINFO | SA_RESTART;  // std::signal's restart, as before
    ::sigemptyset(&caught.sa_mask);
    ::sigaction(sig, &caught, nullptr);
  }
  struct sigaction old_int_ {
  }, old_term_{}, old_hup_{};
};

// The training device's peak in a step: "gpu" on CUDA, "device" on the
// CPU stand-in (the space the plan's GPU budget is for).
int64_t device_peak(const exec::StepStats& stats) {
  int64_t peak = 0;
  for (const char* space : {"gpu", "device"}) {
    const auto it = stats.peak_bytes.find(space);
    if (it != stats.peak_bytes.end()) peak = std::max(peak, it->second);
  }
  return peak;
}

optim::AdamWOptions adamw_options(const TrainConfig& c) {
  optim::AdamWOptions adam;
  adam.lr = c.optim.lr;
  adam.beta1 = c.optim.betas[0];
  adam.beta2 = c.optim.betas[1];
  adam.eps = c.optim.eps;
  adam.weight_decay = c.optim.weight_decay;
  return adam;
}

// optim.name's optimizer over the model's parameters (where they live: the
// optimizer's states follow them). The states of the stages the plan puts
// on disk are made without memory: the executor (streaming, offload) makes
// them a stage at a time as it writes them out (Note [Stage states on disk]).
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c, const RunPlan& plan,
                                                 const models::CausalLM& model, ProgressBar& log) {
  const optim::AdamWOptions adam = adamw_options(c);
  const std::vector<bool> without_memory =
      plan.executor != exec::ExecutorKind::Resident
          ? exec::flags_per_parameter(model, plan.sizes.states_on_disk)
          : std::vector<bool>{};
  if (plan.optimizer == exec::OptimizerStates::Fp32)
    return std::make_unique<optim::AdamW>(model.parameters(), adam, plan.no_decay, without_memory);
  // Blockwise 8-bit states for tensors of at least min_8bit_numel
  // elements, f32 states for the rest.
  auto q8 = std::make_unique<optim::AdamW8bit>(
      model.parameters(), adam, plan.no_decay,
      optim::AdamW8bitOptions{plan.optimizer_block, plan.min_8bit_numel}, without_memory);
  const optim::AdamW8bit::Split split = q8->split();
  log.message(
      fmt::format("optimizer adamw8bit: {} parameters with 8-bit states (blocks of {}), {} with "
                  "f32 states (tensors under {} elements)",
                  split.quantized, plan.optimizer_block, split.fp32, plan.min_8bit_numel));
  return q8;
}

// The plan's executor: resident, or streaming with the plan's schedule on
// the GPU (bf16 compute, host masters) when the device is CUDA, else on the
// CPU stand-in device.
// The device a CPU-master executor copies to: the GPU, or the CPU stand-in
// with exec.device_memory_gb as its capacity.
// `shared`: the weights the ranks of this host share (their bf16 copies
// are the GPU's upload sources), or null.
// `pinned_apart`: TrainRunOptions::stand_in_pinned_apart.
std::unique_ptr<exec::StreamingDevice> make_device(const TrainConfig& c, const RunPlan& plan,
                                                   const models::CausalLM& model,
                                                   optim::Optimizer& optimizer,
                                                   const exec::SharedWeights* shared,
                                                   bool pinned_apart) {
#ifdef LT_WITH_CUDA
  if (plan.device.is_cuda()) {
    std::vector<Tensor> shared_copies;
    for (size_t i = 0; shared && i < model.parameters().size(); ++i)
      shared_copies.push_back(shared->bf16_copy(i));
    std::vector<bool> f32_uploads;
    if (plan.executor == exec::ExecutorKind::Streaming && plan.sizes.f32_weight_uploads) {
      // Those of the stages whose masters stay in host memory: a disk
      // stage's master is not there between updates.
      f32_uploads = exec::flags_per_parameter(model, plan.sizes.states_on_disk);
      f32_uploads.flip();
    }
    return std::make_unique<exec::CudaStreamingDevice>(
        model.parameters(), optimizer, plan.device.index, shared_copies, f32_uploads);
  }
#else
  (void)model;
  (void)optimizer;
  (void)shared;
#endif
  LT_CHECK(plan.device.is_cpu(), "exec.mode: ", exec::executor_name(plan.executor), " on ",
           plan.device.str(), " needs a CUDA build");
  exec::StandInOptions stand_in;
  stand_in.capacity_bytes = static_cast<int64_t>(c.exec.device_memory_gb * 1e9);
  stand_in.separate_host_memory = pinned_apart;
  return std::make_unique<exec::StandInDevice>(stand_in);
}

// Optimizer steps in one pass over the data: for exec.zenflow's epoch
// strategy.
// With several sources, one pass is as many samples as they hold together.
int64_t steps_per_epoch(const std::vector<data::WeightedSamples>& sources,
                        const data::BatchOptions& b, int64_t grad_accum) {
  const int64_t sequences_per_step = b.batch_size * grad_accum;
  const int64_t sequences = rows_per_epoch(sources, b.seq_len, b.pack);
  return std::max<int64_t>(1, (sequences + sequences_per_step - 1) / sequences_per_step);
}

// Loads a checkpoint's optimizer states into `optimizer`. Those of a ZeRO-1
// run, saved per shard (exec/zero_checkpoint.h), are re-sharded for any
// world size: a ZeRO-1 rank (`zero`, the same optimizer) reads only the
// parts of the shard files it keeps, a run without ZeRO the whole states.
// With `staged`, the stages on disk take theirs one stage at a time
// (exec/staged_states.h).
void load_optimizer_state(const CheckpointContents& ck, const models::CausalLM& model,
                          optim::Optimizer& optimizer, exec::ZeroOptimizer* zero,
                          exec::StagedStates* staged) {
  auto load = [&](const optim::NamedTensors& state) {
    staged ? staged->load_optimizer_state(state) : optimizer.load_state(state);
  };
  auto world = ck.optimizer_state.find(exec::kZeroWorldSizeKey);
  if (world == ck.optimizer_state.end()) {
    optim::NamedTensors own;  // the executor's (Executor::checkpoint_state) left out
    for (const auto& [name, t] : ck.optimizer_state)
      if (!name.starts_with(exec::kExecutorStatePrefix)) own.emplace_back(name, t);
    load(own);
    return;
  }
  const int64_t saved_world = *world->second.data<int64_t>();
  if (zero) {
    const exec::ZeroShardFiles files(ck.dir, model.parameters(), saved_world);
    zero->load_state_parts(files.source());
    return;
  }
  load(exec::whole_state_from_shards(ck.dir, model.parameters(), saved_world));
}

// Several ranks with dist.zero 1: ZeRO-1's sharded AdamW (or AdamW8bit),
// for the offload and streaming executors, one group per stage, so that
// each stage is reduce-scattered as its backward ends
// (exec/zero_optimizer.h); null when it does not apply (one process, or
// dist.zero 0).
std::unique_ptr<exec::ZeroOptimizer> make_zero_optimizer(const TrainConfig& c, const RunPlan& plan,
                                                         const models::CausalLM& model,
                                                         exec::CrossRankSum* ranks) {
  if (!ranks || c.dist.zero == 0) return nullptr;
  const bool streaming = plan.executor == exec::ExecutorKind::Streaming;
  LT_CHECK(plan.executor == exec::ExecutorKind::Offload || streaming, c.where_set("dist.zero"),
           "config key 'dist.zero' 1 (ZeRO-1) needs ",
           "exec.mode offload or streaming (a CPU-master executor), but the run uses ",
           exec::executor_name(plan.executor), "; set exec.mode offload or dist.zero 0");
  for (bool on_disk : plan.sizes.states_on_disk)
    LT_CHECK(!on_disk, c.where_set("dist.zero"),
             "config key 'dist.zero' 1 (ZeRO-1) keeps its shards in host memory: ",
             "it does not combine with exec.state_placement putting states on disk yet; set ",
             "exec.state_placement: host, or dist.zero: 0");
  // adamw8bit: its blocks, so that the shards fall on them (exec/zero_optimizer.h).
  std::optional<optim::AdamW8bitOptions> blockwise;
  if (plan.optimizer != exec::OptimizerStates::Fp32)
    blockwise = optim::AdamW8bitOptions{plan.optimizer_block, plan.min_8bit_numel};
  return std::make_unique<exec::ZeroOptimizer>(model.parameters(), adamw_options(c), plan.no_decay,
                                               *ranks, exec::streaming_zero_groups(model),
                                               blockwise);
}

// `ranks`: data parallel (null: one process); the resident executor, and
// the offload and streaming executors (with `zero`: ZeRO-1, which is then
// `optimizer`) (docs/distributed.md).
// `streamed`: where the masters of the stages load() left without memory
// come from, or null.
std::unique_ptr<exec::Executor> make_executor(const TrainConfig& c, const RunPlan& plan,
                                              const models::CausalLM& model,
                                              optim::Optimizer& optimizer, int64_t epoch_steps,
                                              exec::CrossRankSum* ranks, exec::ZeroOptimizer* zero,
                                              const exec::SharedWeights* shared,
                                              const WeightsSource* streamed, bool pinned_apart) {
  if (plan.executor == exec::ExecutorKind::Resident)
    return std::make_unique<exec::ResidentExecutor>(
        model, optimizer, plan.compute_dtype, ranks,
        static_cast<int64_t>(c.dist.bucket_mb * double(int64_t{1} << 20)));
  if (plan.executor == exec::ExecutorKind::Offload ||
      plan.executor == exec::ExecutorKind::ZenFlow) {
    exec::OffloadOptions o;
    o.zenflow = plan.executor == exec::ExecutorKind::ZenFlow;
    o.zenflow_options = zenflow_options(c);
    o.zenflow_options.steps_per_epoch = epoch_steps;
    o.adam = adamw_options(c);
    o.no_decay = plan.no_decay;
    o.ranks = ranks;
    o.zero = zero;
    o.states_on_disk = plan.sizes.states_on_disk;
    o.state_file.directory = c.exec.disk_path.empty() ? c.out.dir : c.exec.disk_path;
    o.read_states_back_at_end = false;  // as the streaming executor's, below
    if (streamed)
      o.fill_masters = [streamed, &model](size_t stage) { streamed->fill_stage(model, stage); };
    return std::make_unique<exec::OffloadExecutor>(
        model, optimizer, make_device(c, plan, model, optimizer, shared, pinned_apart),
        std::move(o));
  }
  LT_CHECK(!ranks || !c.train.clip_with_previous_norm,
           "train.clip_with_previous_norm: the streaming executor updates during the backward in "
           "one process only, so far; set it to false for a run of several processes");
  exec::StreamingOptions options;
  options.schedule = plan.schedule;
  options.states_on_disk = plan.sizes.states_on_disk;
  // The run is done with the model when the executor goes: reading every
  // stage back would need host memory for all of them.
  options.read_states_back_at_end = false;
  options.trace_path = (fs::path(c.out.dir) / "trace.json").string();
  options.disk.directory = c.exec.disk_path.empty() ? c.out.dir : c.exec.disk_path;
  options.ranks = ranks;
  options.zero = zero;
  if (streamed)
    options.fill_masters = [streamed, &model](size_t stage) { streamed->fill_stage(model, stage); };
  return std::make_unique<exec::StreamingExecutor>(
      model, optimizer, make_device(c, plan, model, optimizer, shared, pinned_apart),
      std::move(options));
}

void write_text_atomic(const fs::path& path, const std::string& text) {
  io::AtomicFileWriter w(path);
  w.write(text);
  w.commit();
}

// Everything a run holds once it is set up; the loop's helpers below read
// and advance it.
struct Run {
  TrainConfig config;
  // The parameters the starting weights held NaN or inf in (masters in
  // memory only), as weight_check.h names them: Note [No save on a
  // non-finite streak].
  std::vector<std::string> non_finite_at_start;
  std::string config_yaml;
  fs::path out_dir;
  fs::path resume_dir;
  // What resolving --resume passed over and where it looked, for set_up to say.
  std::vector<std::string> resume_skipped;
  bool resume_looked_in_out_dir = false;
  bool resumed_from_elsewhere = false;  // resume_dir outside out_dir (earlier_run.h)
  std::optional<data::Tokenizer> tokenizer;
  // The built-in layout the run trains with, as Jinja, for its checkpoints;
  // empty with auto (train/trained_template.h).
  std::string checkpoint_template;
  std::vector<data::WeightedSamples> sources;  // data.sources (or data.path) to train on
  std::vector<data::Sample> eval_samples;
  data::PromptSet eval_prompts;  // data.eval_task math
  GenerationOptions eval_generation;
  std::optional<models::CausalLM> model;
  RunPlan plan;
  std::unique_ptr<optim::Optimizer> optimizer;
  // Data parallel: this process's rank (rank 0 alone writes out.dir) and
  // the sum over ranks; null in a one-process run.
  dist::World world;
  std::unique_ptr<exec::CrossRankSum> ranks;
  exec::ZeroOptimizer* zero = nullptr;  // dist.zero 1: = optimizer, sharded
  // dist.share_weights: the weights this host's ranks share (the model's
  // parameters point into them); before the optimizer and the executor,
  // which hold views of them.
  std::unique_ptr<exec::SharedWeights> shared_weights;
  std::unique_ptr<exec::Executor> executor;
  std::optional<data::Batcher> batcher;
  data::BatchOptions batch_options;
  optim::ScheduleOptions lr_schedule;
  TrainerState state;
  fs::path last_saved;
  std::set<std::string> unremovable_checkpoints;  // CheckpointOptions::unremovable
  // Rank 0's lock on out.dir (null on the other ranks): Note [out.dir taken
  // away].
  const OutDirLock* out_dir_lock = nullptr;
  // TrainRunOptions::free_disk_bytes.
  std::function<int64_t(const fs::path&)> free_disk_bytes;
  bool warned_over_plan = false;
  bool said_step_without_targets = false;
  int64_t zero_gradient_steps = 0;  // in a row, up to the warning (note_zero_gradients)
  // data.eval_task math: the score before the first step (a fresh run) and
  // the latest, for the closing lines.
  std::optional<MathEvalAt> math_before_training, math_latest;
  // data.eval_task math generates with the whole model in one place: why
  // this run cannot (settled with the plan), or "".
  std::string math_eval_skipped;
};

std::string math_eval_skip_reason(const RunPlan& plan, const models::ModelConfig& model) {
  if (plan.device.is_cuda() && plan.executor == exec::ExecutorKind::Streaming)
    return "exec.mode streaming keeps the model on the host";
  return whole_model_read_back_refusal(plan, model);
}

// The parameters holding NaN or inf now, stages on disk read back
// (weight_check.h).
std::vector<std::string> non_finite_now(Run& r) {
  exec::StagedStates* staged = r.executor->sync_staged();
  if (!staged) r.executor->sync_masters();
  return non_finite_parameters(*r.model, staged);
}

// What resolving --resume looked past, for the run to say: where it found
// the checkpoint, and the folders it skipped.
std::vector<std::string> resume_notes(const Run& r, const std::string& resume) {
  std::vector<std::string> lines;
  if (r.resume_looked_in_out_dir)
    lines.push_back("--resume " + resume + ": not in the current directory; resuming from " +
                    r.resume_dir.string() + " in out.dir");
  for (const std::string& folder : r.resume_skipped)
    lines.push_back("warning: --resume latest skipped " + folder +
                    ": it is not a checkpoint this run can read, and is left in place for you");
  return lines;
}

// Reads the data, loads the weights, resolves the plan, builds the
// optimizer and executor, and restores a checkpoint's state.
// What a run reads from files, by key (refuse_overwrite_of_inputs).
std::vector<std::pair<std::string, std::string>> run_inputs(const TrainConfig& c) {
  std::vector<std::pair<std::string, std::string>> inputs = {{"model.path", c.model.path},
                                                             {"data.tokenizer", c.data.tokenizer},
                                                             {"data.path", c.data.path},
                                                             {"data.eval_path", c.data.eval_path}};
  for (size_t k = 0; k < c.data.sources.size(); ++k)
    inputs.emplace_back("data.sources[" + std::to_string(k) + "].path", c.data.sources[k].path);
  return inputs;
}

void set_up(Run& r, const TrainRunOptions& options, ProgressBar& log) {
  const TrainConfig& c = r.config;
  // The checkpoint first: run_training resolved --resume (refusing one with
  // none to take) before the config was printed and the data read.
  if (!r.resume_dir.empty()) {
    for (const std::string& line : resume_notes(r, options.resume)) log.message(line);
    r.resumed_from_elsewhere = resumed_from_another_folder(r.out_dir, r.resume_dir);
    if (!c.out.overwrite && r.resumed_from_elsewhere)
      refuse_resume_into_another_runs_out_dir(r.out_dir, r.resume_dir);
    if (!c.out.overwrite)
      refuse_resume_over_later_checkpoints(r.out_dir, r.resume_dir,
                                           read_trainer_state(r.resume_dir).step);
    if (c.out.overwrite) {
      refuse_overwrite_of_inputs(
          r.out_dir,
          r.resumed_from_elsewhere ? std::nullopt
                                   : std::optional<int64_t>(read_trainer_state(r.resume_dir).step),
          run_inputs(c));
    }
  }
  // config.json and the weights' headers before the data: a mistake there
  // is a second's read, and tokenizing a large dataset first took minutes
  // before saying so.
  auto weights = std::make_unique<WeightsSource>(c, r.resume_dir);
  const fs::path tok_dir = tokenizer_dir_of(c);
  r.tokenizer = load_run_tokenizer(c, log);
  const data::Tokenizer* tokenizer = r.tokenizer ? &*r.tokenizer : nullptr;
  TrainingData data = load_training_data(c, tokenizer, &log, &weights->config());
  r.sources = std::move(data.train);
  const CheckpointTemplate saved_template = checkpoint_template(c, tokenizer, tok_dir);
  r.checkpoint_template = saved_template.jinja;
  if (!saved_template.note.empty()) log.message(saved_template.note);

  const ResumeChanges resumed = compare_with_checkpoint(c, r.resume_dir, log);
  // The plan from config.json, before the weights: the masters of the
  // stages it puts on disk are loaded a stage at a time as the executor
  // (streaming, offload) writes them out (Note [Stage states on disk], "the
  // start").
  // Not over ranks: shared weights and ZeRO-1 (which refuses states on
  // disk) take every master in host memory.
  if (const std::string dropout = dropout_not_applied(models::model_config_file(c.model.path));
      !dropout.empty())
    log.message(dropout);
  r.plan = resolve_run(c, weights->config());
  const bool stream_masters =
      r.plan.executor != exec::ExecutorKind::Resident && !r.world.distributed();
  r.model.emplace(
      weights->load(stream_masters ? r.plan.sizes.states_on_disk : std::vector<bool>{}, log));
  models::CausalLM& model = *r.model;
  const int64_t vocab = model.config().vocab_size;
  for (const auto& source : r.sources) data::check_ids_in_vocab(source.samples, vocab, source.name);
  for (auto& part : data.eval) {
    data::check_ids_in_vocab(part.samples, vocab, part.name);
    for (auto& s : part.samples) r.eval_samples.push_back(std::move(s));
  }
  if (c.data.eval_task == "math") {
    data::PromptOptions po;
    po.format = c.data.format;
    po.template_name = c.data.template_name;
    po.tokenizer_path = tok_dir;
    po.prompt_field = c.data.prompt_field;
    po.response_field = c.data.response_field;
    po.answer_field = c.data.eval_answer_field;
    r.eval_prompts = data::load_prompts(c.data.eval_path, &*r.tokenizer, po);
    // The rows `eval --task math` answers, so the two accuracies agree.
    const PromptsPastContext past_context =
        leave_out_prompts_past_context(r.eval_prompts, c.data.eval_path, model.config());
    if (const std::string skipped =
            skipped_rows_line("held-out math", r.eval_prompts, past_context, c.data.eval_path);
        !skipped.empty())
      log.message(skipped);
    check_prompts_have_answers(r.eval_prompts, c.data.eval_path, "data.eval_answer_field");
    check_prompts_fit(r.eval_prompts, c.data.eval_path, model.config(), c.model.path);
    r.eval_generation.max_new_tokens = c.data.eval_max_new_tokens;
    r.eval_generation.eos_ids = eos_ids_for(c.model.path, model.config());
    if (r.eval_prompts.turn_end) r.eval_generation.eos_ids.push_back(*r.eval_prompts.turn_end);
    r.math_eval_skipped = math_eval_skip_reason(r.plan, model.config());
  }

  if (r.world.distributed()) {
    dist::check_batch_divides(c.train.batch_size, r.plan.grad_accum, r.world,
                              c.where_set("train.batch_size"));
    // Before the plan's lines (rank 0 alone prints: cli::run_as_rank).
    log.message(dist::describe_data_parallel(c.train.batch_size, r.plan.grad_accum, r.world,
                                             r.plan.device.is_cuda()));
    if (r.plan.device.is_cuda()) r.plan.device = Device::cuda(r.world.local_rank);
    r.ranks = dist::open_cross_rank_sum(r.plan.device, c.dist.timeout_s);
    // ZeRO-1's all-gathers and the shared weights refresh the bf16 copies.
    LT_CHECK(c.exec.weight_uploads != "f32", "exec.weight_uploads: f32 is for one process; a run ",
             "of several uploads the bf16 copies (set auto or bf16)");
    if (!r.plan.schedule.stages_on_device.empty()) {
      r.plan.schedule.stages_on_device.clear();
      r.plan.reasons.push_back(
          "schedule: every stage streams after all (stages_on_device is for one process so "
          "far); the GPU holds less than the plan counted, and the step may take longer");
    }
    if (r.plan.schedule.tail_blocks > 0) {
      r.plan.schedule.tail_blocks = 0;
      r.plan.schedule.tail_chunk_sequences = 0;
      r.plan.reasons.push_back(
          "schedule: the last blocks and the head run apart after all (fused_tail is for one "
          "process so far); the step may take longer");
    }
    if (r.plan.sizes.f32_weight_uploads) {
      r.plan.sizes.f32_weight_uploads = r.plan.placement.f32_weight_uploads = false;
      r.plan.reasons.push_back(
          "exec.weight_uploads auto: bf16 copies after all (a run of several processes); the "
          "host holds 2 bytes a parameter more than the plan counted");
    }
  }
  for (const std::string& line : r.plan.reasons) log.message(line);
  if (!r.plan.plan_description.empty()) {
    print_text(stdout, fmt::format("{}\n", r.plan.plan_description));
    std::fflush(stdout);
  }
  // The resident executor keeps the f32 masters on its device, and the
  // optimizer's states follow them there; streaming keeps both on the host.
  if (r.plan.device.is_cuda() && r.plan.executor == exec::ExecutorKind::Resident)
    model.to(r.plan.device, DType::F32);
  setup_compile(c, r.plan, model, log);
  r.shared_weights =
      share_weights_on_host(c, r.plan, model, exec::streaming_zero_groups(model).size(), log);
  std::unique_ptr<exec::ZeroOptimizer> zero = make_zero_optimizer(c, r.plan, model, r.ranks.get());
  exec::ZeroOptimizer* sharded = zero.get();
  r.zero = sharded;
  if (zero && r.shared_weights) zero->share_weights(*r.shared_weights);
  if (zero) {
    log.message(
        fmt::format("dist.zero 1: this rank keeps the optimizer states of {} of the {} parameters",
                    zero->shards().owned(), zero->shards().total));
    r.optimizer = std::move(zero);
  } else {
    r.optimizer = make_optimizer(c, r.plan, model, log);
  }
  setup_compiled_optimizer(c, model, *r.optimizer, log);
  r.batch_options.batch_size = r.plan.accum_sequences;
  r.batch_options.seq_len = c.train.seq_len;
  r.batch_options.pack = c.data.pack;
  r.batch_options.seed = c.train.seed;
  const int64_t epoch_steps = steps_per_epoch(r.sources, r.batch_options, r.plan.grad_accum);
  r.executor = make_executor(c, r.plan, model, *r.optimizer, epoch_steps, r.ranks.get(), sharded,
                             r.shared_weights.get(), stream_masters ? weights.get() : nullptr,
                             options.stand_in_pinned_apart);
  weights.reset();  // every streamed stage is on disk: the files unmapped
  // Padding is never predicted but is still embedded, so it must be a valid
  // id: EOS when the vocabulary has it (a trimmed vocabulary may not), else 0.
  if (auto eos = model.config().eos_token_ids;
      !eos.empty() && eos.front() >= 0 && eos.front() < vocab) {
    r.batch_options.pad_id = static_cast<int32_t>(eos.front());
  }
  r.batcher.emplace(r.sources, r.batch_options);
  // What the sampler walks, for this run's checkpoints and against the
  // resumed one's.
  std::vector<data::SourceFingerprint> fingerprints;
  for (const data::WeightedSamples& source : r.sources)
    fingerprints.push_back(data::fingerprint(source));
  r.eval_generation.batch_size = r.batch_options.batch_size;

  if (!r.resume_dir.empty()) {
    CheckpointContents ck = read_checkpoint(r.resume_dir);
    if (resumed.optimizer) {
      log.message("resume: the optimizer changed; its states start from zero");
    } else {
      // States on disk take theirs a stage at a time (Note [Stage states on
      // disk]).
      try {
        load_optimizer_state(ck, model, *r.optimizer, r.zero, r.executor->sync_staged());
        const std::string note = r.executor->restore_checkpoint_state(
            {ck.optimizer_state.begin(), ck.optimizer_state.end()});
        if (!note.empty()) log.message(note);
      } catch (const Error& e) {
        // Named by what it read; the error may also be a write of the
        // states of stages on disk, so the advice is conditional.
        fail("resume: loading the optimizer states of ", r.resume_dir.string(),
             " (optimizer.safetensors",
             ck.optimizer_state.count(exec::kZeroWorldSizeKey) ? " and its shard files" : "",
             ") failed: ", e.what(),
             ". If they are another model's or optimizer's, or damaged, resume from another "
             "checkpoint, or train from this one's folder as model.path (the optimizer starts "
             "afresh)");
      }
    }
    r.state = ck.state;
    // Other data starts the sampler over (Note [Data edited in place]).
    if (resumed.data) {
      r.state.sampler = {};
      log.message("resume: the data or its order changed; reading starts at its beginning");
    } else if (samples_changed_since(c, r.resume_dir, ck.state, fingerprints, log)) {
      r.state.sampler = {};
    } else if (const std::string why = r.batcher->try_restore(r.state.sampler); !why.empty()) {
      r.state.sampler = {};
      log.message(fmt::format("resume: {}: the data changed since the checkpoint; {}", why,
                              kReadingStartsOver));
    }
    r.batcher->restore(r.state.sampler);
    r.executor->resume_at(r.state.step);
    log.message(fmt::format("resumed from {} at step {}", r.resume_dir.string(), r.state.step));
  }
  r.state.data = std::move(fingerprints);
  // run_training returned before set_up for a checkpoint at train.steps.
  LT_CHECK(r.state.step < c.train.steps, "nothing to do");
  check_no_foreign_step_folders(r.out_dir, r.state.step, c.train.steps);

  r.lr_schedule = c.lr_schedule();
  if (resumed.schedule)
    if (const std::string jump =
            lr_change_at_resume(*resumed.schedule, r.lr_schedule, r.state.step);
        !jump.empty())
      log.message(jump);

  // NaN or inf the starting weights hold, where they are in memory: said
  // now (every loss may still be finite), and kept so that saves are
  // refused only for a change from them.
  if (!r.executor->sync_staged()) {
    r.non_finite_at_start = non_finite_now(r);
    if (!r.non_finite_at_start.empty())
      log.message(fmt::format(
          "warning: the starting weights ({}) hold NaN or inf, in {}; the run goes on, and "
          "saves them as they are while its updates add none",
          r.resume_dir.empty() ? "model.path " + c.model.path : r.resume_dir.string(),
          io::tensor_list_text(r.non_finite_at_start)));
  }
}

// With ZeRO-1 each rank writes its optimizer shard (exec/zero_checkpoint.h)
// into a hidden folder rank 0 made; once all have (a sum over the ranks),
// rank 0 moves them into the checkpoint and commits it, so a save is
// complete only with every shard in place. Returns what rank 0 saves as
// optimizer.safetensors (the world size and step), and the shards.
optim::NamedTensors write_zero_shards(Run& r, std::vector<fs::path>& shard_files) {
  const int world = r.world.size;
  const fs::path folder = r.out_dir / (".step-" + std::to_string(r.state.step) + ".shards");
  if (r.world.rank == 0) make_shard_folder(r.out_dir, r.state.step);
  double done = 0;
  r.ranks->sum(std::span<double>(&done, 1));  // the folder exists
  exec::write_zero_shard(folder / exec::zero_shard_file_name(r.world.rank, world), *r.zero);
  r.ranks->sum(std::span<double>(&done, 1));  // every shard is written
  for (int k = 0; k < world; ++k)
    shard_files.push_back(folder / exec::zero_shard_file_name(k, world));
  optim::NamedTensors head;
  for (const char* key : {"step", exec::kZeroWorldSizeKey}) {
    Tensor t = Tensor::empty({}, DType::I64);
    *t.data<int64_t>() = key == std::string("step") ? r.state.step : world;
    head.emplace_back(key, t);
  }
  // AdamW's own count of finished steps, as one process saves it.
  for (const auto& [name, t] : r.zero->shard_state())
    if (name == "step") head[0].second = t;
  return head;
}

// Note [out.dir taken away]: a user who deletes (or moves) out.dir under a
// running run takes its .lock with it. The run would write on into files
// no longer in any folder (metrics.jsonl, tb/), make out.dir again at its
// next save, and say at its end that its outputs are there; and since the
// lock went with the folder, a second run could lock the new folder and
// both would save there. So rank 0 checks, before each metrics line, each
// save and the end, that out.dir/.lock is still the file it locked (one
// stat), and stops when it is not, writing nothing more there. What it
// trained since its last save is lost; that is the user's doing, and the
// alternatives are worse: saving into the new out.dir would write into a
// folder another run may hold by now (and recreate what the user deleted,
// perhaps to throw the run away), and saving anywhere else would put
// gigabytes where nobody asked for them. The error says so, and how to go
// on when the folder was moved rather than deleted.
void stop_if_out_dir_gone(const Run& r) {
  if (!r.out_dir_lock) return;
  const std::string what = r.out_dir_lock->lost();
  if (what.empty()) return;
  // The lock file gone, its folder still there: removed by hand, or the
  // first file of a folder being deleted (which comes next); said both ways.
  if (r.out_dir_lock->folder_kept())
    fail("out.dir '", r.out_dir.string(), "' lost its lock file while this run was going (", what,
         "): the run stops and writes nothing more there, as another run may hold out.dir now, "
         "and what it trained since its last save is lost. out.dir itself was still there: if "
         "the lock file alone was removed (the folder not being deleted, moved or replaced), its "
         "checkpoints, metrics.jsonl and config.yaml are there, and --resume latest goes on from "
         "its last checkpoint once no other run uses out.dir");
  fail("out.dir '", r.out_dir.string(),
       "' was deleted, moved or replaced while this run was going (", what,
       "): the run stops and writes nothing more there, as another run may hold that folder now. "
       "What it trained since its last save is lost, and its checkpoints, metrics.jsonl, "
       "config.yaml and tb/ went with the folder (if it was moved, not deleted, --resume latest "
       "with out.dir set to where it is now goes on from its last checkpoint)");
}

// A metrics line; a failed write (a full disk) stops the run, saying what
// the user can resume from.
void write_metrics(Run& r, MetricsWriter& metrics, const nlohmann::json& line) {
  stop_if_out_dir_gone(r);
  try {
    metrics.write(line);
  } catch (const Error& e) {
    stop_if_out_dir_gone(r);
    const fs::path last = r.last_saved.empty() ? r.resume_dir : r.last_saved;
    fail(e.what(), last.empty()
                       ? fmt::format("; no checkpoint was saved (train.save_every {}), so the {} "
                                     "steps trained are lost",
                                     r.config.train.save_every, r.state.step + 1)
                       : "; the last checkpoint is " + last.string() +
                             ": resume from it once the file can be written");
  }
}

void save(Run& r, ProgressBar& bar) {
  // Updates may still be running, or (ZenFlow) on the device; stages of
  // states on disk stay there and are written one at a time.
  exec::StagedStates* staged = r.executor->sync_staged();
  if (!staged) r.executor->sync_masters();
  std::vector<fs::path> shard_files;
  optim::NamedTensors optimizer_state =
      r.zero ? write_zero_shards(r, shard_files) : r.optimizer->state();
  if (r.world.rank != 0) return;  // every rank holds the same weights and states
  // Beside the optimizer's: what the executor keeps of its own (ZenFlow's
  // device columns and moments, Note [ZenFlow's saves]).
  for (auto& named : r.executor->checkpoint_state()) optimizer_state.push_back(std::move(named));
  r.state.sampler = r.batcher->state();
  CheckpointOptions options{tokenizer_dir_of(r.config), r.config.model.path, r.config_yaml,
                            r.config.train.keep_last, shard_files};
  options.staged = staged;
  options.chat_template = r.checkpoint_template;
  options.warn = [&bar](const std::string& warning) { bar.message(warning); };
  options.expected_bytes = checkpoint_bytes(r.config, r.model->config());
  options.free_bytes = r.free_disk_bytes;
  options.unremovable = &r.unremovable_checkpoints;
  r.last_saved = save_checkpoint(r.out_dir, *r.model, optimizer_state, r.state, options);
  note_resumable_checkpoint(r.last_saved);
  if (r.zero) fs::remove_all(r.out_dir / (".step-" + std::to_string(r.state.step) + ".shards"));
  bar.message("saved " + r.last_saved.string());
}

// A save, unless out.dir was taken away: a save that fails because it was
// (its files went mid-write) says that, not which file could not be written.
void save_in_out_dir(Run& r, ProgressBar& bar) {
  stop_if_out_dir_gone(r);
  try {
    save(r, bar);
  } catch (const std::exception&) {  // std::filesystem's too: a folder gone mid-save
    // `rm -rf out.dir` deletes in directory order, and may take the save's
    // folder before it reaches .lock: a second for it to get there before
    // the failure is called a plain write error.
    for (int wait = 0; r.out_dir_lock && wait < 20; ++wait) {
      stop_if_out_dir_gone(r);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    stop_if_out_dir_gone(r);
    throw;
  }
}

// The planner's GPU peak beside the measured one; one warning the first
// time a step goes over it.
void check_plan_peak(Run& r, const exec::StepStats& stats, nlohmann::json& line, ProgressBar& bar) {
  if (r.plan.predicted_gpu_peak_bytes <= 0) return;
  line["predicted_gpu_peak_bytes"] = r.plan.predicted_gpu_peak_bytes;
  const int64_t peak = device_peak(stats);
  if (peak <= r.plan.predicted_gpu_peak_bytes || r.warned_over_plan) return;
  r.warned_over_plan = true;
  bar.message(fmt::format(
      "step {}: the device peak, {:.3f} GB, is over the {:.3f} GB the plan budgeted for "
      "(exec.schedule auto); a run closer to the device's memory may run out: lower "
      "exec.device_memory_gb by the difference",
      r.state.step + 1, peak / 1e9, r.plan.predicted_gpu_peak_bytes / 1e9));
}

// Greedy answers to the held-out prompts, scored, on the model as the
// executor trains it; `step` is the number of optimizer steps done.
MathEvalAt evaluate_math_at(Run& r, int64_t step, ProgressBar& bar) {
  GenerationOptions generation = r.eval_generation;
  generation.on_batch_done = throw_if_stop_requested;
  MathEvalAt at{
      step, evaluate_math(r.executor->eval_model(), *r.tokenizer, r.eval_prompts.rows, generation)};
  bar.message(fmt::format("step {}{}: eval accuracy {:.3f} ({} of {})", step,
                          step == 0 ? " (before training)" : "", at.result.accuracy,
                          at.result.correct, at.result.n));
  return at;
}

// train.eval_every: the held-out loss, on the model as the executor trains
// it (the bf16 copy on a GPU); also after the last step, so that a run
// whose train.steps is not a multiple of eval_every ends on the figure of
// the model it saves.
void evaluate(Run& r, nlohmann::json& line, ProgressBar& bar) {
  const TrainConfig& c = r.config;
  // Stages of weights on disk come in one at a time (Note [Stage states on
  // disk]). The offload executors' evaluation reads the device weights,
  // which sync() makes current (their sync_staged() would also end
  // ZenFlow's window, as a checkpoint must).
  const bool on_device = r.plan.executor == exec::ExecutorKind::Offload ||
                         r.plan.executor == exec::ExecutorKind::ZenFlow;
  exec::StagedStates* staged = on_device ? nullptr : r.executor->sync_staged();
  if (!staged) r.executor->sync();
  const auto ev = staged
                      ? exec::evaluate_samples_by_stage(r.executor->eval_model(), r.eval_samples,
                                                        r.batch_options.batch_size, c.train.seq_len,
                                                        [staged](size_t s) {
                                                          throw_if_stop_requested(0, 0);
                                                          return staged->bring_in_weights(s);
                                                        })
                      : exec::evaluate_samples(r.executor->eval_model(), r.eval_samples,
                                               r.batch_options.batch_size, c.train.seq_len,
                                               throw_if_stop_requested);
  line["eval_loss"] = ev.loss;
  bar.message(fmt::format("step {}: eval loss {:.4f} over {} tokens", r.state.step + 1, ev.loss,
                          ev.tokens));
  // data.eval_task math: greedy answers, where the trained model is whole
  // on one device (the streaming executor's masters stay on the host, as
  // for the sample).
  if (c.data.eval_task != "math") return;
  if (!r.math_eval_skipped.empty()) {
    bar.message("eval accuracy: skipped (" + r.math_eval_skipped + ")");
    return;
  }
  if (staged) r.executor->sync();  // generation needs the whole model
  r.math_latest = evaluate_math_at(r, r.state.step + 1, bar);
  line["eval_accuracy"] = r.math_latest->result.accuracy;
}

void maybe_evaluate(Run& r, nlohmann::json& line, ProgressBar& bar) {
  const TrainConfig& c = r.config;
  const int64_t done = r.state.step + 1;
  if (c.train.eval_every <= 0 || r.eval_samples.empty() ||
      (done % c.train.eval_every != 0 && done != c.train.steps))
    return;
  // Note [Stopping a run]: not begun, or abandoned, once a stop is asked.
  try {
    if (stop_signal.load() == 0) return evaluate(r, line, bar);
  } catch (const EvaluationStopped&) {
  }
  bar.message(fmt::format("step {}: evaluation skipped: stop requested", done));
}

// data.eval_task math: a fresh run also scores the model before its first
// step, so that its closing line reads before -> after. Not logged in
// metrics.jsonl, whose lines are steps.
void evaluate_before_training(Run& r, ProgressBar& bar) {
  const TrainConfig& c = r.config;
  if (c.data.eval_task != "math" || c.train.eval_every <= 0 || r.state.step != 0 ||
      !r.math_eval_skipped.empty())
    return;
  r.executor->sync();  // the model whole in host memory (Note [Stage states on disk])
  r.math_before_training = evaluate_math_at(r, 0, bar);
}

// Why a run stopped on non-finite steps, when it is the weights: a NaN or
// inf in them (loaded with the model, or written by an update) makes every
// later step non-finite, and "lower optim.lr or check the data" would send
// the user the wrong way. `steps_done`: the steps run so far, this one's
// included (all of them bad: the weights came with the model).
std::string non_finite_weights(Run& r, int64_t steps_done) {
  const std::vector<std::string> found = non_finite_now(r);
  if (found.empty()) return "";
  return fmt::format(
      "; the model's weights hold NaN or inf, in {} tensor{}: {}. {}", found.size(),
      found.size() == 1 ? "" : "s", io::tensor_list_text(found),
      steps_done == r.state.consecutive_bad_steps
          ? "No update has been applied since step 0, so they came with the weights the run "
            "started from (model.path " +
                r.config.model.path + "): repair or replace them"
      : r.resume_dir.empty()
          ? std::string("An update of this run wrote them: train again with a lower optim.lr")
          : std::string("An update wrote them, or they came with the checkpoint resumed from: "
                        "resume from a checkpoint before them, with a lower optim.lr"));
}

// A skipped (non-finite) step counts toward train.max_bad_steps in a row.
void count_bad_steps(Run& r, const exec::StepStats& stats, ProgressBar& bar) {
  if (!stats.skipped) {
    r.state.consecutive_bad_steps = 0;
    return;
  }
  ++r.state.consecutive_bad_steps;
  bar.message(fmt::format(
      "step {} (\"step\": {} in metrics.jsonl): non-finite loss or gradient (loss {}, grad "
      "norm {}); update skipped{}",
      r.state.step + 1, r.state.step, stats.loss, stats.grad_norm,  // the bar's count, the file's
      stats.stages_updated_before_skip == 0
          ? std::string()
          : fmt::format(" from the first stage with a non-finite gradient on ({} stages were "
                        "updated during the backward before it: train.clip_with_previous_norm)",
                        stats.stages_updated_before_skip)));
  if (r.state.consecutive_bad_steps >= r.config.train.max_bad_steps) {
    bar.finish();
    const std::string weights = non_finite_weights(r, r.state.step + 1);
    fail("stopping: ", r.state.consecutive_bad_steps,
         " steps in a row had a non-finite loss or gradient (train.max_bad_steps = ",
         r.config.train.max_bad_steps, ")",
         weights.empty() ? "; lower optim.lr or check the data" : weights);
  }
}

// Note [No save on a non-finite streak]: while steps are non-finite, a
// save would write the weights that made them (an update at a mistyped
// optim.lr writes inf) and, under train.keep_last, delete the good
// checkpoints the stopping message then tells the user to resume from. So
// a periodic save waits for the next finite step (and one is made then),
// and the last step's or a stop's save is refused when the weights hold
// NaN or inf (finite weights after a streak are the last update's, and
// saved).
// The weights are checked at every save where they are in memory (an
// update from a finite loss can write inf: its step is not a bad one), and
// during a streak where they are on disk too (read back, a second read of
// every disk stage; outside a streak they are not, and a finite step's
// update writing inf is saved: a gap). NaN or inf the starting weights held
// (set_up warns of them; a row of an embedding no text uses leaves every
// loss finite) does not stop a save: only a change from them does.
std::string weights_unfit_to_save(Run& r) {
  if (r.state.consecutive_bad_steps == 0 && r.executor->sync_staged()) return "";
  const std::vector<std::string> found = non_finite_now(r);
  if (found.empty() || found == r.non_finite_at_start) return "";
  return non_finite_weights(r, r.state.step);  // after the step's ++: the steps done
}

bool periodic_save_waits(Run& r, ProgressBar& bar) {
  const int64_t bad = r.state.consecutive_bad_steps;
  if (bad > 0) {
    bar.message(fmt::format(
        "no step-{} checkpoint: the last {} step{} had a non-finite loss or gradient, and a "
        "save now could replace a good checkpoint (train.keep_last); a checkpoint is saved "
        "after the next finite step",
        r.state.step, bad, bad == 1 ? "" : "s"));
    return true;
  }
  const std::string weights = weights_unfit_to_save(r);
  if (weights.empty()) return false;
  bar.message(fmt::format(
      "no step-{} checkpoint: step {}'s update left NaN or inf in the weights, and a save could "
      "replace a good checkpoint (train.keep_last){}",
      r.state.step, r.state.step, weights));
  return true;
}

void refuse_saving_non_finite_weights(Run& r, ProgressBar& bar) {
  const std::string weights = weights_unfit_to_save(r);
  if (weights.empty()) return;
  bar.finish();
  const int64_t bad = r.state.consecutive_bad_steps;
  fail("stopping without a save: ",
       bad > 0 ? fmt::format("the last {} step{} had a non-finite loss or gradient, and ", bad,
                             bad == 1 ? "" : "s")
               : std::string(),
       "saving would keep these weights in place of the checkpoints out.dir holds", weights);
}

// A run shorter than train.max_bad_steps that applied no update, its last
// step skipped (non-finite): it fails at that step, naming NaN or inf
// weights when they are the cause, rather than exit 0 and save the weights
// it started from as if trained (Note [Taking over out.dir]).
void stop_if_nothing_updated(Run& r, const exec::StepStats& stats, int64_t first_step,
                             bool applied_any, ProgressBar& bar) {
  const int64_t run_steps = r.state.step + 1 - first_step;
  if (applied_any || !stats.skipped || r.state.step + 1 != r.config.train.steps) return;
  bar.finish();
  const std::string weights = non_finite_weights(r, r.state.step + 1);
  fail("stopping: none of this run's ", run_steps, " step", run_steps == 1 ? "" : "s",
       " applied an update (the last ", r.state.consecutive_bad_steps,
       " had a non-finite loss or gradient), so nothing is saved (out.dir keeps what it held)",
       weights.empty() ? "; lower optim.lr or check the data" : weights);
}

// A batch whose rows keep no trained token (each cut at train.seq_len
// before its answer) computes nothing and updates nothing: said once, so
// that its missing loss and its 0 tokens/s are not read as results.
void note_step_without_targets(Run& r, const exec::StepStats& stats, ProgressBar& bar) {
  if (stats.target_count > 0 || r.said_step_without_targets) return;
  r.said_step_without_targets = true;
  bar.message(fmt::format(
      "step {}: no row of its batch keeps a trained token within train.seq_len {}: nothing was "
      "computed or updated, and the step logs no loss (null in metrics.jsonl) and 0 tokens/s; "
      "the summary leaves such steps out (said once)",
      r.state.step + 1, r.config.train.seq_len));
}

// A gradient of exactly zero on steps with trained tokens: the model has
// collapsed (a learning rate far too high made every logit alike, or the
// activations zero) and will not learn again; the run went on saving it,
// exit 0. Said once, after kZeroGradientSteps in a row. ZenFlow's step
// norm counts its selected columns alone, so it is not read there.
constexpr int64_t kZeroGradientSteps = 3;
void note_zero_gradients(Run& r, const exec::StepStats& stats, double lr, ProgressBar& bar) {
  if (r.plan.executor == exec::ExecutorKind::ZenFlow || r.zero_gradient_steps < 0) return;
  const bool zero = !stats.skipped && stats.target_count > 0 && stats.grad_norm == 0;
  r.zero_gradient_steps = zero ? r.zero_gradient_steps + 1 : 0;
  if (r.zero_gradient_steps < kZeroGradientSteps) return;
  r.zero_gradient_steps = -1;  // said
  bar.message(fmt::format(
      "warning: steps {}-{} had a gradient of exactly zero (loss {:.4f}): the model has "
      "collapsed and is not learning; most often the learning rate was far too high (optim.lr "
      "{:g}, {:.2e} at this step). Its checkpoints hold the collapsed weights: stop, lower "
      "optim.lr and start again from model.path",
      r.state.step + 2 - kZeroGradientSteps, r.state.step + 1, stats.loss, r.config.optim.lr, lr));
}

// The greedy sample runs where the f32 masters are: on the GPU for the
// resident executor on cuda (f32, TF32 GEMMs), on the host otherwise. The
// streaming executor keeps its masters on the host because the model may
// not fit the GPU (and offload and ZenFlow keep theirs there too), and a
// CPU forward of a model that size per token is too slow for a sample:
// skipped there, saying so.
void sample(const Run& r) {
  if (r.plan.device.is_cuda() && r.plan.executor != exec::ExecutorKind::Resident) {
    print_text(stdout,
               fmt::format("\nsample: skipped (exec.mode {} keeps the f32 model on the host)\n",
                           exec::executor_name(r.plan.executor)));
    return;
  }
  print_sample(*r.model, *r.tokenizer, r.sources.front().samples.front());
}

// Note [The run's CPU update rate] (train/hardware_cache.h): a run priced
// with the cached profile keeps its measured update rate there for the next
// plan, once; not a run of several ranks, whose ranks share the host's
// cores (priced on a share of the profile: configured_hardware) and whose
// rate would mislead a one-process plan. After three
// steps that measured one (the steps after the first; a run stopped before
// its end still leaves it), or at the end of a shorter run with two.
// Returns whether it is done with it.
bool keep_run_cpu_update_rate(const Run& r, const RunSummary& summary, bool at_end,
                              ProgressBar& bar) {
  if (r.plan.cached_profile_path.empty() || r.plan.predicted_cpu_update_params_per_s <= 0 ||
      r.world.distributed())
    return true;
  if (summary.cpu_update_steps() < (at_end ? 2u : 3u)) return at_end;
  bar.message(keep_cpu_update_rate(
      r.plan.cached_profile_path, r.plan.optimizer, summary.median_cpu_update_gparams_per_s() * 1e9,
      r.plan.predicted_cpu_update_params_per_s, r.plan.cpu_update_in_run_scale));
  return true;
}

// A stop request (a signal) on any rank stops every rank after the same
// step, so that they save and leave together.
bool stop_requested(Run& r, const StopSignals& signals) {
  if (!r.ranks) return signals.requested();
  double requested = signals.requested() ? 1 : 0;
  r.ranks->sum(std::span<double>(&requested, 1));
  return requested > 0;
}

}  // namespace

// Note [out.dir's config.yaml]
// Each run writes its resolved config (every key, paths expanded, no
// comments) to out.dir/config.yaml under kRunConfigHeader. A user who keeps
// their own config there (`lazytrain train exp1/config.yaml` with out.dir
// exp1) lost it to that dump. A config file that is out.dir's config.yaml is
// refused unless it starts with the header: a run's own dump is rewritten
// (training again from it is fine), a hand-written file is kept.
constexpr std::string_view kRunConfigHeader =
    "# lazytrain: the resolved config of the run in this folder (each run here rewrites it)\n";

void refuse_to_rewrite_a_hand_written_config(const std::string& config_file,
                                             const fs::path& out_dir) {
  std::error_code ec;
  const fs::path record = out_dir / "config.yaml";
  // A link is replaced, not written through: what it points at stays.
  if (config_file.empty() || fs::is_symlink(record, ec) || !fs::equivalent(config_file, record, ec))
    return;
  const std::string text = data::read_whole_file(config_file);
  if (text.starts_with(kRunConfigHeader)) return;
  // A dump written before the header was: it reads back as itself.
  try {
    if (read_train_config_unchecked(config_file).to_yaml() == text) return;
  } catch (const std::exception&) {
  }
  fail(config_file, " is out.dir's config.yaml, which the run rewrites with its resolved config ",
       "(every key, paths expanded, comments dropped): keep your config elsewhere (copy it out of ",
       out_dir.string(), " and train from the copy), or set another out.dir");
}

TrainRunResult run_training(const TrainConfig& requested, const TrainRunOptions& options) {
  const dist::World world = dist::this_world();
  // The global batch's split among the ranks, before the data and weights
  // load (the micro-batches' split waits for the plan's grad_accum).
  dist::check_batch_divides(requested.train.batch_size, /*grad_accum=*/1, world,
                            requested.where_set("train.batch_size"));
  const bool writer = world.rank == 0;  // of out.dir: the other ranks only read it
  // Before anything in out.dir is read or written; declared before the run,
  // so that a run failing in its setup has closed its scratch files there
  // when the lock removes the folder it made.
  if (writer) refuse_to_rewrite_a_hand_written_config(options.config_file, requested.out.dir);
  resume_line.current.store(-1);  // a run before this one's, in this process
  std::optional<OutDirLock> lock;
  if (writer) lock.emplace(requested.out.dir);
  const bool fresh = options.resume.empty() && !options.resuming;
  if (fresh && !requested.out.overwrite) refuse_fresh_run_over_checkpoints(requested.out.dir);
  if (fresh && requested.out.overwrite)
    refuse_overwrite_of_inputs(requested.out.dir, std::nullopt, run_inputs(requested));
  Run r;
  r.config = requested;
  // The saved config.yaml says what ran: train.dtype auto is resolved here.
  r.config.train.dtype = resolve_compute_dtype(
      r.config.train.dtype, resolve_train_device(r.config.train.device).is_cuda());
  const std::string seq_len_note = fit_default_seq_len(r.config);
  const TrainConfig& c = r.config;
  r.out_dir = c.out.dir;
  r.world = world;
  r.out_dir_lock = lock ? &*lock : nullptr;
  r.free_disk_bytes = options.free_disk_bytes;
  // A killed run's leftovers: a partial save, a file it was rewriting
  // (metrics.jsonl at a resume), activation scratch files. Not the user's
  // work, and they may take the disk room the plan counts on.
  if (writer)
    for (const std::string& warning : remove_stale_saves(r.out_dir))
      print_text(stderr, warning + "\n");
  if (const int n = writer ? io::remove_stale_temp_files(r.out_dir) : 0)
    print_text(stderr,
               fmt::format("removed {} temporary file(s) a killed run left in out.dir\n", n));
  if (const int n = !writer ? 0
                            : exec::remove_stale_scratch_files(
                                  c.exec.disk_path.empty() ? r.out_dir.string() : c.exec.disk_path))
    print_text(stderr, fmt::format("removed {} activation scratch file(s) a killed run left\n", n));
  // A --resume with no checkpoint to take is refused before the config is
  // printed (the error would follow a page of it); resume_notes say what it
  // skipped.
  if (!fresh) {
    r.resume_dir = resolve_checkpoint(options.resume, r.out_dir, &r.resume_skipped,
                                      &r.resume_looked_in_out_dir);
    // Rank 0 alone saves, so it alone knows the latest checkpoint: the
    // other ranks' second-stop line names none rather than a stale one.
    if (writer) note_resumable_checkpoint(r.resume_dir);
    // Said before the model and the data load, and without the end's
    // evaluation and sample (`lazytrain eval` scores a checkpoint): a run
    // re-started until done ends here, exit 0.
    if (const int64_t at = read_trainer_state(r.resume_dir).step; at >= c.train.steps) {
      for (const std::string& line : resume_notes(r, options.resume))
        print_text(stderr, line + "\n");
      print_text(stdout, fmt::format("resume: {} is at step {} and train.steps is {}: nothing is "
                                     "left to train (set train.steps above {} to train on)\n",
                                     r.resume_dir.string(), at, c.train.steps, at));
      // A run killed after its last save, before its end drew loss.png,
      // left the plot's scratch files and no plot: drawn here, as its end
      // would have.
      if (writer && !fs::exists(r.out_dir / "loss.png"))
        plot_loss_curve(r.out_dir / "metrics.jsonl", r.out_dir / "loss.png");
      TrainRunResult done;
      done.steps_done = at;
      done.last_checkpoint = r.resume_dir.string();
      return done;
    }
  }
  r.config_yaml = c.to_yaml();
  print_text(stdout,
             fmt::format("lazytrain train: resolved config (saved to {} once the run trains)\n{}",
                         (r.out_dir / "config.yaml").string(), r.config_yaml));
  std::fflush(stdout);  // before progress lines on stderr, also when piped

  int64_t setup_host_peak = 0;
  std::optional<StopSignals> stop_handlers;
  {
    ProgressBar log(0, c.train.steps);
    for (const std::string& note : c.adjustments()) log.message("config: " + note);
    if (const std::string lr = c.learning_rate_warning(); !lr.empty()) log.message(lr);
    if (!seq_len_note.empty()) log.message("config: " + seq_len_note);
    // Host memory that building the run held at its peak beyond what was
    // held before it (Note [Stage states on disk], "the start").
    const int64_t held_before = cpu_allocator().stats().current_bytes;
    cpu_allocator().reset_peak();
    set_up(r, options, log);
    setup_host_peak = cpu_allocator().stats().peak_bytes - held_before;
    // From the plan's line on (what a user, or a test, takes as "set up"),
    // a signal is a stop request: the run ends at the next check, out.dir
    // as it was until the lock commits.
    stop_handlers.emplace();
    // A `kill -INT` that does nothing looks like a hung run.
    if (stop_handlers->interrupt_ignored())
      log.message(fmt::format(
          "note: this process was started with SIGINT ignored (a shell's background job), so "
          "Ctrl-C does not reach it; `kill {}` (SIGTERM) stops the run after a save",
          ::getpid()));
    log.message(run_plan_line(r.plan));
  }
  // Note [Taking over out.dir]: what an earlier run left in out.dir (its
  // config.yaml, its checkpoints under out.overwrite, its metrics.jsonl
  // lines) gives way once this run has applied an update: a run stopped
  // before its first step, or whose every step so far was non-finite (NaN
  // weights) and that then fails, removed or replaced them for nothing.
  // Until then the lines of its skipped steps wait, and no checkpoint is
  // saved (it would hold the weights the run started from).
  ProgressBar bar(r.state.step, c.train.steps);
  const StopSignals& signals = *stop_handlers;
  // The scoring before training (data.eval_task math) writes nothing in
  // out.dir, and the lock is committed after it: a stop in it (minutes on
  // a large model) ends the run as a stop in the setup does, out.dir as it
  // was and the executor's scratch files removed as the run unwinds.
  try {
    evaluate_before_training(r, bar);
  } catch (const EvaluationStopped&) {
  }
  if (stop_requested(r, signals)) {
    bar.message(
        "stop requested before the first step: nothing trained, nothing saved; out.dir "
        "is left as it was before the run");
    bar.finish();
    TrainRunResult stopped;
    stopped.interrupted = true;
    stopped.steps_done = r.state.step;
    stopped.last_checkpoint = r.resume_dir.string();
    stopped.setup_host_peak_bytes = setup_host_peak;
    return stopped;
  }
  const bool earlier_config = fs::exists(r.out_dir / "config.yaml");
  const std::string config_record = std::string(kRunConfigHeader) + r.config_yaml;
  if (writer && !earlier_config) write_text_atomic(r.out_dir / "config.yaml", config_record);
  // Set up: from here on the run writes out.dir. A run that failed before
  // this (a full disk refusing config.yaml included) left an earlier run's
  // config.yaml and metrics as they were, and removed the out.dir it made.
  if (lock) lock->commit();

  const double params = static_cast<double>(r.model->config().num_parameters());
  const int64_t first_step = r.state.step;
  std::optional<MetricsWriter> metrics;
  const auto take_over_records = [&] {
    if (!writer) return;
    if (earlier_config) write_text_atomic(r.out_dir / "config.yaml", config_record);
    if (c.out.overwrite) {
      if (fresh || r.resumed_from_elsewhere)
        remove_earlier_checkpoints(r.out_dir);
      else
        remove_later_checkpoints(r.out_dir, first_step);
    }
    metrics.emplace(r.out_dir / "metrics.jsonl", !r.resume_dir.empty() && !r.resumed_from_elsewhere,
                    first_step, [&bar](const std::string& warning) { bar.message(warning); });
  };
  TrainRunResult result;
  result.setup_host_peak_bytes = setup_host_peak;
  RunSummary summary;  // this run's steps, for its closing line
  summary.set_prediction_basis(prediction_basis(r.plan));
  bool cpu_rate_kept = false;

  bool applied_any = false;   // an update of this run (Note [Taking over out.dir])
  bool save_waiting = false;  // Note [No save on a non-finite streak]
  std::vector<nlohmann::json> waiting_lines;
  // Whether taking over would replace another run's records (rank 0 looks;
  // every rank takes the same branch around the collectives).
  double replaces = writer && (fresh || r.resumed_from_elsewhere) && c.out.overwrite &&
                            holds_an_earlier_run(r.out_dir)
                        ? 1
                        : 0;
  if (r.ranks) r.ranks->sum(std::span<double>(&replaces, 1));
  const bool replacing = replaces > 0;
  while (r.state.step < c.train.steps) {
    if (r.state.step == first_step && stop_requested(r, signals)) {
      bar.message("stop requested before the first step: nothing trained, nothing saved");
      result.interrupted = true;
      break;
    }
    std::vector<data::Batch> micro;
    for (int64_t i = 0; i < r.plan.grad_accum; ++i)
      micro.push_back(dist::shard_rows(r.batcher->next(), r.world.rank, r.world.size));
    exec::StepOptions step_options;
    step_options.lr = optim::lr_at(r.lr_schedule, r.state.step);
    step_options.max_grad_norm = c.train.grad_clip;
    step_options.clip_with_previous_norm = c.train.clip_with_previous_norm;
    step_options.previous_grad_norm = r.state.previous_grad_norm;
    const exec::StepStats stats = r.executor->step(micro, step_options);
    // An update applied: a step without a trained token runs no optimizer
    // step, and a skipped one none but the stages its backward updated.
    const bool applied =
        (!stats.skipped && stats.target_count > 0) || stats.stages_updated_before_skip > 0;
    // A skipped step leaves no norm to clip the next one with.
    r.state.previous_grad_norm =
        stats.skipped ? std::numeric_limits<double>::quiet_NaN() : stats.grad_norm;

    nlohmann::json line =
        step_json(r.state.step, stats, step_options.lr, params, r.plan.predicted_step_s);
    line["executor"] = r.executor->name();
    // LT_OP_PROFILE=1: GPU milliseconds per op class of this step, to
    // compare executors as a user runs them (bench/RESULTS.md, issue 27).
    if (ops::op_profile_enabled()) {
      nlohmann::json ms = nlohmann::json::object();
      for (const auto& [op_class, t] : ops::take_op_profile()) ms[op_class] = t;
      line["op_ms"] = std::move(ms);
    }
    check_plan_peak(r, stats, line, bar);
    maybe_evaluate(r, line, bar);
    summary.add(line);
    if (!cpu_rate_kept) cpu_rate_kept = keep_run_cpu_update_rate(r, summary, false, bar);
    if (metrics) {
      for (const nlohmann::json& waiting : waiting_lines) write_metrics(r, *metrics, waiting);
      waiting_lines.clear();
      write_metrics(r, *metrics, line);
    } else if (writer) {
      waiting_lines.push_back(line);
    }
    if (stats.target_count > 0) result.final_loss = stats.loss;
    count_bad_steps(r, stats, bar);
    note_step_without_targets(r, stats, bar);
    note_zero_gradients(r, stats, step_options.lr, bar);
    stop_if_nothing_updated(r, stats, first_step, applied_any || applied, bar);
    ++r.state.step;
    bar.update(r.state.step - 1,
               stats.target_count > 0 ? std::optional<double>(stats.loss) : std::nullopt,
               line.at("tokens_per_s").get<double>(), line.at("tflops").get<double>(),
               fmt::format(" | lr {:.2e}", step_options.lr));
    const bool at_end = r.state.step == c.train.steps;
    // train.compile traces and compiles the forward in the run's first
    // step (whose backward is the traced, unfused one), the backward in the
    // second.
    if (r.state.step == first_step + 2 || at_end) log_compile(*r.model, *r.optimizer, bar);
    const bool stop = stop_requested(r, signals);  // once a step: it sums over ranks
    // The first update (or the end: a run of steps without trained tokens)
    // takes over out.dir, unless a stop came meanwhile and that would
    // replace another run's records (out.overwrite): they stay, and this
    // run, a step old, saves nothing in their place. A stop on the last
    // step finishes the run as on any run (a one-step run saves).
    if (!applied_any && (applied || at_end)) {
      if (replacing && stop && !at_end) {  // on the last step, finish normally
        bar.finish();
        bar.message(
            "stop requested before this run's first update was kept: out.overwrite replaces what "
            "out.dir holds only once the run goes on, so nothing is saved and it keeps what it "
            "held");
        result.interrupted = true;
        break;
      }
      applied_any = true;
      take_over_records();
      if (metrics)
        for (const nlohmann::json& waiting : waiting_lines) write_metrics(r, *metrics, waiting);
      waiting_lines.clear();
    }
    if (stop && !at_end) {  // on the last step, finish normally
      bar.finish();
      if (applied_any) {
        refuse_saving_non_finite_weights(r, bar);
        bar.message("stop requested: saving and exiting");
        save_in_out_dir(r, bar);
      } else {
        bar.message(
            "stop requested: no update was applied in this run (its steps were non-finite or "
            "had no trained token), so nothing is saved and out.dir keeps what it held");
      }
      result.interrupted = true;
      break;
    }
    if (!applied_any) continue;  // Note [Taking over out.dir]: nothing of this run to save
    const bool periodic = c.train.save_every > 0 && r.state.step % c.train.save_every == 0;
    if (at_end || periodic || (save_waiting && r.state.consecutive_bad_steps == 0)) {
      save_waiting = !at_end && periodic_save_waits(r, bar);
      if (save_waiting) continue;
      if (at_end) refuse_saving_non_finite_weights(r, bar);
      save_in_out_dir(r, bar);
      // A stop asked for during this save: it is the stop's save (another
      // step would train, then save a second whole checkpoint).
      if (!at_end && stop_requested(r, signals)) {
        bar.message(fmt::format(
            "the stop came during step {}'s save, which stands for the save it asked for: "
            "exiting without training another step",
            r.state.step));
        result.interrupted = true;
        break;
      }
    }
  }
  // Stages of states on disk stay there: the model may not fit host memory.
  exec::StagedStates* staged = r.executor->sync_staged();
  if (!staged) r.executor->sync_masters();
  const std::vector<bool> on_disk = staged ? staged->on_disk() : std::vector<bool>{};
  const bool weights_on_disk = std::find(on_disk.begin(), on_disk.end(), true) != on_disk.end();
  if (!cpu_rate_kept) keep_run_cpu_update_rate(r, summary, true, bar);
  bar.finish();
  result.steps_done = r.state.step;
  // A resume that saved nothing: the checkpoint it read is still the last.
  result.last_checkpoint = (r.last_saved.empty() ? r.resume_dir : r.last_saved).string();
  result.saved = !r.last_saved.empty();
  stop_if_out_dir_gone(r);  // before saying where the outputs are
  // A run that took over out.dir and drew no curve (no gnuplot, no loss):
  // the earlier run's loss.png would stand for this run's.
  if (writer && !plot_loss_curve(r.out_dir / "metrics.jsonl", r.out_dir / "loss.png") &&
      applied_any) {
    std::error_code ec;
    fs::remove(r.out_dir / "loss.png", ec);
  }
  if (r.math_latest) {
    // The held-out answers say more than a training row's continuation.
    // A stop during the last evaluation: an earlier model's score, not
    // the saved one's, and its answers are not shown as the run's.
    const bool stale = r.math_latest->step < result.steps_done;
    print_text(stdout,
               fmt::format("\n{}\n", math_accuracy_line(r.math_before_training, *r.math_latest,
                                                        result.steps_done)));
    if (options.sample_at_end && !result.interrupted && !stale)
      print_text(stdout, fmt::format("held-out problems, greedy answers at step {}:\n{}",
                                     r.math_latest->step, math_answers_text(*r.math_latest, 3)));
  } else if (options.sample_at_end && r.tokenizer && !result.interrupted) {
    if (weights_on_disk)
      print_text(
          stdout,
          fmt::format(
              "\nsample: skipped (exec.state_placement keeps stages of the weights on disk)\n"));
    else
      sample(r);
  }
  if (const std::string closing = summary.line(); !closing.empty())
    print_text(stdout, fmt::format("{}\n", closing));
  // A resume with nothing left to train saved nothing: its latest is the one it read.
  print_text(
      stdout,
      fmt::format("{}", where_to_look(r.out_dir, r.last_saved.empty() ? r.resume_dir : r.last_saved,
                                      r.plan.executor == exec::ExecutorKind::Streaming)));
  return result;
}

}  // namespace lt::train
