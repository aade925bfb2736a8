#pragma once
// Training checkpoints: out.dir/step-N/ holds a Hugging Face folder (config,
// f32 safetensors = the master weights, tokenizer, chat template and
// generation files) plus the training state (optimizer.safetensors,
// trainer_state.json, train_config.yaml). A checkpoint is built in a hidden
// temporary folder and renamed into place, so a crash mid-save never leaves
// a damaged step-N; trainer_state.json is written last. A step-N folder is
// taken for a checkpoint only when its trainer_state.json reads as one, its
// optimizer.safetensors and config.json are there, and its safetensors
// files (the model's, as the loader finds them, and every other) are whole.
//
// Note [What a run may delete]: out.dir may hold the user's own files. A
// run deletes only what this program made: folders carrying kSaveMarker
// (its temporary and doomed save folders) and checkpoints it reads as
// such. Pruning to train.keep_last and `--resume latest` order checkpoints
// by when they were saved, not by step number, so a run resumed from an
// earlier step keeps its own newest saves.
//
// Note [A damaged checkpoint]: a step-N folder with a trainer_state.json
// (so a save of this program put it there) that no longer reads as a
// checkpoint: that file is malformed, a file is missing, or a safetensors
// file's header does not fit the file's length (a truncated copy, a disk
// filled after the save). It is never pruned, deleted or overwritten;
// `--resume latest` passes over it, saying why, to the newest whole one.
// When a later save falls on its step (a run resumed from an older
// checkpoint reaches it again), that save, once written, renames the
// damaged folder step-N.damaged (.damaged-2, ...: no name is reused) and
// says so, then takes step-N: the run keeps training and saving, and the
// damaged files stay on disk for the user. A step-N folder without
// trainer_state.json is not this program's, and a run that would save
// there is refused before it starts.
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "data/batching.h"
#include "data/sample_fingerprint.h"
#include "exec/staged_states.h"
#include "models/causal_lm.h"

