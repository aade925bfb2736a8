#include "train/report.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "core/bytes_text.h"
#include "core/error.h"
#include "core/program_path.h"
#include "core/shell_syntax.h"
#include "io/atomic_file.h"
#include "train/generate.h"
#include "train/progress.h"

extern char** environ;

namespace lt::train {

namespace fs = std::filesystem;

MetricsWriter::MetricsWriter(const fs::path& path, bool resuming, int64_t first_step,
                             std::function<void(const std::string&)> warn)
    : path_(path), warn_(std::move(warn)) {
  // Note [metrics.jsonl that is not a file]: a link to a device (/dev/null
  // to keep no record, /dev/full in a test) is written to, never read: read,
  // /dev/zero would fill memory with one endless line.
  if (resuming && fs::is_regular_file(path)) {
    std::ifstream in(path);
    std::string kept, line;
    while (std::getline(in, line)) {
      try {
        if (nlohmann::json::parse(line).at("step").get<int64_t>() < first_step) kept += line + "\n";
      } catch (const nlohmann::json::exception&) {
        // A torn last line from a killed run: drop it.
      }
    }
    io::AtomicFileWriter w(path);
    w.write(kept);
    w.commit();
    out_.open(path, std::ios::app);
  } else {
    out_.open(path, std::ios::trunc);
    // A record started over starts TensorBoard's over too: an earlier run's
    // event files (out.overwrite; a resume from another folder, whose first
    // step's restart mark hides only the steps from it on) would show its
    // steps beside this run's.
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(tensorboard_dir(path.parent_path()), ec))
      if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
        fs::remove(entry.path(), ec);
  }
  LT_CHECK(out_.good(), path.string(), ": cannot open for writing");
  try {
    tensorboard_.emplace(tensorboard_dir(path.parent_path()));
  } catch (const Error& e) {
    say(std::string("warning: no TensorBoard logs for this run: ") + e.what() +
        "; metrics.jsonl has every step");
  }
  to_tensorboard([&](io::TensorBoardEventWriter& tb) { tb.mark_restart(first_step); },
                 "at its start");
}

void MetricsWriter::to_tensorboard(const std::function<void(io::TensorBoardEventWriter&)>& write,
                                   const std::string& when) {
  if (!tensorboard_) return;
  try {
    write(*tensorboard_);
  } catch (const Error& e) {
    const std::string warning = "warning: TensorBoard logging stopped " + when + ": " + e.what() +
                                "; the run goes on, and metrics.jsonl has every step";
    tensorboard_.reset();
    say(warning);
  }
}

void MetricsWriter::say(const std::string& warning) const {
  if (warn_)
    warn_(warning);
  else
    std::fprintf(stderr, "%s\n", warning.c_str());
}

void MetricsWriter::write(const nlohmann::json& line) {
  const int64_t step = line.at("step").get<int64_t>();
  std::error_code size_error;
  const uintmax_t before =
      fs::is_regular_file(path_, size_error) ? fs::file_size(path_, size_error) : 0;
  errno = 0;
  out_ << line.dump() << "\n";
  out_.flush();
  // A lost metrics line is lost work: stop, as a failed save does. What a
  // full disk took of the line is cut off, so that the file stays lines of
  // JSON (a torn last line failed pandas and jq). The step is named as the
  // progress line counts (1-based), with its "step" field.
  if (!out_.good()) {
    const std::string why = errno != 0 ? std::strerror(errno) : "write failed";
    out_.close();
    std::error_code ec;
    if (!size_error && fs::is_regular_file(path_, ec)) fs::resize_file(path_, before, ec);
    fail(path_.string(), ": cannot write the metrics of step ", step + 1, " (\"step\": ", step,
         ") (", why,
         "): the run stops here, as its record of steps would have a gap; free space or fix the "
         "file");
  }
  to_tensorboard(
      [&](io::TensorBoardEventWriter& tb) { tb.add_scalars(step, tensorboard_scalars(line)); },
      "at step " + std::to_string(step));
}

fs::path tensorboard_dir(const fs::path& out_dir) {
  return out_dir / "tb";
}

