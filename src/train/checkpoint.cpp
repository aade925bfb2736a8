#include "train/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/bytes_text.h"
#include "io/atomic_file.h"
#include "io/hf_folder.h"
#include "io/hf_model.h"
#include "train/config.h"
#include "train/staged_checkpoint.h"
#include "train/tokenizer_files_for_transformers.h"

namespace lt::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStateFile = "trainer_state.json";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
// Written first into every folder a save creates, and into a checkpoint
// before it is deleted: Note [What a run may delete].
constexpr const char* kSaveMarker = ".lazytrain-save";

// From the model folder: the generation defaults, and a template kept with
// the model rather than the tokenizer.
constexpr const char* kModelFiles[] = {io::kHfGenerationFile, "chat_template.jinja",
                                       "chat_template.json"};

// N of a folder named step-N; nothing for any other name.
std::optional<int64_t> step_of(const std::string& name) {
  if (name.rfind("step-", 0) != 0 || name.size() == 5) return std::nullopt;
  char* end = nullptr;
  const long long n = std::strtoll(name.c_str() + 5, &end, 10);
  if (*end != '\0') return std::nullopt;
  return n;
}

// The training state in trainer_state.json's object; throws
// nlohmann::json::exception when a field is missing or of the wrong type.
TrainerState parse_state(const nlohmann::json& j) {
  TrainerState state;
  state.step = j.at("step").get<int64_t>();
  state.sampler.epoch = j.at("sampler").at("epoch").get<uint64_t>();
  state.sampler.position = j.at("sampler").at("position").get<uint64_t>();
  state.sampler.offset = j.at("sampler").at("offset").get<uint64_t>();
  // Written since data.sources; a checkpoint from before has one source.
  state.sampler.draws = j.at("sampler").value("draws", uint64_t{0});
  state.consecutive_bad_steps = j.value("consecutive_bad_steps", int64_t{0});
  state.previous_grad_norm =
      j.value("previous_grad_norm", std::numeric_limits<double>::quiet_NaN());
  // Written since the fingerprints; a checkpoint from before has none.
  if (j.contains("data")) {
    for (const nlohmann::json& source : j.at("data")) {
      state.data.push_back(
          {source.at("source").get<std::string>(), source.at("samples").get<uint64_t>(),
           source.at("in_order").get<uint64_t>(), source.at("any_order").get<uint64_t>()});
    }
  }
  return state;
}

// A folder as a checkpoint this program can resume from: why it is not one
// ("" when it is), and when it was saved.
struct Inspection {
  std::string problem;
  int64_t saved_at_ns = 0;
};

