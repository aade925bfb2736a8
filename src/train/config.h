#pragma once
// The training configuration: YAML, strictly checked. Every key has a
// default; a config file (or, without one, the embedded demo) overrides
// them, and `--set key=value` overrides the file. Unknown keys, wrong types
// and impossible values are refused with a message naming the key.
#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "data/mixture.h"
#include "exec/zenflow_policy.h"
#include "optim/schedule.h"

namespace lt::train {

// Whether the command reads the config's data files (data.path,
// data.sources, data.eval_path), which must then exist.
enum class DataFiles { kRead, kNotRead };

struct TrainConfig {
  struct Model {
    std::string path;  // Hugging Face folder (config.json [+ weights])
    // auto: the folder's safetensors when it has them, else random weights
    // from config.json; pretrained: the weights (a folder without them is
    // an error); random: config.json only, even beside weights.
    std::string init = "auto";
  } model;
  struct Data {
    std::string path;  // one dataset; the shorthand for a one-entry `sources`
    // Several datasets mixed by weight (data/mixture.h); each entry's empty
    // format or template is data.format's or data.template's. Excludes path.
    std::vector<data::DataSource> sources;
    std::string format = "auto";         // auto|tokens|alpaca|query_response|sharegpt|text
    std::string template_name = "auto";  // key "template": auto|chatml|qwen3|llama3|plain
    std::string tokenizer;               // default: model.path
    bool train_on_prompt = false;
    bool pack = false;
    bool strict = false;       // refuse the file at the first bad row instead of skipping it
    std::string prompt_field;  // query_response: default by format detection
    std::string response_field;
    std::string eval_path;  // optional held-out file for train.eval_every
    // Fraction of the training rows held out for evaluation by a seeded hash
    // of their tokens (data/mixture.h); 0 = none.
    double eval_split = 0.0;
    // "" (loss only) or "math": eval_path's prompts also answered greedily
    // and scored by exact match (eval_accuracy).
    std::string eval_task;
    int64_t eval_max_new_tokens = 256;
    std::string eval_answer_field;  // the reference; "" = the row's response
  } data;
  struct Train {
    int64_t steps = 100;
    int64_t batch_size = 8;  // sequences per optimizer step
    int64_t grad_accum = 1;  // micro-batches per step; batch_size % grad_accum == 0
    int64_t seq_len = 512;
    double grad_clip = 1.0;  // max global norm; 0 = off
    // Clip step t's update with step t-1's global norm (its clip_scale)
    // instead of its own, so that the streaming executor can update each
    // stage as its gradients land, during the backward; the first step (and
    // the one after a skipped step) clips exactly. false: exact clipping.
    bool clip_with_previous_norm = false;
    uint64_t seed = 0;
    std::string device = "auto";  // auto|cpu|cuda
    // Compute type; master weights stay f32. auto: bf16 on cuda (what the
    // streaming executor needs, and half the activation memory), f32 on the
    // CPU (which has no bf16 kernels).
    std::string dtype = "auto";  // auto|f32|bf16
    int64_t eval_every = 0;      // 0 = never
    int64_t save_every = 0;      // 0 = only at the end
    int64_t keep_last = 2;       // checkpoints kept
    int64_t max_bad_steps = 5;   // stop after this many non-finite steps in a row
    // Run the decoder blocks through the fusion compiler (models/compiled_blocks.h):
    // elementwise and norm chains become compiled kernels. auto: on the
    // CPU where its plugin loads (a build with MLIR, libMLIR present); on a
    // GPU each kind of chain runs compiled only where timed faster than its
    // calls on this GPU (autograd/chain_choice.h; kernels from MLIR or the
    // cache folder). on: every chain compiled, which needs MLIR (or, on a
    // GPU, a filled cache), else an error. off: the default. true and false
    // read as on and off.
    std::string compile = "off";  // auto|on|off
  } train;
  struct Optim {
    std::string name = "adamw";  // adamw or adamw8bit
    double lr = 1e-4;
    std::vector<double> betas = {0.9, 0.999};
    double eps = 1e-8;
    double weight_decay = 0.0;
    std::vector<std::string> no_decay = {"bias", "norm"};
    // adamw8bit only: elements per absmax scale, and the size below which a
    // tensor keeps f32 states (see optim/adamw8bit.h).
    int64_t block_size = 2048;
    int64_t min_8bit_numel = 4096;
  } optim;
  struct Sched {
    std::string name = "constant";  // constant|linear|cosine
    // Unset (-1): warmup_ratio x train.steps, rounded up. A value over
    // train.steps is cut to it (with a warning).
    int64_t warmup_steps = -1;
    double warmup_ratio = 0.0;
    // Unset (-1): min_lr_ratio x optim.lr, so the floor follows the rate.
    double min_lr = -1;
    double min_lr_ratio = 0.0;
  } sched;
  struct Exec {
    // auto: resident when it fits the training device, else streaming
    // (train/executor_choice.h); resident|streaming|offload|zenflow force one.
    std::string mode = "auto";
    // streaming: "all_gpu", "every_k" (with keep_every), "auto" (the
    // planner chooses, for the profile `hardware`) or a schedule JSON path.
    std::string schedule = "all_gpu";
    std::string hardware;    // a profile YAML; "": measured once on a GPU (train/hardware_cache.h);
                             // "defaults": the built-in figures
    std::string disk_path;   // where disk-placed boundaries go; "" = out.dir
    int64_t keep_every = 4;  // every_k: boundaries kept on the device
    int64_t micro_batch = 0;      // sequences per chunk through a stage; 0 = whole micro-batch
    double device_memory_gb = 0;  // CPU stand-in device capacity; 0 = unlimited
    // (auto on the stand-in: its GPU capacity in the plan when > 0)
    // streaming: where the f32 masters and optimizer states live between
    // their stage's updates: host, disk (every stage's in a scratch file in
    // disk_path), or auto (on disk only the stages that do not fit
    // host_memory_gb; train/state_placement.h).
    std::string state_placement = "auto";
    // streaming on a GPU: what each stage's weight upload copies. bf16: a
    // pinned bf16 copy of every master that the CPU update writes (2 bytes
    // a parameter of host memory, half the upload bytes); f32: the masters
    // themselves, pinned, converted to bf16 on the GPU (no copy; twice the
    // upload bytes); auto: bf16 when the run fits host memory with the
    // copies, else f32 (train/state_placement.h).
    std::string weight_uploads = "auto";
    // streaming, exec.schedule auto: auto lets the planner keep whole
    // stages (their masters, optimizer states and gradients) on the GPU in
    // the room its schedule leaves, updated there (Note [Stages on the
    // device]); none streams every stage.
    std::string stages_on_device = "auto";
    // streaming, exec.schedule auto: auto lets the planner run the last
    // blocks and the head as one use, chunk by chunk, when no boundary is
    // offloaded and it is faster (Note [The fused tail]); off never does.
    std::string fused_tail = "auto";
    // The host memory a run may count on, in GB: what the memory budget's
    // host bytes must fit. 0: what is free now (less 1 GiB).
    double host_memory_gb = 0;
    // exec.zenflow.*, read by exec.mode zenflow (and auto when it picks
    // zenflow); named as DeepSpeed 0.19 names them (exec/zenflow_policy.h).
    struct ZenFlow {
      double topk_ratio = 0.1;
      std::string select_strategy = "auto";  // auto, step, epoch
      int64_t select_interval = 0;           // 0 = auto
      int64_t update_interval = 0;           // 0 = auto
      bool overlap_step = true;
      int64_t full_warm_up_rounds = 0;
      bool operator==(const ZenFlow&) const = default;
    } zenflow;
  } exec;
  // Several processes (docs/distributed.md); read only when launched as
  // several ranks.
  struct Dist {
    // How long a rank waits for the others in any collective or the
    // bootstrap before it stops, naming the ranks it waited for.
    double timeout_s = 300;
    // Resident: gradients are all-reduced in buckets of about this many
    // MB, each started as soon as its gradients are final in the backward.
    double bucket_mb = 25;
    // 1: ZeRO-1 for the offload executor: each rank keeps 1/N of the
    // optimizer state and updates 1/N of the masters.
    int64_t zero = 0;
    // With zero 1 on one host: the ranks share one copy of the weights in
    // POSIX shared memory (exec/shared_weights.h).
    bool share_weights = true;
  } dist;
  struct Out {
    std::string dir = "runs/latest";
    // A fresh run (no --resume) in an out.dir holding an earlier run's
    // checkpoints is refused unless this is set: it would replace them (its
    // saves prune them by train.keep_last, and metrics.jsonl starts over).
    bool overwrite = false;
  } out;
  // What assembling the config changed on its own (the embedded demo's
  // keys that overrides send back to their defaults): printed with the
  // adjustments, not a key.
  std::vector<std::string> assembly_notes;
  // Where each key's value was set: "FILE (line N)", or "--set KEY=VALUE"
  // (keys left at their defaults are absent); so too each item and field
  // of a list (data.sources[1], data.sources[1].weight). Not a key.
  std::map<std::string, std::string> key_origins;
  // "FILE (line N): " or "--set KEY=VALUE: " where `key` was set, to lead a
  // message about it; "" for a key left at its default.
  std::string where_set(const std::string& key) const;
  // The input paths (as resolved, absolute) that were written relative to
  // the working folder, for the hint when one is missed. Not a key.
  std::set<std::string> relative_inputs;
  // The path keys whose line in a config file goes on after the value
  // with a comment (`path: my file #1.jsonl` reads as "my file": YAML
  // starts a comment at ' #'), by key (data.sources[0].path): the hint a
  // message about the key's value adds, and the warning comment_warnings
  // gives ("" where the comment reads as one, `# train split`). Not a key.
  struct CommentAfterPath {
    std::string hint, warning;
  };
  std::map<std::string, CommentAfterPath> comments_after_paths;

