// `lazytrain convert --model DIR --out DIR [--dtype bf16|f16|f32]
// [--max-shard-gb G]`: rewrites a Hugging Face folder as lazytrain writes
// it (config + sharded safetensors), with the tokenizer and generation
// files copied so the result is complete, and the license files and model
// card (LICENSE, USE_POLICY.md, README.md, ...), which a model's license
// may require to go with its weights. It prints what it copied and, in one
// line, what it left behind.
//
// The new folder is built beside --out under a hidden name and renamed into
// place only when complete, as checkpoints are: a full disk or a crash
// midway leaves --out as it was (a half-written folder once paired a new
// config.json saying float32 with the old bf16 weights). An existing --out
// is replaced whole, so no file of an earlier folder (a stale
// tokenizer.json, shards of another split) survives beside the new weights.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>

#include "cli/commands.h"
#include "cli/shell_expanded_path.h"
#include "core/regular_file.h"
#include "data/tokenizer.h"
#include "io/atomic_file.h"
#include "io/hf_folder.h"
#include "io/hf_model.h"
#include "io/weight_values.h"
#include "train/tokenizer_files_for_transformers.h"

namespace lt::cli {

namespace {

namespace fs = std::filesystem;

struct ConvertArgs {
  std::string model;
  std::string out;
  std::string dtype = "bf16";
  double max_shard_gb = 5.0;
};

// Files a Hugging Face folder carries besides the weights and config.
// A checkpoint's train_config.yaml goes along: generate and eval read the
// template and fields it was trained with from it (train/trained_template.h),
// which a converted checkpoint lost.
constexpr auto kCompanionFiles = [] {
  std::array<const char*, std::size(io::kHfTokenizerFiles) + 2> files{};
  std::copy(std::begin(io::kHfTokenizerFiles), std::end(io::kHfTokenizerFiles), files.begin());
  files[files.size() - 2] = io::kHfGenerationFile;
  files.back() = "train_config.yaml";
  return files;
}();

// Whether `name` is a license or a note that goes with the weights: Llama's
// license asks that it travel with them (LICENSE, USE_POLICY.md), and a
// model card (README.md) says what the weights are. LICENSE, LICENSE.txt,
// LICENSE-MODEL, LICENCE.md, NOTICE, COPYING, README.md, USE_POLICY.md,
// ACCEPTABLE_USE_POLICY.txt, in any case; as text (no extension, .txt,
// .md, .rst), so a guide in PDF or an image is not taken for one.
bool is_license_like(const std::string& name) {
  std::string lower;
  for (const char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string stem = lower;
  for (const char* extension : {".txt", ".md", ".rst"}) {
    if (lower.ends_with(extension)) stem = lower.substr(0, lower.size() - std::strlen(extension));
  }
  if (stem.find('.') != std::string::npos) return false;
  if (stem.starts_with("license") || stem.starts_with("licence")) return true;
  for (const char* known : {"copying", "notice", "readme", "use_policy", "acceptable_use_policy"}) {
    if (stem == known) return true;
  }
  return false;
}

// Written first into the folder being built, so that a later convert can
// tell a folder a killed convert left from anything else.
constexpr const char* kBuildMarker = ".lazytrain-convert";

// The license-like files convert copied into its output, one name a line:
// a later convert to the same --out may replace those, and only those (a
// README.md the user put there is theirs).
constexpr const char* kCopiedList = ".lazytrain-convert-copied";

std::set<std::string> copied_into(const fs::path& out) {
  std::set<std::string> names;
  std::ifstream in(out / kCopiedList);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) names.insert(line);
  return names;
}

// Whether `name` in an existing --out is a file convert writes (or a
// companion it copies); a license-like file only when convert's list says
// it copied it (`copied`).
bool is_written_by_convert(const std::string& name, const std::set<std::string>& copied) {
  if (name == "config.json" || name == io::kHfWeightsFile || name == io::kHfIndexFile ||
      name == kBuildMarker || name == kCopiedList) {
    return true;
  }
  if (name.starts_with("model-") && name.ends_with(".safetensors")) return true;
  for (const char* companion : kCompanionFiles) {
    if (name == companion) return true;
  }
  return is_license_like(name) && copied.contains(name);
}

// Whether `name` in the source folder is what convert writes anew: the
// config and the weights (which it read), not files to copy.
bool is_rewritten_by_convert(const std::string& name) {
  return name == "config.json" || name == io::kHfWeightsFile || name == io::kHfIndexFile ||
         (name.starts_with("model-") && name.ends_with(".safetensors"));
}

// The files of the source folder that go into the new one: the companions,
// then the license-like files (regular files, or links to one), each by
// name; `left` gets the other entries, which convert neither copies nor
// writes anew (a folder with a trailing "/").
std::vector<std::string> files_to_copy(const fs::path& model, std::vector<std::string>* left) {
  std::vector<std::string> copied;
  std::vector<std::string> companions;
  for (const auto& entry : fs::directory_iterator(model)) {
    const std::string name = entry.path().filename().string();
    if (is_rewritten_by_convert(name)) continue;
    const bool companion = std::any_of(kCompanionFiles.begin(), kCompanionFiles.end(),
                                       [&](const char* c) { return name == c; });
    if (companion && entry.exists()) {
      // Refused when copied (require_regular_file) if not a file: a
      // tokenizer.json that is a FIFO is an error, not a file to leave.
      companions.push_back(name);
    } else if (is_license_like(name) && entry.is_regular_file()) {
      copied.push_back(name);
    } else {
      left->push_back(entry.is_directory() ? name + "/" : name);
    }
  }
  std::sort(companions.begin(), companions.end());
  std::sort(copied.begin(), copied.end());
  std::sort(left->begin(), left->end());
  companions.insert(companions.end(), copied.begin(), copied.end());
  return companions;
}

// Copies `src` to `dst`, synced (io::copy_file_atomic): the rename that
// publishes the folder must not publish a file whose bytes are still only
// in the page cache.
void copy_synced(const fs::path& src, const fs::path& dst) {
  require_regular_file(src);
  io::copy_file_atomic(src, dst);
}

// An existing --out is replaced whole; that must not take files the user
// put there, so a folder holding anything convert does not write is refused.
void check_out(const fs::path& out) {
  std::error_code ec;
  const fs::file_status status = fs::status(out, ec);
  if (!fs::exists(status)) return;
  if (!fs::is_directory(status)) {
    fail("--out ", out.string(),
         " exists and is not a folder; give the folder to write (it is created if missing)");
  }
  std::vector<std::string> foreign;
  const std::set<std::string> copied = copied_into(out);
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (!is_written_by_convert(name, copied) || !entry.is_regular_file()) foreign.push_back(name);
  }
  if (foreign.empty()) return;
  std::sort(foreign.begin(), foreign.end());  // the same names each time, not the folder's order
  std::string list;
  for (size_t i = 0; i < foreign.size() && i < 5; ++i) list += (i ? ", " : "") + foreign[i];
  fail("--out ", out.string(), " holds ", foreign.size(),
       foreign.size() == 1 ? " entry" : " entries", " convert does not write (", list,
       foreign.size() > 5 ? ", ..." : "",
       "); the folder is replaced whole, so they would be lost: move them, or choose another "
       "--out");
}

void fsync_dir(const fs::path& dir) {
  // Some filesystems refuse fsync on a folder; the files are complete, so
  // that is not an error.
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Removes folders that a killed convert to the same --out left: those with
// the marker whose process is gone.
void remove_abandoned_builds(const fs::path& parent, const std::string& prefix) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || !fs::exists(entry.path() / kBuildMarker)) continue;
    const pid_t pid = static_cast<pid_t>(std::atoll(name.c_str() + prefix.size()));
    if (pid > 0 && pid != ::getpid() && (::kill(pid, 0) == 0 || errno != ESRCH)) continue;
    fs::remove_all(entry.path(), ec);
  }
}