// Why the tensors of a checkpoint cannot be read ("" when they can): the
// model's weights as the loader finds them (model.safetensors, or every
// shard its index names), and every safetensors file's header against the
// file's length, which a disk filled mid-copy or a cut transfer leaves
// short. Only headers are read (mapped), not the tensors.
std::string unreadable_tensors(const fs::path& dir) {
  try {
    io::HfWeights(dir).check_all();
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.is_regular_file() && entry.path().extension() == ".safetensors")
        io::SafetensorsFile{entry.path()};
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The save time is "saved_at_ns" in trainer_state.json; a checkpoint from
// before that field has its state file's modification time.
Inspection inspect(const fs::path& dir) {
  if (!fs::is_regular_file(dir / kStateFile)) return {std::string("no ") + kStateFile, 0};
  Inspection found;
  try {
    std::ifstream in(dir / kStateFile);
    const auto j = nlohmann::json::parse(in);
    // 5.5 read as 5, and 1e30 as INT64_MIN: a step is a whole number.
    if (j.is_object() && j.contains("step") &&
        (!j.at("step").is_number_integer() ||
         (j.at("step").is_number_unsigned() &&
          j.at("step").get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))))
      return {fmt::format("{}: \"step\" is {}, not a whole number of steps", kStateFile,
                          j.at("step").dump()),
              0};
    const int64_t step = parse_state(j).step;
    // A step no save writes: resuming at it would cut metrics.jsonl and,
    // under out.overwrite, remove the checkpoints "after" it.
    if (step < 0) return {fmt::format("{}: \"step\" is {}, below 0", kStateFile, step), 0};
    if (const auto named = step_of(dir.filename().string()); named && *named != step)
      return {fmt::format("{}: \"step\" is {}, where the folder's name says {}", kStateFile, step,
                          *named),
              0};
    if (j.contains("saved_at_ns")) found.saved_at_ns = j.at("saved_at_ns").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    return {std::string(kStateFile) + " is malformed (" + e.what() + ")", 0};
  }
  for (const char* file : {kOptimizerFile, "config.json"}) {
    if (!fs::is_regular_file(dir / file)) return {std::string("no ") + file, 0};
  }
  // The config a resume without one takes, and compares with: unreadable,
  // it stopped the resume rather than being passed over.
  if (fs::exists(dir / "train_config.yaml")) {
    try {
      read_train_config_unchecked(dir / "train_config.yaml");
    } catch (const Error& e) {
      return {e.what(), 0};
    }
  }
  if (std::string problem = unreadable_tensors(dir); !problem.empty()) return {problem, 0};
  if (found.saved_at_ns == 0) {
    std::error_code ec;
    const auto t = fs::last_write_time(dir / kStateFile, ec);
    if (!ec) {
      found.saved_at_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::file_clock::to_sys(t).time_since_epoch())
                              .count();
    }
  }
  return found;
}

// step-N folders in out_dir that hold a checkpoint this program can resume
// from, oldest save first (ties by step). `skipped`, when given, gets each
// other step-N folder with why it is not one.
std::vector<fs::path> complete_checkpoints(const fs::path& out_dir,
                                           std::vector<std::string>* skipped = nullptr) {
  std::vector<std::pair<std::pair<int64_t, int64_t>, fs::path>> found;
  if (!fs::is_directory(out_dir)) return {};
  for (const auto& entry : fs::directory_iterator(out_dir)) {
    const auto n = step_of(entry.path().filename().string());
    if (!entry.is_directory() || !n) continue;
    const Inspection checkpoint = inspect(entry.path());
    if (checkpoint.problem.empty()) {
      found.push_back({{checkpoint.saved_at_ns, *n}, entry.path()});
    } else if (skipped) {
      skipped->push_back(entry.path().string() + " (" + checkpoint.problem + ")");
    }
  }
  std::sort(found.begin(), found.end());
  if (skipped) std::sort(skipped->begin(), skipped->end());
  std::vector<fs::path> dirs;
  for (auto& f : found) dirs.push_back(std::move(f.second));
  return dirs;
}

// complete_checkpoints() less those reached through a link: this run's own
// (Note [Links in out.dir]), whose bytes are on out_dir's file system and
// which it may prune.
std::vector<fs::path> own_checkpoints(const fs::path& out_dir) {
  std::vector<fs::path> own;
  for (fs::path& dir : complete_checkpoints(out_dir))
    if (!is_link(dir)) own.push_back(std::move(dir));
  return own;
}

// Note [A damaged checkpoint] (checkpoint.h): a step-N folder a save made,
// as its trainer_state.json shows (only a whole checkpoint is renamed into
// place, that file written last), that can no longer be read.
bool is_damaged_checkpoint(const fs::path& dir, const std::string& problem) {
  return !problem.empty() && fs::is_regular_file(dir / kStateFile);
}

// Renames a damaged checkpoint out of the step-N names, to step-N.damaged
// (step-N.damaged-2, ... when an earlier one has that name), keeping every
// file in it; returns the new name.
fs::path set_aside(const fs::path& dir) {
  const std::string name = dir.filename().string() + ".damaged";
  fs::path aside = dir.parent_path() / name;
  for (int i = 2; fs::exists(aside); ++i)
    aside = dir.parent_path() / (name + "-" + std::to_string(i));
  fs::rename(dir, aside);
  return aside;
}

