#pragma once
// A timeline of what each engine did (compute, copies, optimizer), written
// in the Chrome trace event format (opens in Perfetto or chrome://tracing).
// The streaming executor records its first steps into out.dir/trace.json.
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace lt::exec {

class TraceRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  TraceRecorder() : origin_(Clock::now()) {}
  // One finished span on `track` (a row of the timeline). Thread-safe.
  void span(const std::string& track, std::string name, Clock::time_point begin,
            Clock::time_point end);
  size_t size() const;
  // Writes {"traceEvents": [...]} atomically.
  void write(const std::string& path) const;

 private:
  struct Event {
    int track;
    std::string name;
    double begin_us, duration_us;
  };
  Clock::time_point origin_;
  mutable std::mutex mutex_;
  std::map<std::string, int> tracks_;  // name -> thread id in the trace
  std::vector<Event> events_;
};

// Records [construction, destruction) as a span; a null recorder records nothing.
class TraceSpan {
 public:
  TraceSpan(TraceRecorder* recorder, const char* track, std::string name)
      : recorder_(recorder),
        track_(track),
        name_(std::move(name)),
        begin_(TraceRecorder::Clock::now()) {}
  ~TraceSpan() {
    if (recorder_) recorder_->span(track_, std::move(name_), begin_, TraceRecorder::Clock::now());
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  TraceRecorder* recorder_;
  const char* track_;
  std::string name_;
  TraceRecorder::Clock::time_point begin_;
};

}  // namespace lt::exec