// Puts the finished `built` folder at `out`: a rename onto a missing --out,
// else an atomic exchange (the old folder then sits at `built`, removed).
void move_into_place(const fs::path& built, const fs::path& out) {
  if (!fs::exists(out)) {
    fs::rename(built, out);
    return;
  }
  if (::renameat2(AT_FDCWD, built.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) != 0) {
    // No RENAME_EXCHANGE on this filesystem: two renames, with --out
    // missing for the moment between them.
    if (errno != EINVAL && errno != ENOSYS) {
      fail("cannot replace --out ", out.string(), ": ", std::strerror(errno));
    }
    const fs::path old = built.string() + "-old";
    fs::rename(out, old);
    fs::rename(built, out);
    fs::remove_all(old);
    return;
  }
  fs::remove_all(built);
}

// The tokenizer convert copies must fit the model it writes, as train,
// eval and generate check it (data::check_tokenizer_runs_model): a
// vocabulary past the embedding's rows is another model's and refused;
// added tokens alone past them (Llama 2's <pad>) are warned of. A
// tokenizer this program cannot read is copied unchecked, with a warning:
// converting the weights does not need it.
void check_tokenizer_fits(const fs::path& model_dir, int64_t vocab_size) {
  if (!data::Tokenizer::found_at(model_dir)) return;
  std::optional<data::Tokenizer> tokenizer;
  try {
    tokenizer.emplace(data::Tokenizer::load(model_dir));
  } catch (const Error& e) {
    fmt::print(stderr,
               "warning: {}: the tokenizer cannot be read ({}), so its ids are not checked "
               "against config.json's vocab_size; it is copied as it is\n",
               model_dir.string(), e.what());
    return;
  }
  const std::string warning = data::check_tokenizer_runs_model(
      *tokenizer, vocab_size, (model_dir / "config.json").string());
  if (!warning.empty()) fmt::print(stderr, "{}\n", warning);
}