// "out/step-3 is a symbolic link to 'x'": the start of the messages that
// refuse to save over a link (Note [Links in out.dir]).
std::string link_text(const fs::path& link) {
  std::error_code ec;
  return link.string() + " is a symbolic link to '" + fs::read_symlink(link, ec).string() + "'";
}

// Note [A save short of room] (checkpoint.h): what to do, when out_dir's
// file system has less room than a checkpoint takes; "" when it has room
// (the save failed for another reason) or its room is unknown.
std::string short_of_room(const fs::path& out_dir, int64_t step, const CheckpointOptions& options) {
  std::error_code ec;
  int64_t free = 0;
  if (options.free_bytes) {
    free = options.free_bytes(out_dir);
  } else {
    const fs::space_info space = fs::space(out_dir, ec);
    if (ec) return "";
    free = static_cast<int64_t>(space.available);
  }
  // Only this run's own folders: a link's bytes lie elsewhere.
  const std::vector<fs::path> own = own_checkpoints(out_dir);
  const int64_t needed = own.empty() ? options.expected_bytes : folder_bytes(own.back());
  // A file system counts blocks and metadata beyond the files' bytes: a
  // save can fail with a little more free than `needed`. 1% and 1 MiB
  // cover a checkpoint's handful of files.
  if (needed <= 0 || free >= needed + needed / 100 + (int64_t{1} << 20)) return "";
  std::string text = fmt::format(
      "cannot save step {}: out.dir '{}' is short of room: its file system has {} free, and a "
      "checkpoint takes about {}{}. train.keep_last prunes older checkpoints only once a save "
      "has succeeded, so that a failed save costs none of them. ",
      step, out_dir.string(), bytes_text(free), bytes_text(needed),
      own.empty() ? "" : " (the size of " + own.back().filename().string() + ")");
  if (own.empty())
    return text +
           "No checkpoint is saved in out.dir yet: free room on that file system (or set another "
           "out.dir), then run again";
  std::vector<std::string> older;
  for (size_t i = 0; i + 1 < own.size(); ++i)
    older.push_back(
        fmt::format("{} ({})", own[i].filename().string(), bytes_text(folder_bytes(own[i]))));
  const std::string newest = own.back().filename().string();
  if (older.empty())
    return text + fmt::format(
                      "out.dir holds no checkpoint besides {}, the one --resume latest continues "
                      "from: free room elsewhere on that file system, then --resume latest",
                      newest);
  return text + fmt::format(
                    "Checkpoints in out.dir besides {}, the one --resume latest continues from: "
                    "{}. Remove those you do not need (or free room elsewhere on that file "
                    "system), then --resume latest",
                    newest, fmt::join(older, ", "));
}

// A save that failed for another reason than room (out.dir made read-only,
// a permission, an I/O error): the write's error, led by the step it was
// saving, and what to resume from (it said only "PATH: Permission denied").
std::string failed_save(const fs::path& out_dir, int64_t step, const std::string& error) {
  const std::vector<fs::path> own = own_checkpoints(out_dir);
  const std::string what =
      fmt::format("cannot save step {} in out.dir '{}': {}. ", step, out_dir.string(), error);
  if (own.empty())
    return what +
           "No checkpoint is saved in out.dir yet: mend what the error names (or set "
           "another out.dir), then run again";
  return what + fmt::format(
                    "The checkpoints saved before are kept; --resume latest continues from {}, "
                    "once what the error names is mended",
                    own.back().string());
}

// The message of the exception in flight.
std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

void write_text(const fs::path& path, const std::string& text) {
  io::AtomicFileWriter w(path);
  w.write(text);
  w.commit();
}

// The marker's existence is what counts, so it is created in one call (not
// through a temporary file): a save killed before that call leaves an empty
// folder, which remove_stale_saves also takes.
void mark_as_ours(const fs::path& dir) {
  std::ofstream marker(dir / kSaveMarker);
  marker << getpid() << "\n";
  LT_CHECK(marker.good(), (dir / kSaveMarker).string(), ": cannot write");
}

