#include "ops/op_profile.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/stream.h"

namespace lt::ops {

namespace {

struct Record {
  std::string op_class;
  std::unique_ptr<Event> start, end;
};

struct Profile {
  std::vector<Record> records;
  int depth = 0;  // nesting of scopes on this thread, timed or not
  Device last_gpu = Device::cpu();
};

Profile& thread_profile() {
  thread_local Profile profile;
  return profile;
}

}  // namespace

bool op_profile_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("LT_OP_PROFILE");
    return v != nullptr && std::strcmp(v, "0") != 0 && v[0] != '\0';
  }();
  return enabled;
}

OpProfileScope::OpProfileScope(const char* op_class, Device device, bool on_last_gpu)
    : device_(device) {
  if (!op_profile_enabled()) return;
  Profile& p = thread_profile();
  if (on_last_gpu && device.is_cpu()) device_ = device = p.last_gpu;
  if (p.depth++ > 0 || !device.is_cuda()) return;
  p.last_gpu = device;
  Record r{op_class, std::make_unique<Event>(true), std::make_unique<Event>(true)};
  r.start->record(current_stream(device));
  p.records.push_back(std::move(r));
  slot_ = static_cast<int>(p.records.size()) - 1;
}

OpProfileScope::~OpProfileScope() {
  if (!op_profile_enabled()) return;
  Profile& p = thread_profile();
  --p.depth;
  if (slot_ < 0) return;
  Record& r = p.records[static_cast<size_t>(slot_)];
  // The start event's stream: scopes do not switch streams inside.
  r.end->record(current_stream(device_));
}

std::vector<std::pair<std::string, double>> take_op_profile() {
  Profile& p = thread_profile();
  std::vector<std::pair<std::string, double>> out;
  for (const Record& r : p.records) {
    r.end->synchronize();
    const double ms = r.start->elapsed_ms(*r.end);
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const auto& kv) { return kv.first == r.op_class; });
    if (it == out.end()) {
      out.emplace_back(r.op_class, ms);
    } else {
      it->second += ms;
    }
  }
  p.records.clear();
  return out;
}

}  // namespace lt::ops
