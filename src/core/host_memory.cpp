#include "core/host_memory.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace lt {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A file holding one non-negative integer (and a newline); -1 otherwise.
int64_t parse_count(const std::string& text) {
  std::istringstream in(text);
  int64_t v = -1;
  std::string rest;
  if (!(in >> v) || v < 0 || (in >> rest)) return -1;
  return v;
}

}  // namespace

int64_t parse_mem_available(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    int64_t kib = -1;
    std::string unit;
    if (!(fields >> kib >> unit) || kib < 0 || unit != "kB") return -1;
    return kib * 1024;
  }
  return -1;
}

int64_t parse_cgroup_free(const std::string& memory_max, const std::string& memory_current) {
  const int64_t max = parse_count(memory_max);
  const int64_t current = parse_count(memory_current);
  if (max < 0 || current < 0) return -1;  // "max" (no limit) or unreadable
  return std::max<int64_t>(0, max - current);
}

int64_t host_bytes_for_plan(int64_t available, int64_t cgroup_free, int64_t already_counted,
                            int64_t reserve) {
  if (available < 0) return -1;
  const int64_t free = cgroup_free >= 0 ? std::min(available, cgroup_free) : available;
  return std::max<int64_t>(0, free + already_counted - reserve);
}

int64_t host_bytes_for_this_process(int64_t already_counted, int64_t reserve) {
  const int64_t available = parse_mem_available(read_text("/proc/meminfo"));
  // This process's memory group: cgroup v2's "0::/path" line, whose limit
  // is memory.max, or cgroup v1's "N:memory:/path" (memory.limit_in_bytes;
  // "no limit" there is a huge number, which the minimum then ignores).
  std::istringstream groups(read_text("/proc/self/cgroup"));
  std::string line;
  int64_t cgroup_free = -1;
  while (std::getline(groups, line)) {
    int64_t room = -1;
    if (line.rfind("0::", 0) == 0) {
      const std::string dir = "/sys/fs/cgroup" + line.substr(3);
      room = parse_cgroup_free(read_text(dir + "/memory.max"), read_text(dir + "/memory.current"));
    } else if (const size_t at = line.find(":memory:"); at != std::string::npos) {
      const std::string dir = "/sys/fs/cgroup/memory" + line.substr(at + 8);
      room = parse_cgroup_free(read_text(dir + "/memory.limit_in_bytes"),
                               read_text(dir + "/memory.usage_in_bytes"));
    }
    if (room >= 0) cgroup_free = cgroup_free < 0 ? room : std::min(cgroup_free, room);
  }
  return host_bytes_for_plan(available, cgroup_free, already_counted, reserve);
}

void check_host_memory_for(int64_t bytes, const std::string& what) {
  const int64_t free = host_bytes_for_this_process(0, 0);
  if (free < 0 || bytes <= free) return;
  char figures[96];
  std::snprintf(figures, sizeof figures, "%.3g GB of host memory, more than the %.3g GB free",
                static_cast<double>(bytes) / 1e9, static_cast<double>(free) / 1e9);
  fail(what, " needs ", figures);
}

}  // namespace lt