// Removes a folder this program made, its marker last, so that a crash
// midway leaves a folder the next start still recognises and clears. Never
// through a link (Note [Links in out.dir]).
void remove_marked_dir(const fs::path& dir) {
  LT_CHECK(!is_link(dir), link_text(dir),
           ", not a folder this program made; it is left alone: move it out of out.dir");
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename() != kSaveMarker) fs::remove_all(entry.path());
  }
  fs::remove_all(dir);
}

// Deletes a checkpoint folder so that a crash midway never leaves a step-N
// that still has trainer_state.json but lacks its weights: the folder is
// marked, renamed out of the step-N namespace (one atomic rename), then
// removed.
void remove_checkpoint_dir(const fs::path& dir) {
  if (!fs::exists(fs::symlink_status(dir))) return;
  LT_CHECK(!is_link(dir), link_text(dir),
           ", not this run's checkpoint; it is left alone: move it out of out.dir");
  const std::string problem = inspect(dir).problem;
  LT_CHECK(problem.empty(), dir.string(), " is not a lazytrain checkpoint (", problem,
           "); it is left alone: move it out of out.dir");
  mark_as_ours(dir);
  const fs::path doomed =
      dir.parent_path() / ("." + dir.filename().string() + ".old-" + std::to_string(getpid()));
  if (fs::exists(doomed / kSaveMarker)) remove_marked_dir(doomed);
  fs::rename(dir, doomed);
  remove_marked_dir(doomed);
}

void copy_companions(const fs::path& from, const auto& names, const fs::path& to) {
  if (from.empty() || !fs::is_directory(from)) return;
  for (const char* name : names) {
    if (fs::is_regular_file(from / name) && !fs::exists(to / name))
      io::copy_file_atomic(from / name, to / name);  // synced: the folder's rename publishes it
  }
}

// data.tokenizer may name a file rather than a folder: its folder's
// companions (the chat template, tokenizer_config.json) come along, and a
// tokenizer.json under another name is kept as tokenizer.json, the name
// every loader (ours, transformers') looks for. Then the files transformers
// needs beside what lazytrain reads (GPT-2's encoder.json + vocab.bpe as
// vocab.json + merges.txt, a tokenizer_config.json naming the class and
// the EOS) are written: the checkpoint loads in transformers.
void copy_tokenizer(const fs::path& from, const fs::path& to) {
  if (!fs::is_regular_file(from)) {
    copy_companions(from, io::kHfTokenizerFiles, to);
  } else {
    copy_companions(from.parent_path(), io::kHfTokenizerFiles, to);
    const bool known =
        std::any_of(std::begin(io::kHfTokenizerFiles), std::end(io::kHfTokenizerFiles),
                    [&](const char* name) { return from.filename() == name; });
    // The file named is the tokenizer the run read, over a tokenizer.json
    // its folder also holds (another one: the checkpoint carried that
    // instead).
    if (!known && from.extension() == ".json") io::copy_file_atomic(from, to / "tokenizer.json");
  }
  write_tokenizer_files_for_transformers(to);
}

