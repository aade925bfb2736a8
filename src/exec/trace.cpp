#include "exec/trace.h"

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"

namespace lt::exec {

void TraceRecorder::span(const std::string& track, std::string name, Clock::time_point begin,
                         Clock::time_point end) {
  using us = std::chrono::duration<double, std::micro>;
  std::lock_guard<std::mutex> lock(mutex_);
  const int id = tracks_.emplace(track, static_cast<int>(tracks_.size()) + 1).first->second;
  events_.push_back({id, std::move(name), us(begin - origin_).count(), us(end - begin).count()});
}

size_t TraceRecorder::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

void TraceRecorder::write(const std::string& path) const {
  nlohmann::json events = nlohmann::json::array();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [track, id] : tracks_) {
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", 1},
                        {"tid", id},
                        {"args", {{"name", track}}}});
    }
    for (const auto& e : events_) {
      events.push_back({{"name", e.name},
                        {"ph", "X"},
                        {"pid", 1},
                        {"tid", e.track},
                        {"ts", e.begin_us},
                        {"dur", e.duration_us}});
    }
  }
  io::write_file_atomic(path, nlohmann::json{{"traceEvents", events}}.dump() + "\n");
}

}  // namespace lt::exec