  // Checks every value; throws lt::Error naming the key. With
  // DataFiles::kNotRead, the data files' existence is not (`lazytrain plan`
  // reads none, and plans a recipe before its data is there).
  void validate(DataFiles data_files = DataFiles::kRead) const;
  // validate(), the message led by where the key it names was set (the
  // file and line, or the --set override), when key_origins knows.
  void validate_naming_sources(DataFiles data_files = DataFiles::kRead) const;
  // The schedule's warmup and floor as they run: an unset key follows its
  // ratio, and a warmup longer than the run is cut to train.steps.
  int64_t effective_warmup_steps() const;
  double effective_min_lr() const;
  // The learning-rate schedule the run steps through (sched.*, optim.lr,
  // train.steps).
  optim::ScheduleOptions lr_schedule() const;
  // One line per value the run adjusts from what the config says (none
  // when nothing is adjusted).
  std::vector<std::string> adjustments() const;
  // A warning when optim.lr lies far outside the rates language models
  // train at (a typo such as 1e6 for 1e-6); "" when it does not. The rate
  // is taken as set: only the user knows it is wrong.
  std::string learning_rate_warning() const;
  // One warning for each path in a config file whose comment after it
  // looks like the rest of its name (`path: my file #1.jsonl`, read as
  // "my file"), naming the line and both readings; train and plan print
  // them at the start.
  std::vector<std::string> comment_warnings() const;
  // The resolved config as YAML text (printed at start, saved in out.dir).
  std::string to_yaml() const;
};

// Loads defaults <- `file` (or the embedded demo when `file` is empty) <-
// each "key=value" override (value parsed as YAML). Paths that begin with
// "@assets/" are resolved against the bundled assets folder.
// train.dtype with auto resolved for the training device.
std::string resolve_compute_dtype(const std::string& dtype, bool on_cuda);

// exec.zenflow.* as the executor takes them (steps_per_epoch unset: the
// trainer knows it).
exec::ZenFlowOptions zenflow_options(const TrainConfig& c);

// The input files of `c`'s data keys (data.path, data.eval_path, each
// data.sources entry's path, data.tokenizer) that are not there now, each
// "KEY (why)", as validate with DataFiles::kRead would refuse the first:
// `lazytrain plan` reads none of them and names them all.
std::vector<std::string> input_files_not_there(const TrainConfig& c);

TrainConfig load_train_config(const std::string& file, const std::vector<std::string>& overrides,
                              DataFiles data_files = DataFiles::kRead);

// One warning for each key that two of a command line's `--set` overrides
// set, naming the key and both (`--set optim.lr=1e-4 --set optim.lr=3e-4`
// ran at 3e-4 without a word), also where one sets it inside a mapping
// (exec.zenflow={topk_ratio: 0.1}) and the other by its name. The last
// still wins, as helm's and git -c's do: a wrapper script's defaults
// followed by the user's own are a repeat on purpose. train and plan
// --config print them before the config is read.
std::vector<std::string> overrides_given_twice(const std::vector<std::string>& overrides);

// A config file over the defaults, not validated: a checkpoint's
// train_config.yaml, read to resume from and to compare with.
TrainConfig read_train_config_unchecked(const std::filesystem::path& file);

// "key: old -> new" for every key whose value differs, in schema order.
std::vector<std::string> config_differences(const TrainConfig& before, const TrainConfig& after);

// The config `lazytrain train` runs: the file, or without one the embedded
// demo, or, for a resume without a file, the checkpoint's own
// train_config.yaml (found through `resume`: a folder, or "latest" in the
// out.dir the overrides or the demo name); then the overrides.
TrainConfig load_train_config_for(const std::string& file,
                                  const std::vector<std::string>& overrides,
                                  const std::string* resume);

// The embedded default: the demo run on the bundled corpus.
const char* embedded_demo_config();
// Where "@assets/" points: $LT_ASSETS_DIR, else the source tree's assets/.
std::filesystem::path assets_dir();

}  // namespace lt::train