std::vector<io::TensorBoardScalar> tensorboard_scalars(const nlohmann::json& line) {
  // The tag of each known key; the group (before '/') is a TensorBoard
  // section, so the charts a user watches most (train/) come apart from the
  // step's time split.
  static const std::map<std::string, std::string> tags = {
      {"loss", "train/loss"},
      {"lr", "train/lr"},
      {"grad_norm", "train/grad_norm"},
      {"tokens", "train/tokens"},
      {"target_count", "train/target_tokens"},
      {"tokens_per_s", "speed/tokens_per_s"},
      {"tflops", "speed/tflops"},
      {"step_s", "speed/step_s"},
      {"predicted_step_s", "speed/predicted_step_s"},
      {"compute_s", "time/compute_s"},
      {"recompute_s", "time/recompute_s"},
      {"exposed_h2d_s", "time/exposed_h2d_s"},
      {"exposed_d2h_s", "time/exposed_d2h_s"},
      {"exposed_disk_s", "time/exposed_disk_s"},
      {"optimizer_s", "time/optimizer_s"},
      {"states_disk_s", "time/states_disk_s"},
      {"bubbles_s", "time/bubbles_s"},
      {"eval_loss", "eval/loss"},
      {"eval_accuracy", "eval/accuracy"}};
  std::vector<io::TensorBoardScalar> scalars;
  const auto add = [&](std::string tag, double value) {
    scalars.push_back({std::move(tag), static_cast<float>(value)});
  };
  for (const auto& [key, value] : line.items()) {
    if (key == "step") continue;
    if (key == "peak_bytes") {
      for (const auto& [space, bytes] : value.items())
        add("memory/" + space + "_peak_gb", bytes.get<double>() / 1e9);
    } else if (key == "predicted_gpu_peak_bytes") {
      add("memory/planned_gpu_peak_gb", value.get<double>() / 1e9);
    } else if (value.is_number()) {
      const auto known = tags.find(key);
      add(known != tags.end() ? known->second : "other/" + key, value.get<double>());
    }
  }
  return scalars;
}

const char* memory_space_label(exec::MemorySpace space, const Device& device) {
  if (space == exec::MemorySpace::Gpu && !device.is_cuda()) return "device";
  return exec::memory_space_name(space);
}

std::string prediction_basis(const RunPlan& p) {
  // The CPU stand-in runs the streaming planner's schedule, priced for the
  // profile's GPU (the cost model is of a GPU), unless the profile's stage
  // times, its compute, were timed on a CPU.
  if (p.stage_times_device == "cpu")
    return p.device.is_cuda() ? " from stage times measured on a CPU, not a GPU"
                              : " from stage times measured on a CPU";
  return p.device.is_cuda() ? "" : " on the profile's GPU, not this CPU";
}

std::string run_plan_line(const RunPlan& p) {
  const auto gb = [&](exec::MemorySpace space) {
    return static_cast<double>(p.budget.bytes(space)) / 1e9;
  };
  std::string line = fmt::format(
      "plan: executor {} on {}; memory planned: {}{} {:.2f} GB, host {:.2f} GB, disk {:.2f} GB",
      exec::executor_name(p.executor), p.device.str(),
      memory_space_label(exec::MemorySpace::Gpu, p.device),
      p.device.is_cuda() ? "" : " (host memory)", gb(exec::MemorySpace::Gpu),
      gb(exec::MemorySpace::Host), gb(exec::MemorySpace::Disk));
  const double tokens = static_cast<double>(p.sizes.batch_size * p.sizes.seq_len);
  if (p.predicted_step_s > 0) {
    line += fmt::format("; predicted {:.0f} tokens/s ({:.3f} s a step of {} x {} tokens{})",
                        tokens / p.predicted_step_s, p.predicted_step_s, p.sizes.batch_size,
                        p.sizes.seq_len, prediction_basis(p));
  } else {
    // The plan's reasons say why (train/run_plan.cpp).
    line += p.device.is_cuda()
                ? "; no predicted speed (no measured profile of this model prices it)"
                : "; no predicted speed (the cost model predicts a GPU run's step)";
  }
  return line;
}

std::string where_to_look(const fs::path& out_dir, const fs::path& last_checkpoint, bool traced) {
  // The files there are (loss.png when drawn: gnuplot installed, a loss
  // to draw; none of a run stopped before it wrote any).
  std::vector<std::string> files;
  for (const char* name : {"metrics.jsonl", "config.yaml", "loss.png"})
    if (fs::exists(out_dir / name)) files.push_back(name);
  if (traced) files.push_back("trace.json");
  std::string text = fmt::format(
      "outputs: {} ({})\n", out_dir.string(),
      files.empty() ? std::string("nothing written") : fmt::format("{}", fmt::join(files, ", ")));
  text += fmt::format("  watch:       tensorboard --logdir {}\n",
                      shell_word(tensorboard_dir(out_dir).string()));
  text += last_checkpoint.empty()
              ? "  checkpoints: none saved\n"
              : fmt::format("  checkpoints: {} (the latest; a Hugging Face folder)\n",
                            last_checkpoint.string());
  return text;
}