void run_convert(const ConvertArgs& args) {
  LT_CHECK(args.dtype == "bf16" || args.dtype == "f32" || args.dtype == "f16",
           "--dtype must be bf16, f16 or f32, got '", args.dtype, "'");
  // Checked here: CLI11's PositiveNumber printed its range, 300 digits long.
  if (!std::isfinite(args.max_shard_gb) || args.max_shard_gb < 1e-9 || args.max_shard_gb > 1e9) {
    fail("--max-shard-gb must be a size in GB (10^9 bytes) between 1e-9 and 1e9, got ",
         args.max_shard_gb);
  }
  // Before --out is looked at: the folder to read is the first thing
  // wrong when it is not a model's (a GGUF download), as train says it.
  if (fs::is_directory(args.model))
    if (const std::string why = io::not_a_model_folder(args.model); !why.empty())
      fail("--model ", why);
  fs::path out = fs::absolute(args.out).lexically_normal();
  if (out.filename().empty()) out = out.parent_path();  // "dir/"
  LT_CHECK(!args.out.empty() && !out.filename().empty() && out.filename() != "..",
           "--out must name a folder, got '", args.out, "'");
  LT_CHECK(fs::weakly_canonical(args.model) != fs::weakly_canonical(out),
           "--out must differ from --model (the source would be overwritten while read)");
  check_out(out);
  const DType dtype = dtype_from_name(args.dtype);
  models::CausalLM model = io::load_hf_model(args.model, DType::F32);
  check_tokenizer_fits(args.model, model.config().vocab_size);
  const io::WeightValueReport values = io::check_weight_values(model, dtype);
  LT_CHECK(values.beyond_dtype.empty(), "--dtype ", args.dtype, ": ", args.model,
           " holds weights beyond ", args.dtype, "'s range, which would be written as inf: ",
           fmt::format("{}", fmt::join(values.beyond_dtype, "; ")), "; use --dtype ",
           dtype == DType::F16 ? "bf16 or f32" : "f32");
  if (!values.not_finite.empty())
    fmt::print(stderr, "warning: {} holds weights that are NaN or inf (written as they are): {}\n",
               args.model, fmt::join(values.not_finite, "; "));

  std::vector<std::string> left;
  const std::vector<std::string> copied = files_to_copy(args.model, &left);

  const fs::path parent = out.parent_path();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) fail("--out ", out.string(), ": cannot create its parent folder: ", ec.message());
  const std::string prefix = "." + out.filename().string() + ".convert-";
  remove_abandoned_builds(parent, prefix);
  const fs::path built = parent / (prefix + std::to_string(::getpid()));
  if (fs::exists(built / kBuildMarker)) fs::remove_all(built, ec);  // a reused pid's
  if (!fs::create_directory(built, ec) || ec) {
    fail("--out ", out.string(), ": cannot create the folder to build it in, ", built.string(),
         ": ", ec ? ec.message() : "it exists");
  }
  std::vector<std::string> made_for_transformers;
  try {
    std::FILE* marker = std::fopen((built / kBuildMarker).c_str(), "w");
    if (marker == nullptr) fail(built.string(), ": cannot write: ", std::strerror(errno));
    std::fclose(marker);
    io::HfWriteOptions options;
    options.max_shard_bytes = static_cast<uint64_t>(args.max_shard_gb * 1e9);
    io::save_hf_model(model, built, dtype, options, fs::path(args.model) / "config.json");
    for (const std::string& name : copied) copy_synced(fs::path(args.model) / name, built / name);
    std::string copied_list;
    for (const std::string& name : copied)
      if (is_license_like(name)) copied_list += name + "\n";
    if (!copied_list.empty()) io::write_file_atomic(built / kCopiedList, copied_list);
    made_for_transformers = train::write_tokenizer_files_for_transformers(built);
    fsync_dir(built);
    move_into_place(built, out);
    fs::remove(out / kBuildMarker);
    fsync_dir(parent);
  } catch (...) {
    // A full disk or a failed write: --out is as it was, and the partial
    // folder goes now.
    fs::remove_all(built, ec);
    throw;
  }
  fmt::print("wrote {} ({} parameters, {})\n", out.string(), model.config().num_parameters(),
             args.dtype);
  // What else went along, and what did not: a license left behind unsaid
  // is one the weights no longer carry.
  if (!copied.empty()) fmt::print("copied from {}: {}\n", args.model, fmt::join(copied, ", "));
  if (!made_for_transformers.empty()) {
    fmt::print("wrote for transformers' tokenizer loader: {}\n",
               fmt::join(made_for_transformers, ", "));
  }
  if (!left.empty()) {
    // A folder of hundreds of .bin shards is named by its first few.
    constexpr size_t kNamed = 8;
    const size_t named = std::min(left.size(), kNamed);
    fmt::print(
        "not copied: {}{} (convert copies the tokenizer, generation and license files and "
        "README.md; the weights and config.json it writes anew)\n",
        fmt::join(left.begin(), left.begin() + static_cast<std::ptrdiff_t>(named), ", "),
        left.size() > named ? fmt::format(" and {} more", left.size() - named) : "");
  }
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  auto* cmd = app.add_subcommand("convert", "Write a Hugging Face model folder in another dtype");
  cmd->add_option("--model", args->model, "Hugging Face model folder to read")
      ->check(shell_expanded_path())
      ->required();
  cmd->add_option("--out", args->out,
                  "Folder to write; an existing one is replaced whole once the new one is "
                  "complete")
      ->check(shell_expanded_path())
      ->required();
  cmd->add_option("--dtype", args->dtype, "Weights dtype: bf16, f16 or f32")->capture_default_str();
  cmd->add_option("--max-shard-gb", args->max_shard_gb, "Shard size limit (GB, decimal)")
      ->capture_default_str();
  cmd->callback([args] { run_convert(*args); });
}

}  // namespace lt::cli