namespace lt::train {

struct TrainerState {
  int64_t step = 0;  // optimizer steps completed
  data::SamplerState sampler;
  int64_t consecutive_bad_steps = 0;
  // The global gradient norm of the last step (NaN: none, or it was
  // skipped): train.clip_with_previous_norm clips the next step with it, so
  // a resumed run clips as the uninterrupted one.
  double previous_grad_norm = std::numeric_limits<double>::quiet_NaN();
  // Of each training source the sampler walks (data.path, or data.sources'
  // split-train entries, in order; after data.eval_split): what its
  // position counts into. Empty: saved before they were recorded.
  std::vector<data::SourceFingerprint> data;
};

struct CheckpointContents {
  std::filesystem::path dir;
  TrainerState state;
  std::map<std::string, Tensor> optimizer_state;
};

// Where the companion files come from, and the pruning rule.
struct CheckpointOptions {
  // Tokenizer files and chat template, copied, with what transformers needs
  // to load them written beside (train/tokenizer_files_for_transformers.h).
  std::filesystem::path tokenizer_dir;
  // config.json (kept but for the dtype: io::save_hf_config) and
  // generation_config.json (and a template it holds).
  std::filesystem::path model_dir;
  std::string config_yaml;  // saved as train_config.yaml
  int64_t keep_last = 2;
  // Files moved into the checkpoint before it is committed: ZeRO-1's
  // optimizer shards, which every rank wrote into make_shard_folder's.
  std::vector<std::filesystem::path> extra_files;
  // Where the stages an executor keeps on disk are read from, one at a time
  // (exec/staged_states.h; train/staged_checkpoint.h); null: every weight
  // and optimizer state is in host memory.
  exec::StagedStates* staged = nullptr;
  // Where a save's warning goes (a damaged checkpoint set aside: Note [A
  // damaged checkpoint]); null: stderr.
  std::function<void(const std::string&)> warn = nullptr;
  // The chat template the run trained with, as Jinja, when it is a
  // built-in layout (train/trained_template.h): written over the copied
  // tokenizer's (io::write_chat_template). Empty: the copies stay as they are.
  std::string chat_template = {};
  // What a checkpoint takes on disk when out_dir holds none to measure
  // (checkpoint_bytes, train/schedule_auto.h), for the message of a save
  // that finds too little room; 0: unknown.
  int64_t expected_bytes = 0;
  // The free bytes of out_dir's file system; null: std::filesystem::space.
  // A test's stand-in for a full disk.
  std::function<int64_t(const std::filesystem::path&)> free_bytes = nullptr;
  // The checkpoints train.keep_last could not remove, warned of once each
  // (the run owns the set); null: warned at every save.
  std::set<std::string>* unremovable = nullptr;
};

// A hidden folder in out_dir (".step-N.shards") for the files the ranks
// write before rank 0 commits step `step` (ZeRO-1's optimizer shards):
// made empty, carrying the save marker, so that remove_stale_saves clears
// what a save that dies leaves.
std::filesystem::path make_shard_folder(const std::filesystem::path& out_dir, int64_t step);

// Writes out_dir/step-<state.step>/ and removes all but the `keep_last`
// most recently saved checkpoints. Returns the folder written. out_dir must
// be there (the run's lock made it): a folder deleted under a run is not
// made again. A failed save removes its temporary folder and leaves the
// earlier ones intact; a step-N folder that is not a checkpoint is never
// replaced (a damaged one is set aside: Note [A damaged checkpoint]), nor
// is a link (Note [Links in out.dir]).
//
// Note [A save short of room]: keep_last prunes only after a save
// succeeds, so that a failed save never leaves fewer checkpoints than
// before; on a nearly full disk a resume with a smaller keep_last then
// fails as the run did. When a save fails and out_dir's file system has
// less room than a checkpoint takes (the newest one's size, else
// `expected_bytes`), the error says both figures, lists out_dir's
// checkpoints other than the newest (the one `--resume latest` continues
// from) with their sizes, and says to remove what is not needed and
// `--resume latest`; the write's own error follows.
std::filesystem::path save_checkpoint(
    const std::filesystem::path& out_dir, const models::CausalLM& model,
    const std::vector<std::pair<std::string, Tensor>>& optimizer_state, const TrainerState& state,
    const CheckpointOptions& options);

// Removes what a killed or failed save left in out_dir (hidden ".step-"
// folders carrying the save marker, or empty); nothing else is touched. Call with out.dir's
// lock held (train/out_dir_lock.h), so no other run is saving there.
// Returns a warning for each folder that could not be removed.
std::vector<std::string> remove_stale_saves(const std::filesystem::path& out_dir);

// Refuses a step-N folder in out_dir, for N in (first_step, last_step], that
// is not a checkpoint and not a damaged one (which a save of that step sets
// aside: Note [A damaged checkpoint]): a save would have to replace it.
void check_no_foreign_step_folders(const std::filesystem::path& out_dir, int64_t first_step,
                                   int64_t last_step);

// The checkpoints in out_dir, oldest save first; links to one included
// (Note [Links in out.dir]).
std::vector<std::filesystem::path> saved_checkpoints(const std::filesystem::path& out_dir);

// Whether `path` is a symbolic link (Note [Links in out.dir]).
bool is_link(const std::filesystem::path& path);

// The bytes of the files under `dir`, links not followed.
int64_t folder_bytes(const std::filesystem::path& dir);

// "latest" = the most recently saved complete checkpoint in out_dir;
// anything else is a checkpoint folder, refused when it is damaged. A
// relative folder that is not in the current directory but is in out_dir
// ("step-10") is out_dir's (`looked_in_out_dir`, when given, says so for
// the caller to tell). The folder comes back lexically normal, without a
// trailing slash: "out/./step-2/" is out/step-2. Throws naming what is
// missing or damaged.
// With "latest", `skipped` (when given) gets each step-N folder that was
// passed over, with why: "out/step-305 (trainer_state.json is malformed
// (...))".
std::filesystem::path resolve_checkpoint(const std::string& resume,
                                         const std::filesystem::path& out_dir,
                                         std::vector<std::string>* skipped = nullptr,
                                         bool* looked_in_out_dir = nullptr);

// A checkpoint's trainer_state.json; throws naming the file when it is
// missing or malformed.
TrainerState read_trainer_state(const std::filesystem::path& dir);

// The training state and optimizer state of a checkpoint (the weights are
// read with io::load_hf_model).
CheckpointContents read_checkpoint(const std::filesystem::path& dir);

}  // namespace lt::train