nlohmann::json step_json(int64_t step, const exec::StepStats& s, double lr, double parameters,
                         double predicted_step_s) {
  const double tps = s.seconds > 0 ? static_cast<double>(s.tokens) / s.seconds : 0.0;
  // A step without a trained token computed nothing: its loss is null (not
  // a loss of 0), so that neither readers nor charts take it for one.
  const bool computed = s.target_count > 0;
  nlohmann::json j = {{"step", step},
                      {"loss", computed ? nlohmann::json(s.loss) : nlohmann::json(nullptr)},
                      {"lr", lr},
                      {"grad_norm", s.grad_norm},
                      {"tokens", s.tokens},
                      {"target_count", s.target_count},
                      {"step_s", s.seconds},
                      {"tokens_per_s", tps},
                      {"tflops", 6.0 * parameters * tps / 1e12},
                      {"compute_s", s.compute_s},
                      {"recompute_s", s.recompute_s},
                      {"exposed_h2d_s", s.exposed_h2d_s},
                      {"exposed_d2h_s", s.exposed_d2h_s},
                      {"exposed_disk_s", s.exposed_disk_s},
                      {"optimizer_s", s.optimizer_s},
                      {"bubbles_s", s.bubbles_s}};
  // PCIe bytes, where the executor counts them (offload, ZenFlow).
  if (s.h2d_bytes > 0 || s.d2h_bytes > 0) {
    j["h2d_bytes"] = s.h2d_bytes;
    j["d2h_bytes"] = s.d2h_bytes;
  }
  if (s.zenflow_window_steps > 0) j["zenflow_window_steps"] = s.zenflow_window_steps;
  if (s.states_disk_s > 0) j["states_disk_s"] = s.states_disk_s;  // streaming, states on disk
  // The rates the disk stages' reads and write-backs got (GB/s).
  if (s.states_read_s > 0) j["states_read_gbps"] = s.states_read_bytes / 1e9 / s.states_read_s;
  if (s.states_write_s > 0) j["states_write_gbps"] = s.states_write_bytes / 1e9 / s.states_write_s;
  // The streaming executor's CPU update rate (G parameters a second).
  if (s.cpu_update_s > 0)
    j["cpu_update_gparams_per_s"] = s.cpu_update_parameters / 1e9 / s.cpu_update_s;
  if (s.skipped) j["skipped"] = true;  // absent: the update was made
  if (s.stages_updated_before_skip > 0)
    j["stages_updated_before_skip"] = s.stages_updated_before_skip;
  if (predicted_step_s > 0) j["predicted_step_s"] = predicted_step_s;
  nlohmann::json peak = nlohmann::json::object();
  for (const auto& [space, bytes] : s.peak_bytes) peak[space] = bytes;
  j["peak_bytes"] = peak;
  return j;
}

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

void RunSummary::add(const nlohmann::json& step) {
  const int64_t n = step.at("step").get<int64_t>() + 1;  // 1-based, as the progress line
  ++steps_;
  // A step without a trained token computed nothing: its 0 tokens/s would
  // pull the medians down, so it is counted apart.
  if (step.contains("target_count") && step.at("target_count").get<int64_t>() == 0) {
    ++without_targets_;
    return;
  }
  if (first_step_ == 0)
    first_step_ = n;
  else if (second_step_ == 0)
    second_step_ = n;
  last_step_ = n;
  tokens_per_s_.push_back(step.at("tokens_per_s").get<double>());
  tflops_.push_back(step.at("tflops").get<double>());
  step_s_.push_back(step.at("step_s").get<double>());
  skipped_ += step.value("skipped", false) ? 1 : 0;
  if (step.contains("predicted_step_s"))
    predicted_step_s_ = step.at("predicted_step_s").get<double>();
  if (step.contains("cpu_update_gparams_per_s"))
    cpu_update_gparams_per_s_.push_back(step.at("cpu_update_gparams_per_s").get<double>());
  if (step.contains("predicted_gpu_peak_bytes"))
    planned_gpu_peak_ = step.at("predicted_gpu_peak_bytes").get<int64_t>();
  if (step.contains("peak_bytes"))
    for (const auto& [space, bytes] : step.at("peak_bytes").items())
      peaks_[space] = std::max(peaks_[space], bytes.get<int64_t>());
}

