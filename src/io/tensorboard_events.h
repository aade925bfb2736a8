#pragma once
// TensorBoard event files: TFRecord-framed (io/tfrecord.h) `Event`
// protobufs, written by hand; only these fields are used (tensorboard's
// compat/proto event.proto and summary.proto):
//
//   Event         { double wall_time = 1; int64 step = 2;
//                   oneof { string file_version = 3; Summary summary = 5;
//                           SessionLog session_log = 7; } }
//   Summary       { repeated Value value = 1; }
//   Summary.Value { string tag = 1; float simple_value = 2; }
//   SessionLog    { SessionStatus status = 1; }   START = 1
//
// A file starts with a file_version "brain.Event:2" event; version 2 tells
// the reader that a SessionLog START, not a step going backwards, marks a
// restart.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace lt::io {

struct TensorBoardScalar {
  std::string tag;  // "train/loss"; the part before '/' groups the charts
  float value = 0;
};

// One Event's protobuf bytes (before framing). wall_time is Unix seconds.
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, int64_t step,
                          const std::vector<TensorBoardScalar>& scalars);
// Tells TensorBoard that a run restarted at `step`: it drops what it read
// of this run at steps >= `step` (the interrupted run's steps past its
// last checkpoint), as metrics.jsonl drops their lines on resume.
std::string session_start_event(double wall_time, int64_t step);

// Appends events to a new file `dir`/events.out.tfevents.<unix seconds>.
// <hostname> (with a ".N" suffix if that name is taken), creating `dir`.
// Each event is flushed as written, so a live TensorBoard sees every step;
// a failed write (a full disk) throws naming the file.
class TensorBoardEventWriter {
 public:
  explicit TensorBoardEventWriter(const std::filesystem::path& dir);

  void add_scalars(int64_t step, const std::vector<TensorBoardScalar>& scalars);
  void mark_restart(int64_t step);
  const std::filesystem::path& path() const { return path_; }

 private:
  void append(const std::string& event);

  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace lt::io
