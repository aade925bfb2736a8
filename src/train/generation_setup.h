#pragma once
// What `lazytrain generate` and `lazytrain eval --task math` load before
// generating: the model on its device, its tokenizer, the EOS ids, and the
// rows' prompts rendered as training renders them.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/prompt_rows.h"
#include "data/tokenizer.h"
#include "exec/streamed_weights.h"
#include "models/causal_lm.h"
#include "train/generation_placement.h"

namespace lt::train {

struct GenerationModel {
  // When blocks stream from host memory: first, so that it goes last, as
  // the model's weights and caches live in its memory (pinned host memory
  // on a GPU, all of it on the CPU stand-in).
  std::unique_ptr<exec::StreamingDevice> stream_device;
  // On the host until place_generation_model: bf16 for a GPU, else f32.
  models::CausalLM model;
  std::optional<data::Tokenizer> tokenizer;
  std::filesystem::path tokenizer_path;  // where it was read (the model folder by default)
  std::vector<int32_t> eos_ids;          // generation_config.json / config.json
  Device device;                         // where it generates (--device, resolved)
  std::string model_dir;
  GenerationPlacement placement;
  // Last, so that it goes first: it waits for the copies it queued.
  std::unique_ptr<exec::StreamedWeights> streamed;
};

// `device`: auto (the first GPU in bf16 when this build has CUDA and one is
// visible, else the CPU in f32), cpu (f32) or cuda (bf16). `tokenizer`:
// a tokenizer.json or its folder; empty = the model folder. When
// `tokenizer_required` is false a folder without one loads no tokenizer.
GenerationModel load_generation_model(const std::string& model_dir, const std::string& tokenizer,
                                      const std::string& device, bool tokenizer_required,
                                      const std::string& needed_by);

// Once the prompts are known: puts the model on its device for batches
// of `batch_size` rows of `prompts` (generation_placement.h), each of up
// to its longest prompt + `max_new_tokens` tokens. On a GPU the budget is `device_memory_gb`
// (--device-memory-gb) when above 0, else the free memory less 1 GiB; on
// the CPU a budget streams through the CPU stand-in device
// (exec/stand_in_device.h) of that capacity, and none keeps it all in place.
void place_generation_model(GenerationModel& g, double device_memory_gb,
                            const data::PromptSet& prompts, int64_t batch_size,
                            int64_t max_new_tokens);

// What the run's first line says of the device: "the GPU (bf16)", or with
// streaming which blocks stream, the bytes a step copies and the step time
// that the host-to-device bandwidth allows.
std::string generation_device_text(const GenerationModel& g);

// A line for the EOS ids the model can never emit (past config.json's
// vocab_size: no answer ends on them, so answers run to the token limit);
// empty when there are none. transformers' tiny test configs keep GPT-2's
// 50256 with small vocabularies, so this is said, not refused.
std::string eos_outside_vocabulary_note(const GenerationModel& g, const std::string& command);

// Refuses, naming `source` (the file, or --prompt) and the row's line, a row whose prompt leaves no
// room in the model's context for one new token, or holds an id outside the vocabulary. Prompts are
// never cut: an answer to half a question would be scored as if it answered the whole one.
void check_prompts_fit(const data::PromptSet& prompts, const std::string& source,
                       const models::ModelConfig& config, const std::string& model_dir);

// The rows of a file whose prompt leave_out_prompts_past_context left out.
struct PromptsPastContext {
  int64_t rows = 0;
  std::string first;  // "file:line: the prompt has N tokens, ..." of the first one
};

// For a file's rows (generate --data, eval --task math): leaves out of
// `prompts` the rows whose prompt is longer than the model's context (one
// of the whole context still makes a token), as load_prompts skips a malformed row, so that the
// others are answered (prompts are never cut). When every row is too long none is left out:
// check_prompts_fit then refuses the first, as it refuses --prompt.
PromptsPastContext leave_out_prompts_past_context(data::PromptSet& prompts,
                                                  const std::string& source,
                                                  const models::ModelConfig& config);

// "COMMAND: N of M rows of SOURCE skipped (first: ...)", counting the rows
// load_prompts skipped and those `past_context` left out, the first of each
// named; empty when none was.
std::string skipped_rows_line(const std::string& command, const data::PromptSet& prompts,
                              const PromptsPastContext& past_context, const std::string& source);

// Refuses, naming `source` and `answer_setting` (--answer-field,
// data.eval_answer_field), prompts of which none carries a reference answer
// to score against: a math task on them scores "0 of 0".
void check_prompts_have_answers(const data::PromptSet& prompts, const std::string& source,
                                const std::string& answer_setting);

}  // namespace lt::train