double RunSummary::median_cpu_update_gparams_per_s() const {
  return cpu_update_gparams_per_s_.empty() ? 0.0 : median_of(cpu_update_gparams_per_s_);
}

std::string RunSummary::line() const {
  if (steps_ == 0) return "";
  const std::string without_targets =
      without_targets_ == 0
          ? std::string()
          : fmt::format(" ({} without a trained token, left out: nothing computed)",
                        without_targets_);
  const size_t steps = step_s_.size();
  const char* plural = steps_ == 1 ? "" : "s";
  if (steps == 0) return fmt::format("summary: {} step{}{}", steps_, plural, without_targets);
  // The run's first step pays one-time set-up: left out unless it is all.
  const size_t first = steps > 1 ? 1 : 0;
  const auto median = [&](const std::vector<double>& v) {
    return median_of(std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(first), v.end()));
  };
  // Steps without a trained token inside the range are not in its median.
  const int64_t from = first == 0 ? first_step_ : second_step_;
  const int64_t counted = static_cast<int64_t>(steps - first);
  const std::string range =
      from == last_step_ ? fmt::format("step {}", from)
      : counted == last_step_ - from + 1
          ? fmt::format("steps {}-{}", from, last_step_)
          : fmt::format("the {} steps with a trained token in {}-{}", counted, from, last_step_);
  std::string line = fmt::format(
      "summary: {} step{}{}; median of {}: {:.0f} tokens/s, {} TFLOP/s, {:.3f} s a step", steps_,
      plural, without_targets, range, median(tokens_per_s_), format_tflops(median(tflops_)),
      median(step_s_));
  if (skipped_ > 0) line += fmt::format(" ({} skipped: no update)", skipped_);
  if (predicted_step_s_ > 0)
    line += fmt::format(" (predicted {:.3f} s{})", predicted_step_s_, prediction_basis_);
  // The first step's forward takes no CPU update: these start a step later.
  if (!cpu_update_gparams_per_s_.empty())
    line += fmt::format("; CPU updates at {:.2f} G params/s", median_cpu_update_gparams_per_s());
  if (!peaks_.empty()) {
    line += "; peak memory:";
    for (const auto& [space, bytes] : peaks_) {
      line += fmt::format(" {} {}", space, bytes_text(bytes));  // a tiny model's in MB
      if (planned_gpu_peak_ > 0 && (space == "gpu" || space == "device"))
        line += fmt::format(" (planned {})", bytes_text(planned_gpu_peak_));
    }
  }
  return line;
}

std::string run_summary(const std::vector<nlohmann::json>& steps) {
  RunSummary summary;
  for (const auto& step : steps) summary.add(step);
  return summary.line();
}

namespace {

// Runs gnuplot on `script` in `dir`, without a shell: the script names its
// files relative to `dir`, so no path is read as gnuplot or shell syntax
// (an out.dir holding `$(...)` ran it as a command when the script went
// through std::system; one holding a quote drew nothing). posix_spawn, not
// fork: a fork of a trainer holding tens of GB copies its page tables, and
// can fail under strict overcommit. Whether it succeeded.
bool run_gnuplot(const fs::path& gnuplot, const fs::path& dir, const std::string& script) {
  std::string program = fs::absolute(gnuplot).string(), flag = "-e", text = script;
  char* argv[] = {program.data(), flag.data(), text.data(), nullptr};
  posix_spawn_file_actions_t actions;
  if (posix_spawn_file_actions_init(&actions) != 0) return false;
  bool ready = posix_spawn_file_actions_addchdir_np(&actions, dir.c_str()) == 0;
  for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO})
    ready = ready && posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_RDWR, 0) == 0;
  pid_t pid = -1;
  const bool started = ready && posix_spawn(&pid, argv[0], &actions, nullptr, argv, environ) == 0;
  posix_spawn_file_actions_destroy(&actions);
  if (!started) return false;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