void write_checkpoint_files(const fs::path& dir, const models::CausalLM& model,
                            const std::vector<std::pair<std::string, Tensor>>& optimizer_state,
                            const TrainerState& state, const CheckpointOptions& options) {
  // model.path's config.json, the one the model was read or initialised
  // from, kept but for the dtype (io::save_hf_config).
  const fs::path source_config =
      options.model_dir.empty() ? fs::path() : options.model_dir / "config.json";
  if (options.staged) {
    write_staged_checkpoint_tensors(dir, model, optimizer_state, *options.staged, kOptimizerFile,
                                    source_config);
  } else {
    io::save_hf_model(model, dir, DType::F32, {.make_folder = false}, source_config);
    io::write_safetensors(dir / kOptimizerFile, optimizer_state);
  }
  copy_tokenizer(options.tokenizer_dir, dir);
  copy_companions(options.model_dir, kModelFiles, dir);
  if (!options.chat_template.empty()) io::write_chat_template(dir, options.chat_template);
  write_text(dir / "train_config.yaml", options.config_yaml);
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  nlohmann::json j = {{"step", state.step},
                      {"sampler",
                       {{"epoch", state.sampler.epoch},
                        {"position", state.sampler.position},
                        {"offset", state.sampler.offset},
                        {"draws", state.sampler.draws}}},
                      {"consecutive_bad_steps", state.consecutive_bad_steps},
                      {"saved_at_ns", now_ns}};
  // JSON has no NaN: a norm that is none is left out.
  if (std::isfinite(state.previous_grad_norm)) j["previous_grad_norm"] = state.previous_grad_norm;
  // Hashes as JSON integers: nlohmann (and Python) keep all 64 bits.
  j["data"] = nlohmann::json::array();
  for (const data::SourceFingerprint& f : state.data) {
    j["data"].push_back({{"source", f.source},
                         {"samples", f.samples},
                         {"in_order", f.in_order},
                         {"any_order", f.any_order}});
  }
  write_text(dir / kStateFile, j.dump(1) + "\n");
}

}  // namespace

fs::path save_checkpoint(const fs::path& out_dir, const models::CausalLM& model,
                         const std::vector<std::pair<std::string, Tensor>>& optimizer_state,
                         const TrainerState& state, const CheckpointOptions& options) {
  LT_CHECK(fs::is_directory(out_dir), "cannot save step ", state.step, ": out.dir '",
           out_dir.string(), "' is not there");
  const fs::path final_dir = out_dir / ("step-" + std::to_string(state.step));
  LT_CHECK(!is_link(final_dir), "cannot save step ", state.step, ": ", link_text(final_dir),
           ", not this run's checkpoint; the run deletes nothing through a link, nor the link: "
           "move it out of out.dir");
  const std::string problem = fs::exists(final_dir) ? inspect(final_dir).problem : "";
  const bool damaged = is_damaged_checkpoint(final_dir, problem);
  LT_CHECK(problem.empty() || damaged, "cannot save step ", state.step, ": ", final_dir.string(),
           " exists and is not a lazytrain checkpoint (", problem, "); move it out of out.dir");
  const fs::path tmp =
      out_dir / (".step-" + std::to_string(state.step) + ".tmp-" + std::to_string(getpid()));
  if (fs::exists(tmp / kSaveMarker)) remove_marked_dir(tmp);
  // Made here, not found: a link or a folder of that name is not this save's.
  LT_CHECK(fs::create_directory(tmp), "cannot save step ", state.step, ": ", tmp.string(),
           " is there and is not this program's; move it out of out.dir");
  try {
    mark_as_ours(tmp);
    write_checkpoint_files(tmp, model, optimizer_state, state, options);
    for (const fs::path& f : options.extra_files) fs::rename(f, tmp / f.filename());
    if (damaged) {
      // Only now that this save is written: a save that fails to write
      // leaves the damaged folder where it was.
      const fs::path aside = set_aside(final_dir);
      const std::string warning = "warning: " + final_dir.string() + " is a damaged checkpoint (" +
                                  problem + "); renamed it " + aside.string() + " to save step " +
                                  std::to_string(state.step) + " there (nothing in it was deleted)";
      if (options.warn) {
        options.warn(warning);
      } else {
        std::fprintf(stderr, "%s\n", warning.c_str());
      }
    } else {
      // Replace an earlier save of the same step (a resumed run re-saving it).
      remove_checkpoint_dir(final_dir);
    }
    fs::rename(tmp, final_dir);
    // On disk before any older checkpoint is pruned: a power cut must not
    // find the old ones gone and the new one's name not yet written.
    io::sync_directory(out_dir);
  } catch (...) {
    // A full disk or a failed write: the partial folder goes now, not at
    // the next start.
    std::error_code ec;
    fs::remove_all(tmp, ec);
    if (const std::string advice = short_of_room(out_dir, state.step, options); !advice.empty())
      fail(advice, " (", what_of(std::current_exception()), ")");
    fail(failed_save(out_dir, state.step, what_of(std::current_exception())));
  }
  fs::remove(final_dir / kSaveMarker);

  // Only this run's own folders are pruned: Note [Links in out.dir].
  std::vector<fs::path> own = own_checkpoints(out_dir);
  // A checkpoint the run cannot remove (made read-only, another user's) is
  // left: failing here stopped the run at every save after it had saved,
  // and a resume met the same folder at its next save.
  for (size_t i = 0; i + static_cast<size_t>(options.keep_last) < own.size(); ++i) {
    if (own[i] == final_dir) continue;
    try {
      remove_checkpoint_dir(own[i]);
    } catch (const std::exception& e) {
      if (options.unremovable && !options.unremovable->insert(own[i].string()).second) continue;
      // Cut short before the rename it is still the checkpoint; after it, a
      // marked folder the next start clears.
      const std::string where =
          fs::exists(own[i]) ? "it is left in place"
                             : "it was moved out of the way and is partly removed; the next run "
                               "in out.dir removes the rest";
      const std::string warning = fmt::format(
          "warning: could not remove {} to keep the last {} checkpoint{} (train.keep_last): {}; "
          "{}, and the run goes on",
          own[i].string(), options.keep_last, options.keep_last == 1 ? "" : "s", e.what(), where);
      if (options.warn) {
        options.warn(warning);
      } else {
        std::fprintf(stderr, "%s\n", warning.c_str());
      }
    }
  }
  return final_dir;
}

