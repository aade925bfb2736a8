#include "exec/schedule.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_brief.h"
#include "data/json_fields.h"
#include "io/atomic_file.h"

namespace lt::exec {

const char* executor_name(ExecutorKind kind) {
  switch (kind) {
    case ExecutorKind::Resident:
      return "resident";
    case ExecutorKind::Streaming:
      return "streaming";
    case ExecutorKind::Offload:
      return "offload";
    case ExecutorKind::ZenFlow:
      return "zenflow";
  }
  return "?";
}

ExecutorKind parse_executor(const std::string& name, const std::string& where) {
  for (ExecutorKind k : {ExecutorKind::Resident, ExecutorKind::Streaming, ExecutorKind::Offload,
                         ExecutorKind::ZenFlow})
    if (name == executor_name(k)) return k;
  fail(where, " must be resident, streaming, offload or zenflow, got \"", name, "\"");
}

namespace {

constexpr std::pair<Placement, const char*> kNames[] = {
    {Placement::Gpu, "gpu"},
    {Placement::Host, "host"},
    {Placement::Disk, "disk"},
    {Placement::Recompute, "recompute"},
};

int64_t read_count(const nlohmann::json& j, const char* key, const std::string& source) {
  if (!j.contains(key)) return 0;
  const auto& v = j.at(key);
  LT_CHECK(v.is_number_integer() && v.get<int64_t>() >= 0, source, ": field \"", key,
           "\" must be an integer >= 0, got ", brief_json(v));
  return v.get<int64_t>();
}

}  // namespace

const char* placement_name(Placement p) {
  for (const auto& [value, name] : kNames)
    if (value == p) return name;
  return "?";
}

Placement parse_placement(const std::string& name, const std::string& where) {
  for (const auto& [value, text] : kNames)
    if (name == text) return value;
  fail(where, ": unknown placement \"", name, "\" (expected gpu, host, disk or recompute)");
}

int Schedule::kept_count() const {
  int n = 0;
  for (Placement p : boundaries) n += p != Placement::Recompute;
  return n;
}

void Schedule::use_chunk(int64_t chunk) {
  chunk_sequences = chunk;
  if (chunk > 0 && tail_chunk_sequences > chunk) tail_chunk_sequences = 0;
  has_prediction = false;
  predicted_step_s = 0;
  predicted_peak_bytes.clear();
}

int Schedule::read_window(int boundary) const {
  const std::vector<ReadPiece>& split = read_split(boundary);
  if (!split.empty()) return split.front().window;
  return read_windows.empty() ? -1 : read_windows.at(static_cast<size_t>(boundary));
}

const std::vector<Schedule::ReadPiece>& Schedule::read_split(int boundary) const {
  static const std::vector<ReadPiece> none;
  return read_splits.empty() ? none : read_splits.at(static_cast<size_t>(boundary));
}

int Schedule::first_read_window(int boundary) const {
  const int last = static_cast<int>(boundaries.size()) - 1;
  int e = boundary + 1;
  while (e < last && boundaries[e] == Placement::Recompute) ++e;
  return e;
}

Schedule Schedule::all_gpu(int num_blocks) {
  return every_kth_gpu(num_blocks, 1);
}

Schedule Schedule::every_kth_gpu(int num_blocks, int k) {
  LT_CHECK(num_blocks >= 0 && k >= 1, "every_kth_gpu: need num_blocks >= 0 and k >= 1, got ",
           num_blocks, " and ", k);
  Schedule s;
  for (int i = 0; i <= num_blocks; ++i)
    s.boundaries.push_back(i % k == 0 ? Placement::Gpu : Placement::Recompute);
  return s;
}

namespace {

void validate_read_splits(const Schedule& s, int num_blocks, const std::string& source) {
  LT_CHECK(s.read_splits.empty() || s.read_splits.size() == s.boundaries.size(), source,
           ": read splits are given for ", s.read_splits.size(), " of ", s.boundaries.size(),
           " boundaries");
  for (int i = 0; i < static_cast<int>(s.read_splits.size()); ++i) {
    const auto& split = s.read_splits[i];
    if (split.empty()) continue;
    const std::string where = source + ": boundaries[" + std::to_string(i) + "].read_split";
    LT_CHECK(i < num_blocks && s.boundaries[i] == Placement::Disk, where,
             ": only a disk boundary below ", num_blocks, " is read in pieces, this one is ",
             placement_name(s.boundaries[i]));
    const int own = s.read_windows.empty() ? -1 : s.read_windows[i];
    LT_CHECK(own < 0 || own == split.front().window, where, ": the first piece's window (",
             split.front().window, ") must be the boundary's read_window (", own, ")");
    double sum = 0;
    for (size_t k = 0; k < split.size(); ++k) {
      const int w = split[k].window;
      LT_CHECK(w >= s.first_read_window(i) && w <= num_blocks, where, "[", k,
               "].window must be in [", s.first_read_window(i), ", ", num_blocks,
               "] (the backward windows before its first use), got ", w);
      LT_CHECK(k == 0 || w < split[k - 1].window, where, "[", k,
               "].window must be below the previous piece's (", split[k - 1].window,
               "): pieces are listed in the order they are read, got ", w);
      LT_CHECK(split[k].fraction > 0 && split[k].fraction <= 1, where, "[", k,
               "].fraction must be in (0, 1], got ", split[k].fraction);
      sum += split[k].fraction;
    }
    LT_CHECK(std::abs(sum - 1) <= 1e-6, where, ": the fractions must sum to 1, got ", sum);
  }
}

}  // namespace

void validate(const Schedule& s, int num_blocks, const std::string& source) {
  LT_CHECK(static_cast<int64_t>(s.boundaries.size()) == int64_t{num_blocks} + 1, source,
           ": field \"boundaries\" has ", s.boundaries.size(), " entries; a model with ",
           num_blocks, " blocks has ", num_blocks + 1, " boundaries (0..", num_blocks, ")");
  LT_CHECK(s.batch_size >= 0 && s.chunk_sequences >= 0, source,
           ": batch_size and chunk_sequences must be >= 0");
  LT_CHECK(s.chunk_sequences == 0 || s.batch_size == 0 || s.chunk_sequences <= s.batch_size, source,
           ": field \"chunk_sequences\" (", s.chunk_sequences, ") exceeds batch_size (",
           s.batch_size, ")");
  LT_CHECK(s.read_windows.empty() || s.read_windows.size() == s.boundaries.size(), source,
           ": read windows are given for ", s.read_windows.size(), " of ", s.boundaries.size(),
           " boundaries");
  for (int i = 0; i < static_cast<int>(s.read_windows.size()); ++i) {
    const int w = s.read_windows[i];
    if (w == -1) continue;
    const Placement p = s.boundaries[i];
    LT_CHECK(i < num_blocks && (p == Placement::Host || p == Placement::Disk), source,
             ": boundaries[", i, "].read_window: only a host or disk boundary below ", num_blocks,
             " is read back, this one is ", placement_name(p));
    LT_CHECK(w >= s.first_read_window(i) && w <= num_blocks, source, ": boundaries[", i,
             "].read_window must be in [", s.first_read_window(i), ", ", num_blocks,
             "] (the backward windows before its first use), got ", w);
  }
  validate_read_splits(s, num_blocks, source);
  for (size_t k = 0; k < s.stages_on_device.size(); ++k) {
    const int stage = s.stages_on_device[k];
    LT_CHECK(stage >= 0 && stage <= num_blocks + 1, source, ": stages_on_device[", k,
             "] must be a stage in [0, ", num_blocks + 1, "] (0: embed, 1..", num_blocks,
             ": the blocks, ", num_blocks + 1, ": the head), got ", stage);
    LT_CHECK(k == 0 || stage > s.stages_on_device[k - 1], source, ": stages_on_device[", k, "] (",
             stage, ") must be greater than the entry before it: the list is ascending");
  }
  LT_CHECK(s.tail_blocks >= 0 && s.tail_blocks <= num_blocks, source,
           ": fused_tail must be a count of blocks in [0, ", num_blocks, "], got ", s.tail_blocks);
  LT_CHECK(s.tail_chunk_sequences >= 0, source,
           ": field \"tail_chunk_sequences\" must be >= 0, got ", s.tail_chunk_sequences);
  if (s.tail_chunk_sequences > 0) {
    LT_CHECK(s.tail_blocks > 0, source,
             ": field \"tail_chunk_sequences\" is for a fused tail; this schedule has none "
             "(fused_tail is 0)");
    const int64_t chunk = s.chunk_sequences > 0 ? s.chunk_sequences : s.batch_size;
    LT_CHECK(chunk == 0 || s.tail_chunk_sequences <= chunk, source,
             ": field \"tail_chunk_sequences\" (", s.tail_chunk_sequences,
             ") exceeds the chunk the other stages run (", chunk, ")");
  }
  if (s.tail_blocks > 0) {
    for (int i = 0; i < num_blocks; ++i) {
      const Placement p = s.boundaries[static_cast<size_t>(i)];
      LT_CHECK(p == Placement::Gpu || p == Placement::Recompute, source,
               ": fused_tail needs every boundary on the GPU or recomputed; boundaries[", i,
               "] is ", placement_name(p));
    }
  }
}

std::string tail_chunk_phrase(const Schedule& s) {
  if (s.tail_blocks == 0 || s.tail_chunk_sequences == 0) return "";
  return " in pieces of " + std::to_string(s.tail_chunk_sequences) + " sequences";
}

Schedule with_stages_on_device(Schedule s, int num_blocks, bool tied_embedding,
                               const std::function<bool(const Schedule&)>& keep) {
  for (int stage = 0; stage <= num_blocks + 1; ++stage) {
    const bool embed_kept = !s.stages_on_device.empty() && s.stages_on_device.front() == 0;
    if (stage == num_blocks + 1 && tied_embedding && !embed_kept) break;
    Schedule with = s;
    with.stages_on_device.push_back(stage);
    if (keep(with)) s = std::move(with);
  }
  return s;
}

std::vector<bool> Schedule::on_device(int num_blocks) const {
  std::vector<bool> out(static_cast<size_t>(num_blocks) + 2, false);
  for (int stage : stages_on_device) out.at(static_cast<size_t>(stage)) = true;
  return out;
}

nlohmann::json to_json(const Schedule& s) {
  nlohmann::json j;
  j["batch_size"] = s.batch_size;
  j["chunk_sequences"] = s.chunk_sequences;
  j["executor"] = executor_name(s.executor);
  auto& boundaries = j["boundaries"] = nlohmann::json::array();
  for (size_t i = 0; i < s.boundaries.size(); ++i) {
    boundaries.push_back({{"index", i}, {"placement", placement_name(s.boundaries[i])}});
    if (!s.read_windows.empty() && s.read_windows[i] >= 0)
      boundaries.back()["read_window"] = s.read_windows[i];
    if (!s.read_split(static_cast<int>(i)).empty()) {
      auto& pieces = boundaries.back()["read_split"] = nlohmann::json::array();
      for (const auto& piece : s.read_split(static_cast<int>(i)))
        pieces.push_back({{"window", piece.window}, {"fraction", piece.fraction}});
    }
  }
  if (!s.stages_on_device.empty()) j["stages_on_device"] = s.stages_on_device;
  if (s.tail_blocks > 0) j["fused_tail"] = s.tail_blocks;
  if (s.tail_chunk_sequences > 0) j["tail_chunk_sequences"] = s.tail_chunk_sequences;
  if (s.has_prediction) {
    j["predicted"]["step_s"] = s.predicted_step_s;
    j["predicted"]["peak_bytes"] = s.predicted_peak_bytes;
  }
  return j;
}

namespace {

std::vector<Schedule::ReadPiece> parse_read_split(const nlohmann::json& list,
                                                  const std::string& where) {
  LT_CHECK(list.is_array() && !list.empty(), where,
           " must be a non-empty list of {window, fraction}, got ", brief_json(list));
  std::vector<Schedule::ReadPiece> split;
  for (size_t k = 0; k < list.size(); ++k) {
    const auto& piece = list[k];
    LT_CHECK(piece.is_object() && piece.contains("window") && piece.contains("fraction") &&
                 piece.at("window").is_number_integer() && piece.at("window").get<int64_t>() >= 0 &&
                 piece.at("fraction").is_number(),
             where, "[", k, "] must be {\"window\": integer >= 0, \"fraction\": number}, got ",
             brief_json(piece));
    split.push_back(
        {static_cast<int>(piece.at("window").get<int64_t>()), piece.at("fraction").get<double>()});
  }
  return split;
}

}  // namespace

Schedule schedule_from_json(const nlohmann::json& j, const std::string& source) {
  LT_CHECK(j.is_object(), source, ": a schedule must be a JSON object");
  Schedule s;
  s.batch_size = read_count(j, "batch_size", source);
  // Schedules written before the chunk had its own name call it
  // "micro_batch"; the new key wins when a file has both.
  s.chunk_sequences = j.contains("chunk_sequences") ? read_count(j, "chunk_sequences", source)
                                                    : read_count(j, "micro_batch", source);
  if (j.contains("executor")) {
    LT_CHECK(j.at("executor").is_string(), source, ": field \"executor\" must be a string");
    s.executor =
        parse_executor(j.at("executor").get<std::string>(), source + ": field \"executor\"");
  }
  LT_CHECK(j.contains("boundaries") && j.at("boundaries").is_array(), source,
           ": field \"boundaries\" must be a list of {index, placement}");
  const auto& list = j.at("boundaries");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = source + ": boundaries[" + std::to_string(i) + "]";
    const auto& b = list[i];
    LT_CHECK(b.is_object() && b.contains("index") && b.contains("placement"), where,
             " must be an object with \"index\" and \"placement\"");
    LT_CHECK(b.at("index").is_number_integer() &&
                 b.at("index").get<int64_t>() == static_cast<int64_t>(i),
             where, ".index must be ", i, " (boundaries are listed in order), got ",
             brief_json(b.at("index")));
    LT_CHECK(b.at("placement").is_string(), where, ".placement must be a string");
    s.boundaries.push_back(
        parse_placement(b.at("placement").get<std::string>(), where + ".placement"));
    int window = -1;
    if (b.contains("read_window")) {
      LT_CHECK(b.at("read_window").is_number_integer() && b.at("read_window").get<int64_t>() >= 0,
               where, ".read_window must be an integer >= 0, got ",
               brief_json(b.at("read_window")));
      window = static_cast<int>(b.at("read_window").get<int64_t>());
      s.read_windows.resize(list.size(), -1);
    }
    if (!s.read_windows.empty()) s.read_windows[i] = window;
    if (b.contains("read_split")) {
      s.read_splits.resize(list.size());
      s.read_splits[i] = parse_read_split(b.at("read_split"), where + ".read_split");
    }
  }
  if (j.contains("stages_on_device")) {
    const auto& list = j.at("stages_on_device");
    LT_CHECK(list.is_array(), source,
             ": field \"stages_on_device\" must be a list of stage indices, got ",
             brief_json(list));
    for (size_t k = 0; k < list.size(); ++k) {
      LT_CHECK(list[k].is_number_integer() && list[k].get<int64_t>() >= 0 &&
                   list[k].get<int64_t>() < (int64_t{1} << 30),
               source, ": stages_on_device[", k, "] must be a stage index >= 0, got ",
               brief_json(list[k]));
      s.stages_on_device.push_back(static_cast<int>(list[k].get<int64_t>()));
    }
  }
  if (j.contains("fused_tail")) {
    const auto& tail = j.at("fused_tail");
    // true: the one-block tail of the schedules written before it had a count.
    LT_CHECK(tail.is_boolean() || (tail.is_number_integer() && tail.get<int64_t>() >= 0 &&
                                   tail.get<int64_t>() < (int64_t{1} << 30)),
             source, ": field \"fused_tail\" must be a count of blocks >= 0 (or true, false), got ",
             brief_json(tail));
    s.tail_blocks = tail.is_boolean() ? (tail.get<bool>() ? 1 : 0) : tail.get<int>();
  }
  if (j.contains("tail_chunk_sequences"))
    s.tail_chunk_sequences = read_count(j, "tail_chunk_sequences", source);
  if (j.contains("predicted")) {
    const auto& p = j.at("predicted");
    LT_CHECK(p.is_object() && p.contains("step_s") && p.at("step_s").is_number(), source,
             ": field \"predicted.step_s\" must be a number");
    s.has_prediction = true;
    s.predicted_step_s = p.at("step_s").get<double>();
    if (p.contains("peak_bytes")) {
      LT_CHECK(p.at("peak_bytes").is_object(), source,
               ": field \"predicted.peak_bytes\" must be an object");
      for (const auto& [space, bytes] : p.at("peak_bytes").items()) {
        LT_CHECK(bytes.is_number_integer(), source, ": field \"predicted.peak_bytes.", space,
                 "\" must be an integer");
        s.predicted_peak_bytes[space] = bytes.get<int64_t>();
      }
    }
  }
  return s;
}

Schedule load_schedule(const std::string& path) {
  const std::string text = data::read_whole_file(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(path, ": not valid JSON: ", e.what());
  }
  return schedule_from_json(j, path);
}

void save_schedule(const Schedule& schedule, const std::string& path) {
  io::write_file_atomic(path, to_json(schedule).dump(2) + "\n");
}

}  // namespace lt::exec