bool plot_loss_curve(const fs::path& metrics, const fs::path& png) {
  if (!fs::is_regular_file(metrics)) return false;  // Note [metrics.jsonl that is not a file]
  const fs::path gnuplot = find_in_path("gnuplot");
  if (gnuplot.empty()) return false;
  std::ifstream in(metrics);
  const fs::path dir = png.parent_path();
  const std::string dat_name = ".loss.dat", drawn_name = ".loss.png.tmp";
  size_t points = 0;
  {
    std::ofstream out(dir / dat_name);
    std::string line;
    while (std::getline(in, line)) {
      try {
        auto j = nlohmann::json::parse(line);
        out << j.at("step").get<int64_t>() << " " << j.at("loss").get<double>() << "\n";
        ++points;
      } catch (const nlohmann::json::exception&) {
      }
    }
  }
  // No loss to draw (a run stopped before its first step, or whose steps
  // had no trained token): gnuplot would leave an empty, broken loss.png.
  std::error_code ec;
  bool ok = false;
  // No loss to draw: an earlier run's loss.png would stand for this run's.
  if (points == 0) fs::remove(png, ec);
  if (points > 0) {
    const std::string script = fmt::format(
        "set terminal png size 800,500; set output '{}'; set xlabel 'step'; set ylabel 'loss'; "
        "set grid; plot '{}' using 1:2 with lines title 'training loss'",
        drawn_name, dat_name);
    ok = run_gnuplot(gnuplot, dir.empty() ? fs::path(".") : dir, script);
    if (ok) fs::rename(dir / drawn_name, png, ec);
    ok = ok && !ec;
  }
  fs::remove(dir / dat_name, ec);
  fs::remove(dir / drawn_name, ec);
  return ok;
}

int32_t sample_stop_token(const std::vector<int64_t>& eos_ids, const data::Tokenizer& tokenizer,
                          const data::Sample& sample, size_t prompt_len) {
  int32_t stop = eos_ids.empty() ? -1 : static_cast<int32_t>(eos_ids.front());
  // A chat sample's trained answer ends with its template's turn end
  // (<|im_end|>), which the model learned to stop at, and which config.json's
  // eos (Qwen's <|endoftext|>, or none) may not be.
  size_t answer_end = prompt_len;
  while (answer_end < sample.ids.size() && sample.labels[answer_end] != data::kIgnoreLabel) {
    ++answer_end;
  }
  for (const data::AddedToken& token : tokenizer.added_tokens()) {
    if (answer_end > prompt_len && token.special &&
        static_cast<int32_t>(token.id) == sample.ids[answer_end - 1]) {
      stop = sample.ids[answer_end - 1];
    }
  }
  return stop;
}

std::string sample_for_terminal(const std::string& decoded, size_t tokens) {
  const auto control = [](unsigned char ch) {
    return (ch < 0x20 && ch != '\n' && ch != '\t') || ch == 0x7f;
  };
  if (std::all_of(decoded.begin(), decoded.end(),
                  [&](unsigned char ch) { return std::isspace(ch) != 0 || control(ch); }))
    return fmt::format("({} tokens that print as white space or nothing)", tokens);
  std::string shown;
  for (const char c : decoded) {
    const auto ch = static_cast<unsigned char>(c);
    shown += control(ch) ? fmt::format("\\x{:02x}", ch) : std::string(1, c);
  }
  return shown;
}

void print_sample(const models::CausalLM& model, const data::Tokenizer& tokenizer,
                  const data::Sample& sample) {
  size_t prompt_len = 0;
  while (prompt_len < sample.ids.size() && sample.labels[prompt_len] == data::kIgnoreLabel) {
    ++prompt_len;
  }
  if (prompt_len == 0 || prompt_len == sample.ids.size())
    prompt_len = std::min<size_t>(8, sample.ids.size());
  std::vector<int32_t> prompt(sample.ids.begin(),
                              sample.ids.begin() + static_cast<int64_t>(prompt_len));
  const int32_t stop =
      sample_stop_token(model.config().eos_token_ids, tokenizer, sample, prompt_len);
  auto out = greedy_generate(model, prompt, 40, stop);
  // A briefly trained model often answers with end-of-text or blank lines
  // (or ids of a padded vocabulary's rows, which have no text): say so,
  // rather than print what looks like nothing at all.
  const std::string text = out.empty()
                               ? "(nothing: its first token was end-of-text)"
                               : sample_for_terminal(tokenizer.decode_known(out), out.size());
  print_text(
      stdout,
      fmt::format(
          "\nsample (greedy, 40 tokens at most)\n--- prompt ---\n{}\n--- model ---\n{}\n---\n",
          tokenizer.decode_known(prompt), text));
}

}  // namespace lt::train