fs::path make_shard_folder(const fs::path& out_dir, int64_t step) {
  const fs::path dir = out_dir / (".step-" + std::to_string(step) + ".shards");
  if (fs::exists(dir / kSaveMarker)) remove_marked_dir(dir);
  LT_CHECK(fs::create_directory(dir), dir.string(),
           " is there and is not this program's; move it out of out.dir");
  mark_as_ours(dir);
  return dir;
}

std::vector<std::string> remove_stale_saves(const fs::path& out_dir) {
  if (!fs::is_directory(out_dir)) return {};
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(out_dir)) {
    const std::string name = entry.path().filename().string();
    // A link is not a save's folder, whatever it points to: Note [Links in out.dir].
    if (entry.is_symlink() || !entry.is_directory() || name.rfind(".step-", 0) != 0) continue;
    if (fs::exists(entry.path() / kSaveMarker) || fs::is_empty(entry.path()))
      stale.push_back(entry.path());
  }
  // One that will not go (made read-only) does not stop the run: it is a
  // save's leftover, not the run's input.
  std::vector<std::string> left;
  for (const auto& dir : stale) {
    try {
      remove_marked_dir(dir);
    } catch (const std::exception& e) {
      left.push_back(fmt::format(
          "warning: could not remove {}, a killed run's or a pruned checkpoint's leftover: {}; "
          "it is left (remove it by hand)",
          dir.string(), e.what()));
    }
  }
  return left;
}

void check_no_foreign_step_folders(const fs::path& out_dir, int64_t first_step, int64_t last_step) {
  if (!fs::is_directory(out_dir)) return;
  for (const auto& entry : fs::directory_iterator(out_dir)) {
    const std::string name = entry.path().filename().string();
    const auto n = step_of(name);
    if (!n || *n <= first_step || *n > last_step) continue;
    if (is_link(entry.path()))
      fail(link_text(entry.path()), ", and this run may save step ", *n,
           " there; move it out of out.dir (the run deletes nothing through a link, nor the link: "
           "it is not this run's)");
    const std::string problem = inspect(entry.path()).problem;
    if (problem.empty() || is_damaged_checkpoint(entry.path(), problem)) continue;
    fail(entry.path().string(), " is not a lazytrain checkpoint (", problem,
         "), and this run may save step ", *n,
         " there; move it out of out.dir (the run deletes nothing it did not make)");
  }
}

