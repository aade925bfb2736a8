#include "train/generation_setup.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/bytes_text.h"
#include "core/error.h"
#include "data/dataset.h"
#include "exec/stand_in_device.h"
#include "io/hf_model.h"
#include "io/weight_values.h"
#include "models/context_limit.h"
#include "plan/hardware.h"
#include "train/generation.h"

#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#include "exec/cuda/streaming_device_cuda.h"
#endif

namespace lt::train {

namespace fs = std::filesystem;

namespace {

Device resolve_device(const std::string& name) {
#ifdef LT_WITH_CUDA
  const int gpus = cuda::device_count();
  const char* missing = "no CUDA device is visible";
#else
  const int gpus = 0;
  const char* missing = "this build has no CUDA backend (configure with -DLT_CUDA=ON)";
#endif
  LT_CHECK(name == "auto" || name == "cpu" || name == "cuda",
           "--device must be auto, cpu or cuda; got \"", name, "\"");
  if (name == "cpu" || (name == "auto" && gpus == 0)) return Device::cpu();
  LT_CHECK(gpus > 0, "--device cuda, but ", missing, "; use cpu or auto");
  return Device::cuda(0);
}

// "SOURCE:LINE" for a row of a file, "SOURCE" for --prompt (no line).
std::string row_place(const data::PromptRow& row, const std::string& source) {
  return row.line > 0 ? source + ":" + std::to_string(row.line) : source;
}

// Why a row's prompt cannot be answered; the callers say where the context
// comes from.
std::string no_room_text(const data::PromptRow& row, const std::string& source, int64_t context) {
  return fmt::format("{}: the prompt has {} tokens, more than the model's context of {}",
                     row_place(row, source), row.ids.size(), context);
}

}  // namespace

GenerationModel load_generation_model(const std::string& model_dir, const std::string& tokenizer,
                                      const std::string& device_name, bool tokenizer_required,
                                      const std::string& needed_by) {
  const Device device = resolve_device(device_name);
  // The GPU computes in bf16, as training does there (read as bf16 on the
  // host: half the host memory of f32, for a model streamed from it); the
  // CPU in f32.
  const DType dtype = device.is_cuda() ? DType::BF16 : DType::F32;
  GenerationModel g{.stream_device = nullptr,
                    .model = io::load_hf_model(model_dir, dtype),
                    .tokenizer = std::nullopt,
                    .tokenizer_path = {},
                    .eos_ids = {},
                    .device = device,
                    .model_dir = model_dir,
                    .placement = {},
                    .streamed = nullptr};
  if (const std::string nan = io::non_finite_weights_warning(g.model, model_dir); !nan.empty())
    fmt::print(stderr, "{}\n", nan);
  g.tokenizer_path = tokenizer.empty() ? fs::path(model_dir) : fs::path(tokenizer);
  if (tokenizer_required || data::Tokenizer::found_at(g.tokenizer_path)) {
    g.tokenizer = data::load_tokenizer_for(
        g.tokenizer_path, needed_by,
        tokenizer.empty() ? "--model (--tokenizer is unset)" : "--tokenizer");
    const std::string warning = data::check_tokenizer_runs_model(
        *g.tokenizer, g.model.config().vocab_size, models::model_config_file(model_dir));
    if (!warning.empty()) fmt::print(stderr, "{}\n", warning);
  }
  g.eos_ids = eos_ids_for(model_dir, g.model.config());
  return g;
}

void place_generation_model(GenerationModel& g, double device_memory_gb,
                            const data::PromptSet& prompts, int64_t batch_size,
                            int64_t max_new_tokens) {
  LT_CHECK(device_memory_gb >= 0, "--device-memory-gb must be 0 (no cap) or more, got ",
           device_memory_gb);
  const bool capped = device_memory_gb > 0;
  if (g.device.is_cpu() && !capped) return;  // f32, where it was loaded
  int64_t longest_prompt = 1;
  for (const data::PromptRow& row : prompts.rows)
    longest_prompt = std::max(longest_prompt, static_cast<int64_t>(row.ids.size()));
  const int64_t batch = std::clamp<int64_t>(static_cast<int64_t>(prompts.rows.size()), 1,
                                            std::max<int64_t>(batch_size, 1));
  const int64_t positions =
      std::min(g.model.config().exact_context(),
               longest_prompt + std::min(max_new_tokens, g.model.config().exact_context()));
  const DType dtype = g.device.is_cuda() ? DType::BF16 : DType::F32;
  const GenerationFootprint footprint =
      generation_footprint(g.model, dtype, batch, longest_prompt, positions);
  const std::string sizing = fmt::format(
      "{} row{} (--batch-size) of {} positions (the longest prompt, {} tokens, + "
      "--max-new-tokens {})",
      batch, batch == 1 ? "" : "s", positions, longest_prompt, max_new_tokens);
  int64_t budget = std::llround(device_memory_gb * 1e9);
  std::string source = fmt::format("--device-memory-gb {}", device_memory_gb);
  if (g.device.is_cuda() && !capped) {
#ifdef LT_WITH_CUDA
    // Less 1 GiB: cuBLAS's workspace, the allocator's rounding, and the
    // kernels' scratch, which the footprint does not count.
    budget = static_cast<int64_t>(cuda::device_free_memory(g.device.index)) - (int64_t{1} << 30);
    source = fmt::format("the GPU's free memory less 1 GiB, {},", bytes_text(budget));
#endif
  }
  try {
    g.placement = place_generation(footprint, budget, source, sizing);
  } catch (const Error& e) {
    fail(g.model_dir, ": ", e.what());
  }
  if (!g.placement.streamed) {
    if (g.device.is_cuda()) g.model.to(g.device, DType::BF16);
    return;
  }
  if (g.device.is_cuda()) {
#ifdef LT_WITH_CUDA
    g.stream_device = std::make_unique<exec::CudaStreamingDevice>(g.device.index);
#endif
  } else {
    exec::StandInOptions stand_in;
    stand_in.capacity_bytes = budget;
    g.stream_device = std::make_unique<exec::StandInDevice>(stand_in);
  }
  g.streamed =
      std::make_unique<exec::StreamedWeights>(g.model, *g.stream_device, g.placement.layout);
}

std::string generation_device_text(const GenerationModel& g) {
  std::string text = g.device.is_cuda() ? "the GPU (bf16)" : "the CPU (f32)";
  if (!g.streamed) return text;
  const GenerationPlacement& p = g.placement;
  text +=
      fmt::format(", streaming {} of {} blocks{} from host memory through {} slots: {} a step",
                  p.streamed_blocks, p.blocks, p.ends_streamed ? " and the embedding and head" : "",
                  p.layout.slots, bytes_text(p.streamed_bytes));
  if (!g.device.is_cuda()) return text + " (the CPU stand-in device)";
  // Every decode step copies the streamed bytes once: the link bounds it.
  const double gbps = plan::HardwareProfile{}.h2d_gbps;
  const double step_s = static_cast<double>(p.streamed_bytes) / (gbps * 1e9);
  return text + fmt::format(
                    "; at {} GB/s host-to-device (the H200's pinned rate), a decode step "
                    "takes at least {:.3f} s, {:.1f} steps/s",
                    gbps, step_s, 1.0 / step_s);
}

void check_prompts_have_answers(const data::PromptSet& prompts, const std::string& source,
                                const std::string& answer_setting) {
  LT_CHECK(!prompts.reference_field.empty(), source, ": ", prompts.format,
           " rows carry no reference answer; name its field with ", answer_setting);
  LT_CHECK(std::any_of(prompts.rows.begin(), prompts.rows.end(),
                       [](const data::PromptRow& r) { return r.reference.has_value(); }),
           source, ": none of its ", prompts.rows.size(), " rows has ", prompts.reference_source(),
           ", so nothing can be scored; name the reference answer's ", "field with ",
           answer_setting);
}

void check_prompts_fit(const data::PromptSet& prompts, const std::string& source,
                       const models::ModelConfig& config, const std::string& model_dir) {
  const int64_t context = config.exact_context();
  for (const data::PromptRow& row : prompts.rows) {
    LT_CHECK(static_cast<int64_t>(row.ids.size()) <= context, no_room_text(row, source, context),
             " (", config.exact_context_key(), " in ", model_dir,
             "/config.json); prompts are not cut: ",
             row.line > 0 ? "shorten the row or leave it out" : "shorten the prompt");
    for (int32_t id : row.ids) {
      LT_CHECK(id >= 0 && id < config.vocab_size, row_place(row, source), ": token id ", id,
               " is outside the model's vocabulary [0, ", config.vocab_size, ")");
    }
  }
}

std::string eos_outside_vocabulary_note(const GenerationModel& g, const std::string& command) {
  const int64_t vocab = g.model.config().vocab_size;
  std::vector<int32_t> outside;
  for (int32_t id : g.eos_ids)
    if (id >= vocab) outside.push_back(id);
  if (outside.empty()) return "";
  return fmt::format(
      "{}: note: end-of-sequence id{} {} (eos_token_id of {}'s generation_config.json, else "
      "config.json) lie{} outside the model's vocabulary of {}: no answer can end on {}",
      command, outside.size() > 1 ? "s" : "", fmt::join(outside, ", "), g.model_dir,
      outside.size() > 1 ? "" : "s", vocab, outside.size() > 1 ? "them" : "it");
}

PromptsPastContext leave_out_prompts_past_context(data::PromptSet& prompts,
                                                  const std::string& source,
                                                  const models::ModelConfig& config) {
  const int64_t context = config.exact_context();
  const auto fits = [&](const data::PromptRow& row) {
    return static_cast<int64_t>(row.ids.size()) <= context;  // the last position makes a token
  };
  const auto first_too_long = std::find_if_not(prompts.rows.begin(), prompts.rows.end(), fits);
  // Every row too long: all are kept, for check_prompts_fit to refuse.
  if (first_too_long == prompts.rows.end() ||
      std::none_of(prompts.rows.begin(), prompts.rows.end(), fits))
    return {};
  PromptsPastContext past;
  past.first =
      no_room_text(*first_too_long, source, context) + " (" + config.exact_context_key() + ")";
  past.rows = static_cast<int64_t>(std::erase_if(prompts.rows, std::not_fn(fits)));
  return past;
}

std::string skipped_rows_line(const std::string& command, const data::PromptSet& prompts,
                              const PromptsPastContext& past_context, const std::string& source) {
  const int64_t skipped = prompts.skipped + past_context.rows;
  if (skipped == 0) return "";
  std::string line = fmt::format("{}: {} of {} rows of {} skipped (first: ", command, skipped,
                                 prompts.read, source);
  if (prompts.skipped > 0) {
    line += prompts.problems.front() + ")";
    if (past_context.rows == 0) return line;
    line += fmt::format("; {} of them for the prompt's length (first: ", past_context.rows);
  }
  return line + past_context.first + "; prompts are not cut)";
}

}  // namespace lt::train
