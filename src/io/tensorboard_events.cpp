#include "io/tensorboard_events.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "io/tfrecord.h"

namespace lt::io {

namespace fs = std::filesystem;

namespace {

// Protobuf wire types: how a field's bytes after its key are laid out.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Field numbers of the messages written (the header comment lists them).
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5,
                   kEventSessionLog = 7;
constexpr uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;
constexpr uint32_t kSessionLogStatus = 1, kSessionStart = 1;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, uint32_t field, WireType type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | type);
}

void put_fixed(std::string& out, uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xffu));
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out += bytes;
}

// wall_time and step, the fields every event starts with. As protobuf
// does for proto3 fields outside a oneof, a zero is left out (the reader's
// default), so the bytes equal protobuf's own. A negative int64 is a
// ten-byte varint (two's complement).
std::string event_head(double wall_time, int64_t step) {
  std::string event;
  if (const auto bits = std::bit_cast<uint64_t>(wall_time); bits != 0) {
    put_key(event, kEventWallTime, kFixed64);
    put_fixed(event, bits, 8);
  }
  if (step != 0) {
    put_key(event, kEventStep, kVarint);
    put_varint(event, static_cast<uint64_t>(step));
  }
  return event;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

fs::path new_event_file_path(const fs::path& dir) {
  const auto seconds = static_cast<int64_t>(unix_seconds());
  const std::string base = "events.out.tfevents." + std::to_string(seconds) + "." + host_name();
  fs::path path = dir / base;
  for (int n = 1; fs::exists(path); ++n) path = dir / (base + "." + std::to_string(n));
  return path;
}

}  // namespace

std::string file_version_event(double wall_time) {
  std::string event = event_head(wall_time, 0);
  put_bytes(event, kEventFileVersion, "brain.Event:2");
  return event;
}

std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<TensorBoardScalar>& scalars) {
  std::string summary;
  for (const auto& scalar : scalars) {
    std::string value;
    put_bytes(value, kValueTag, scalar.tag);
    put_key(value, kValueSimpleValue, kFixed32);
    put_fixed(value, std::bit_cast<uint32_t>(scalar.value), 4);
    put_bytes(summary, kSummaryValue, value);
  }
  std::string event = event_head(wall_time, step);
  put_bytes(event, kEventSummary, summary);
  return event;
}

std::string session_start_event(double wall_time, int64_t step) {
  std::string session_log;
  put_key(session_log, kSessionLogStatus, kVarint);
  put_varint(session_log, kSessionStart);
  std::string event = event_head(wall_time, step);
  put_bytes(event, kEventSessionLog, session_log);
  return event;
}

TensorBoardEventWriter::TensorBoardEventWriter(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  LT_CHECK(!ec, dir.string(), ": cannot create the TensorBoard folder (", ec.message(), ")");
  path_ = new_event_file_path(dir);
  out_.open(path_, std::ios::binary | std::ios::trunc);
  LT_CHECK(out_.good(), path_.string(), ": cannot open for writing");
  append(file_version_event(unix_seconds()));
}

void TensorBoardEventWriter::add_scalars(int64_t step,
                                         const std::vector<TensorBoardScalar>& scalars) {
  append(scalars_event(unix_seconds(), step, scalars));
}

void TensorBoardEventWriter::mark_restart(int64_t step) {
  append(session_start_event(unix_seconds(), step));
}

void TensorBoardEventWriter::append(const std::string& event) {
  errno = 0;
  out_ << tfrecord_frame(event);
  out_.flush();
  LT_CHECK(out_.good(), path_.string(), ": cannot write a TensorBoard event (",
           errno != 0 ? std::strerror(errno) : "write failed", ")");
}

}  // namespace lt::io
