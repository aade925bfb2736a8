#include "train/trainer.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "data/tokenizer.h"
#include "exec/evaluate.h"
#include "exec/resident.h"
#include "exec/streaming.h"
#include "exec/streaming_disk.h"
#include "io/atomic_file.h"
#include "io/hf_folder.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/executor_choice.h"
#include "train/generate.h"
#include "train/out_dir_lock.h"
#include "train/progress.h"
#include "train/report.h"
#include "train/schedule_auto.h"
#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#include "exec/cuda/streaming_device_cuda.h"
#endif

namespace lt::train {

namespace fs = std::filesystem;

namespace {

std::atomic<int> stop_signal{0};
extern "C" void on_stop_signal(int sig) {
  stop_signal.store(sig);
}

// Installs SIGINT/SIGTERM handlers for the run and restores the old ones.
class StopSignals {
 public:
  StopSignals() {
    stop_signal.store(0);
    old_int_ = std::signal(SIGINT, on_stop_signal);
    old_term_ = std::signal(SIGTERM, on_stop_signal);
  }
  ~StopSignals() {
    std::signal(SIGINT, old_int_);
    std::signal(SIGTERM, old_term_);
  }
  bool requested() const { return stop_signal.load() != 0; }

 private:
  void (*old_int_)(int);
  void (*old_term_)(int);
};

fs::path tokenizer_dir_of(const TrainConfig& c) {
  return fs::path(c.data.tokenizer.empty() ? c.model.path : c.data.tokenizer);
}

std::vector<data::Sample> load_samples(const TrainConfig& c, const std::string& path,
                                       const data::Tokenizer* tokenizer, ProgressBar* log) {
  data::DatasetOptions options;
  options.format = c.data.format;
  options.template_name = c.data.template_name;
  options.train_on_prompt = c.data.train_on_prompt;
  options.strict = c.data.strict;
  options.prompt_field = c.data.prompt_field;
  options.response_field = c.data.response_field;
  options.tokenizer_path = tokenizer_dir_of(c);  // tokenizer_config.json: template and EOS
  data::DatasetReport report;
  auto samples = data::load_dataset(path, tokenizer, options, &report);
  log->message(fmt::format("data: {} samples from {} rows of {} (format {}, template {}){}",
                           report.samples, report.rows, path, report.format, report.template_name,
                           report.skipped ? fmt::format(", {} skipped", report.skipped) : ""));
  for (size_t i = 0; i < report.problems.size() && i < 5; ++i) {
    log->message("  skipped: " + report.problems[i]);
  }
  return samples;
}

// What the planner predicted for a run with exec.schedule auto (0: none).
struct PlannedFigures {
  double step_s = 0;
  int64_t gpu_peak_bytes = 0;
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

// `choice.executor` (exec.mode, or what exec.mode auto chose): resident, or
// streaming with the schedule exec.schedule names: on the GPU (bf16
// compute, host masters) when the training device is CUDA, else on the CPU
// stand-in device. For exec.schedule auto, `planned` receives the
// planner's step time and GPU peak.
std::unique_ptr<exec::Executor> make_executor(const TrainConfig& c, const ExecutorChoice& choice,
                                              const models::CausalLM& model,
                                              optim::Optimizer& optimizer, Device device,
                                              PlannedFigures* planned) {
  if (choice.executor == "resident") {
    return std::make_unique<exec::ResidentExecutor>(model, optimizer,
                                                    dtype_from_name(c.train.dtype));
  }
  const int blocks = static_cast<int>(model.config().num_hidden_layers);
  exec::StreamingOptions options;
  // exec.mode auto with the default schedule, all_gpu, that does not fit:
  // the planner chooses instead (as exec.schedule: auto would), rather than
  // stopping. A schedule named otherwise is the user's and is kept.
  std::string schedule_name = c.exec.schedule;
  std::string all_gpu_shortfall;
  if (schedule_name == "all_gpu" && c.exec.mode == "auto") {
    exec::Schedule all = exec::Schedule::all_gpu(blocks);
    if (c.exec.micro_batch > 0) all.micro_batch = c.exec.micro_batch;
    all_gpu_shortfall = streaming_shortfall(c, choice, model.config(), all, device.is_cpu());
    if (!all_gpu_shortfall.empty()) {
      fmt::print("exec.mode auto: {}; planning the schedule instead (exec.schedule: auto)\n",
                 all_gpu_shortfall);
      schedule_name = "auto";
    }
  }
  if (schedule_name == "all_gpu") {
    options.schedule = exec::Schedule::all_gpu(blocks);
  } else if (schedule_name == "every_k") {
    options.schedule = exec::Schedule::every_kth_gpu(blocks, static_cast<int>(c.exec.keep_every));
  } else if (schedule_name == "auto") {
    plan::Plan plan;
    try {
      plan = plan_for_run(c, model.config(), device.is_cpu(),
                          device.is_cuda() ? cuda_free_bytes(device.index) : -1);
    } catch (const Error& e) {
      if (c.exec.mode != "auto") throw;
      fail("exec.mode auto: nothing fits: ",
           all_gpu_shortfall.empty() ? choice.reason : all_gpu_shortfall, "; and ", e.what());
    }
    fmt::print("{}\n", describe_plan(plan));
    std::fflush(stdout);
    options.schedule = plan.schedule;
    planned->step_s = plan.prediction.step_s;
    planned->gpu_peak_bytes = plan.budget.bytes(exec::MemorySpace::Gpu);
  } else {
    options.schedule = exec::load_schedule(c.exec.schedule);
    exec::validate(options.schedule, blocks, "exec.schedule (" + c.exec.schedule + ")");
    LT_CHECK(options.schedule.batch_size == 0 || options.schedule.batch_size == c.train.batch_size,
             "exec.schedule (", c.exec.schedule, "): batch_size ", options.schedule.batch_size,
             " differs from train.batch_size ", c.train.batch_size);
  }
  if (c.exec.micro_batch > 0) options.schedule.micro_batch = c.exec.micro_batch;
  if (schedule_name != "auto" && c.exec.mode == "auto")  // the planner checked its own
    check_streaming_fits(c, choice, model.config(), options.schedule, device.is_cpu());
  options.trace_path = (fs::path(c.out.dir) / "trace.json").string();
  options.disk.directory = c.exec.disk_path.empty() ? c.out.dir : c.exec.disk_path;
#ifdef LT_WITH_CUDA
  if (device.is_cuda()) {
    LT_CHECK(c.train.dtype == "bf16", "train.dtype: the streaming executor (exec.mode ",
             c.exec.mode, ": ", choice.reason, ") on train.device ", c.train.device,
             " computes in bf16 (the host keeps the f32 masters); set bf16, got ", c.train.dtype);
    return std::make_unique<exec::StreamingExecutor>(
        model, optimizer,
        std::make_unique<exec::CudaStreamingDevice>(model.parameters(), optimizer, device.index),
        std::move(options));
  }
#endif
  LT_CHECK(device.is_cpu(), "exec.mode: streaming on ", device.str(), " needs a CUDA build");
  exec::StandInOptions stand_in;
  stand_in.capacity_bytes = static_cast<int64_t>(c.exec.device_memory_gb * 1e9);
  return std::make_unique<exec::StreamingExecutor>(
      model, optimizer, std::make_unique<exec::StandInDevice>(stand_in), std::move(options));
}

// train.device: cpu; cuda (refused with the reason when this build or
// machine has no GPU); auto = cuda when both are there, else cpu.
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

// What a resume changes from the checkpoint's own config, warned key by
// key. Changing the optimizer's kind or its state layout makes the saved
// states unusable; changing the data or its order makes the saved sampler
// position meaningless.
struct ResumeChanges {
  bool optimizer = false;
  bool data = false;
};

ResumeChanges compare_with_checkpoint(const TrainConfig& c, const fs::path& resume_dir,
                                      ProgressBar& log) {
  ResumeChanges changes;
  const fs::path saved_path = resume_dir / "train_config.yaml";
  if (resume_dir.empty() || !fs::is_regular_file(saved_path)) return changes;
  TrainConfig saved = read_train_config_unchecked(saved_path);
  const bool dtype_auto = c.train.dtype == "auto" || saved.train.dtype == "auto";
  for (const std::string& change : config_differences(saved, c)) {
    // Extending the run, or writing it elsewhere, is what a resume is for.
    if (change.rfind("train.steps:", 0) == 0 || change.rfind("out.dir:", 0) == 0) continue;
    if (dtype_auto && change.rfind("train.dtype:", 0) == 0) continue;
    log.message("resume: " + change + " (was the checkpoint's)");
  }
  changes.optimizer =
      saved.optim.name != c.optim.name ||
      (c.optim.name == "adamw8bit" && (saved.optim.block_size != c.optim.block_size ||
                                       saved.optim.min_8bit_numel != c.optim.min_8bit_numel));
  const auto& a = saved.data;
  const auto& b = c.data;
  changes.data = a.path != b.path || a.format != b.format || a.template_name != b.template_name ||
                 a.tokenizer != b.tokenizer || a.train_on_prompt != b.train_on_prompt ||
                 a.pack != b.pack || a.prompt_field != b.prompt_field ||
                 a.response_field != b.response_field || saved.train.seed != c.train.seed;
  return changes;
}

// model.init: auto loads the folder's weights when it has safetensors and
// initializes randomly from config.json otherwise; pretrained requires the
// weights; random ignores them. A resume loads the checkpoint's. One line
// says which happened.
models::CausalLM load_weights(const TrainConfig& c, const fs::path& resume_dir, ProgressBar& log) {
  const auto count_line = [&](const models::CausalLM& m, const fs::path& from) {
    log.message(
        fmt::format("weights: {} tensors loaded from {}", m.parameters().size(), from.string()));
  };
  if (!resume_dir.empty()) {
    models::CausalLM model = io::load_hf_model(resume_dir, DType::F32);
    count_line(model, resume_dir);
    return model;
  }
  const fs::path dir = c.model.path;
  const bool has_weights =
      fs::exists(dir / io::kHfWeightsFile) || fs::exists(dir / io::kHfIndexFile);
  LT_CHECK(has_weights || c.model.init != "pretrained", "model.init: pretrained, but '",
           dir.string(), "' has no weights (no ", io::kHfWeightsFile, " or ", io::kHfIndexFile,
           "); use model.init auto or random to start from random weights");
  if (c.model.init == "random" || !has_weights) {
    // Allocated from config.json alone; load_hf_model checks the same for
    // the others.
    const fs::path path = dir / "config.json";
    models::ModelConfig config = models::ModelConfig::from_file(path);
    io::check_model_fits_host(config, path, DType::F32);
    Generator init_gen(c.train.seed);
    log.message(
        fmt::format("weights: random (seed {}; {})", c.train.seed,
                    has_weights ? "model.init random" : dir.string() + " has no safetensors"));
    return models::CausalLM::random(config, init_gen, DType::F32);
  }
  models::CausalLM model = io::load_hf_model(dir, DType::F32);
  count_line(model, dir);
  return model;
}

void write_text_atomic(const fs::path& path, const std::string& text) {
  io::AtomicFileWriter w(path);
  w.write(text);
  w.commit();
}

}  // namespace

TrainRunResult run_training(const TrainConfig& requested, const TrainRunOptions& run) {
  const Device device = resolve_train_device(requested.train.device);
  // The saved config.yaml says what ran: train.dtype auto is resolved here.
  TrainConfig c = requested;
  c.train.dtype = resolve_compute_dtype(c.train.dtype, device.is_cuda());
  LT_CHECK(c.exec.mode != "offload",
           "exec.mode: 'offload' is not available yet; use auto, resident or streaming");
  LT_CHECK(c.train.dtype == "f32" || device.is_cuda(),
           "train.dtype: bf16 compute needs train.device cuda; on the CPU use f32");
  LT_CHECK(device.is_cpu() || c.exec.mode == "auto" || c.exec.mode == "resident" ||
               c.exec.mode == "streaming",
           "exec.mode: '", c.exec.mode, "' runs on the CPU only for now; with train.device ",
           c.train.device, " use auto, resident or streaming");
  const fs::path out_dir = c.out.dir;
  const OutDirLock lock(out_dir);  // before anything in out.dir is read or written
  remove_stale_saves(out_dir);     // a killed or failed save's leftovers
  if (const int n = exec::remove_stale_scratch_files(c.exec.disk_path.empty() ? out_dir.string()
                                                                              : c.exec.disk_path))
    fmt::print(stderr, "removed {} activation scratch file(s) a killed run left\n", n);
  const std::string config_yaml = c.to_yaml();
  write_text_atomic(out_dir / "config.yaml", config_yaml);
  fmt::print("lazytrain train: resolved config (saved to {})\n{}",
             (out_dir / "config.yaml").string(), config_yaml);
  std::fflush(stdout);  // before progress lines on stderr, also when piped

  ProgressBar progress(0, c.train.steps);
  for (const std::string& note : c.adjustments()) progress.message("config: " + note);
  const fs::path tok_dir = tokenizer_dir_of(c);
  std::optional<data::Tokenizer> tokenizer;
  if (c.data.format != "tokens")
    tokenizer = data::load_tokenizer_for(
        tok_dir, "data.format " + c.data.format,
        c.data.tokenizer.empty() ? "model.path (data.tokenizer is unset)" : "data.tokenizer");
  auto samples = load_samples(c, c.data.path, tokenizer ? &*tokenizer : nullptr, &progress);
  std::vector<data::Sample> eval_samples;
  if (!c.data.eval_path.empty()) {
    eval_samples = load_samples(c, c.data.eval_path, tokenizer ? &*tokenizer : nullptr, &progress);
  }

  // Model: resumed weights, pretrained weights, or a fresh initialization.
  fs::path resume_dir;
  if (run.resuming || !run.resume.empty()) resume_dir = resolve_checkpoint(run.resume, out_dir);
  const ResumeChanges resumed = compare_with_checkpoint(c, resume_dir, progress);
  models::CausalLM model = load_weights(c, resume_dir, progress);
  const int64_t vocab = model.config().vocab_size;
  data::check_ids_in_vocab(samples, vocab, c.data.path);
  data::check_ids_in_vocab(eval_samples, vocab, c.data.eval_path);

  // The f32 masters live on the training device; the optimizer's states
  // follow them there. The streaming executor keeps them in host memory and
  // streams bf16 copies to the GPU.
  // exec.mode auto: resident if it fits the training device, else streaming.
  const ExecutorChoice choice = choose_for_run(c, model.config(), device);
  progress.message(fmt::format("executor: {} ({})", choice.executor, choice.reason));
  if (device.is_cuda() && choice.executor != "streaming") model.to(device, DType::F32);

  optim::AdamWOptions adam;
  adam.lr = c.optim.lr;
  adam.beta1 = c.optim.betas[0];
  adam.beta2 = c.optim.betas[1];
  adam.eps = c.optim.eps;
  adam.weight_decay = c.optim.weight_decay;
  // adamw8bit: blockwise 8-bit states for tensors of at least
  // optim.min_8bit_numel elements, f32 states for the rest (issue 9).
  std::unique_ptr<optim::Optimizer> optimizer_owner;
  if (c.optim.name == "adamw8bit") {
    auto q8 = std::make_unique<optim::AdamW8bit>(
        model.parameters(), adam, c.optim.no_decay,
        optim::AdamW8bitOptions{c.optim.block_size, c.optim.min_8bit_numel});
    const optim::AdamW8bit::Split split = q8->split();
    progress.message(fmt::format(
        "optimizer adamw8bit: {} parameters with 8-bit states (blocks of {}), {} with f32 "
        "states (tensors under {} elements)",
        split.quantized, c.optim.block_size, split.fp32, c.optim.min_8bit_numel));
    optimizer_owner = std::move(q8);
  } else {
    optimizer_owner = std::make_unique<optim::AdamW>(model.parameters(), adam, c.optim.no_decay);
  }
  optim::Optimizer& optimizer = *optimizer_owner;
  PlannedFigures planned;  // exec.schedule auto: the planner's
  std::unique_ptr<exec::Executor> executor_owner =
      make_executor(c, choice, model, optimizer, device, &planned);
  exec::Executor& executor = *executor_owner;

  data::BatchOptions batch_options;
  batch_options.batch_size = c.train.batch_size / c.train.grad_accum;
  batch_options.seq_len = c.train.seq_len;
  batch_options.pack = c.data.pack;
  batch_options.seed = c.train.seed;
  // Padding is never predicted but is still embedded, so it must be a valid
  // id: EOS when the vocabulary has it (a trimmed vocabulary may not), else 0.
  if (auto eos = model.config().eos_token_ids;
      !eos.empty() && eos.front() >= 0 && eos.front() < vocab) {
    batch_options.pad_id = static_cast<int32_t>(eos.front());
  }
  data::Batcher batcher(samples, batch_options);

  TrainerState state;
  if (!resume_dir.empty()) {
    CheckpointContents ck = read_checkpoint(resume_dir);
    if (resumed.optimizer) {
      progress.message("resume: the optimizer changed; its states start from zero");
    } else {
      optimizer.load_state({ck.optimizer_state.begin(), ck.optimizer_state.end()});
    }
    state = ck.state;
    if (resumed.data) {
      state.sampler = {};
      progress.message("resume: the data or its order changed; reading starts at its beginning");
    }
    batcher.restore(state.sampler);
    progress.message(fmt::format("resumed from {} at step {}", resume_dir.string(), state.step));
  }
  LT_CHECK(state.step < c.train.steps || !resume_dir.empty(), "nothing to do");
  check_no_foreign_step_folders(out_dir, state.step, c.train.steps);

  optim::ScheduleOptions sched;
  sched.name = c.sched.name;
  sched.warmup_steps = c.effective_warmup_steps();
  sched.total_steps = c.train.steps;
  sched.base_lr = c.optim.lr;
  sched.min_lr = c.effective_min_lr();

  const double params = static_cast<double>(model.config().num_parameters());
  StopSignals signals;
  MetricsWriter metrics(out_dir / "metrics.jsonl", !resume_dir.empty(), state.step);
  ProgressBar bar(state.step, c.train.steps);
  TrainRunResult result;
  RunSummary summary;  // this run's steps, for its closing line
  bool warned_over_plan = false;
  fs::path last_saved;
  auto save = [&] {
    executor.sync();  // the streaming executor's updates may still be running
    state.sampler = batcher.state();
    last_saved = save_checkpoint(out_dir, model, optimizer.state(), state,
                                 {tok_dir, c.model.path, config_yaml, c.train.keep_last});
    bar.message("saved " + last_saved.string());
  };

  while (state.step < c.train.steps) {
    std::vector<data::Batch> micro;
    for (int64_t i = 0; i < c.train.grad_accum; ++i) micro.push_back(batcher.next());
    exec::StepOptions step_options;
    step_options.lr = optim::lr_at(sched, state.step);
    step_options.max_grad_norm = c.train.grad_clip;
    exec::StepStats stats = executor.step(micro, step_options);

    nlohmann::json line = step_json(state.step, stats, step_options.lr, params, planned.step_s);
    line["executor"] = executor.name();
    if (planned.gpu_peak_bytes > 0) {
      line["predicted_gpu_peak_bytes"] = planned.gpu_peak_bytes;
      const int64_t peak = device_peak(stats);
      if (peak > planned.gpu_peak_bytes && !warned_over_plan) {
        warned_over_plan = true;
        bar.message(fmt::format(
            "step {}: the device peak, {:.3f} GB, is over the {:.3f} GB the plan budgeted for "
            "(exec.schedule auto); a run closer to the device's memory may run out: lower "
            "exec.device_memory_gb by the difference",
            state.step + 1, peak / 1e9, planned.gpu_peak_bytes / 1e9));
      }
    }
    if (c.train.eval_every > 0 && !eval_samples.empty() &&
        (state.step + 1) % c.train.eval_every == 0) {
      executor.sync();
      // The model as trained computes it (the bf16 copy on a GPU).
      const auto* resident = dynamic_cast<const exec::ResidentExecutor*>(&executor);
      auto ev = exec::evaluate_samples(resident ? resident->compute_model() : model, eval_samples,
                                       batch_options.batch_size, c.train.seq_len);
      line["eval_loss"] = ev.loss;
      bar.message(fmt::format("step {}: eval loss {:.4f} over {} tokens", state.step + 1, ev.loss,
                              ev.tokens));
    }
    metrics.write(line);
    summary.add(line);
    result.final_loss = stats.loss;
    if (stats.skipped) {
      ++state.consecutive_bad_steps;
      bar.message(fmt::format(
          "step {}: non-finite loss or gradient (loss {}, grad norm {}); update skipped",
          state.step, stats.loss, stats.grad_norm));
      if (state.consecutive_bad_steps >= c.train.max_bad_steps) {
        bar.finish();
        fail("stopping: ", state.consecutive_bad_steps,
             " steps in a row had a non-finite loss or gradient (train.max_bad_steps = ",
             c.train.max_bad_steps, "); lower optim.lr or check the data");
      }
    } else {
      state.consecutive_bad_steps = 0;
    }
    ++state.step;
    bar.update(state.step - 1, stats.loss, line.at("tokens_per_s").get<double>(),
               line.at("tflops").get<double>(), fmt::format(" | lr {:.2e}", step_options.lr));
    const bool at_end = state.step == c.train.steps;
    if (signals.requested() && !at_end) {  // on the last step, finish normally
      bar.finish();
      bar.message("stop requested: saving and exiting");
      save();
      result.interrupted = true;
      break;
    }
    if (at_end || (c.train.save_every > 0 && state.step % c.train.save_every == 0)) save();
  }
  executor.sync();
  bar.finish();
  result.steps_done = state.step;
  result.last_checkpoint = last_saved.string();
  plot_loss_curve(out_dir / "metrics.jsonl", out_dir / "loss.png");
  // The greedy sample runs where the f32 masters are: on the GPU for the
  // resident executor on cuda (f32, TF32 GEMMs), on the host otherwise. The
  // streaming executor keeps its masters on the host because the model may
  // not fit the GPU, and a CPU forward of a model that size per token is
  // too slow for a sample: skipped there, saying so.
  if (run.sample_at_end && tokenizer && !result.interrupted) {
    if (device.is_cuda() && choice.executor == "streaming") {
      fmt::print("\nsample: skipped (exec.mode streaming keeps the model on the host)\n");
    } else {
      print_sample(model, *tokenizer, samples.front());
    }
  }
  if (const std::string closing = summary.line(); !closing.empty()) fmt::print("{}\n", closing);
  fmt::print("outputs: {} (metrics.jsonl, config.yaml, loss.png, checkpoints {})\n",
             out_dir.string(), last_saved.string());
  return result;
}

}  // namespace lt::train