std::vector<fs::path> saved_checkpoints(const fs::path& out_dir) {
  return complete_checkpoints(out_dir);
}

bool is_link(const fs::path& path) {
  std::error_code ec;
  return fs::is_symlink(fs::symlink_status(path, ec));
}

int64_t folder_bytes(const fs::path& dir) {
  std::error_code ec;
  int64_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
    if (fs::is_regular_file(entry.symlink_status()))
      bytes += static_cast<int64_t>(entry.file_size(ec));
  }
  return bytes;
}

fs::path resolve_checkpoint(const std::string& resume, const fs::path& out_dir,
                            std::vector<std::string>* skipped, bool* looked_in_out_dir) {
  LT_CHECK(!resume.empty(),
           "--resume: empty; give a checkpoint folder (out.dir/step-N) or 'latest'");
  if (resume == "latest") {
    std::error_code ec;
    LT_CHECK(fs::exists(out_dir, ec), "--resume latest: out.dir '", out_dir.string(),
             "' is not there, so no run saved in it: check out.dir, or start the run without "
             "--resume");
    auto all = complete_checkpoints(out_dir, skipped);
    // A run killed before its first save finished left none (its cut-short
    // .step-N.tmp folder is removed at the next start): the way on is a
    // fresh start, which the message names.
    LT_CHECK(!all.empty(), "--resume latest: no complete checkpoint (step-N/ with ", kStateFile,
             ") in '", out_dir.string(),
             "': no save there has finished. Start the run without --resume (with "
             "out.overwrite: true where out.dir holds an earlier run's records)");
    return all.back().lexically_normal();
  }
  // A relative name is the current directory's, as the shell's; one that is
  // not there but is in out.dir ("--resume step-10") is out.dir's.
  fs::path dir = resume;
  std::error_code ec;
  if (dir.is_relative() && !fs::exists(fs::symlink_status(dir, ec)) && !out_dir.empty() &&
      fs::exists(out_dir / dir, ec)) {
    dir = out_dir / dir;
    if (looked_in_out_dir) *looked_in_out_dir = true;
  }
  if (!fs::exists(dir, ec)) {
    fail("--resume: '", resume, "' is not there",
         dir.is_relative()
             ? " (in the current directory, " + fs::current_path(ec).string() +
                   (out_dir.empty() ? "" : ", nor in out.dir '" + out_dir.string() + "'") + ")"
             : "",
         "; give a checkpoint folder (out.dir/step-N) or 'latest'");
  }
  // "out/step-2/" (a shell's completion) is the folder step-2: its name
  // and its parent are read from here on.
  dir = dir.lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  LT_CHECK(fs::exists(dir / kStateFile), "--resume: '", dir.string(),
           "' is not a checkpoint folder (no ", kStateFile, ")");
  const std::string problem = inspect(dir).problem;
  LT_CHECK(problem.empty(), "--resume: '", dir.string(), "' is a damaged checkpoint (", problem,
           "); resume from another (--resume latest takes the newest whole one)");
  return dir;
}

TrainerState read_trainer_state(const fs::path& dir) {
  std::ifstream in(dir / kStateFile);
  LT_CHECK(in.good(), (dir / kStateFile).string(), ": cannot open");
  try {
    return parse_state(nlohmann::json::parse(in));
  } catch (const nlohmann::json::exception& e) {
    fail((dir / kStateFile).string(), ": malformed training state (", e.what(), ")");
  }
}

CheckpointContents read_checkpoint(const fs::path& dir) {
  CheckpointContents c;
  c.dir = dir;
  c.state = read_trainer_state(dir);
  c.optimizer_state = io::read_safetensors(dir / kOptimizerFile);
  return c;
}

}  // namespace lt::train
