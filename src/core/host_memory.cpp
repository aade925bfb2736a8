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

int64_t parse_cgroup_free(const std::string& memory_max, const std::string& memory_current,
                          const std::string& memory_stat) {
  const int64_t max = parse_count(memory_max);
  int64_t current = parse_count(memory_current);
  if (max < 0 || current < 0) return -1;  // "max" (no limit) or unreadable
  // The usage counts page cache the kernel reclaims before it would refuse
  // the group memory (the weights file just read, say): the inactive part
  // of it is free for our purpose, as MemAvailable counts it.
  std::istringstream lines(memory_stat);
  std::string key;
  int64_t value = 0;
  while (lines >> key >> value)
    if (key == "inactive_file" || key == "total_inactive_file") current -= std::min(current, value);
  return std::max<int64_t>(0, max - current);
}

int64_t host_bytes_for_plan(int64_t available, int64_t cgroup_free, int64_t already_counted,
                            int64_t reserve) {
  if (available < 0) return -1;
  const int64_t free = cgroup_free >= 0 ? std::min(available, cgroup_free) : available;
  return std::max<int64_t>(0, free + already_counted - reserve);
}

namespace {

// The room a group's limit leaves, or -1 where `dir` has no limit files.
int64_t cgroup_room(const std::string& dir, bool v2) {
  return v2 ? parse_cgroup_free(read_text(dir + "/memory.max"), read_text(dir + "/memory.current"),
                                read_text(dir + "/memory.stat"))
            : parse_cgroup_free(read_text(dir + "/memory.limit_in_bytes"),
                                read_text(dir + "/memory.usage_in_bytes"),
                                read_text(dir + "/memory.stat"));
}

}  // namespace

int64_t host_bytes_for_this_process(int64_t already_counted, int64_t reserve) {
  const int64_t available = parse_mem_available(read_text("/proc/meminfo"));
  // This process's memory group: cgroup v2's "0::/path" line, whose limit
  // is memory.max, or cgroup v1's "N:...memory...:/path" line
  // (memory.limit_in_bytes; "no limit" there is a huge number, which the
  // minimum ignores). In a container without its own cgroup namespace the
  // path is the host's and does not exist inside: the mounted root is then
  // the container's group. (A limit set only on a parent group is missed.)
  std::istringstream groups(read_text("/proc/self/cgroup"));
  std::string line;
  int64_t cgroup_free = -1;
  while (std::getline(groups, line)) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = "," + line.substr(first + 1, second - first - 1) + ",";
    const std::string path = line.substr(second + 1);
    const bool v2 = line.rfind("0::", 0) == 0;
    if (!v2 && controllers.find(",memory,") == std::string::npos) continue;
    const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    int64_t room = cgroup_room(root + path, v2);
    if (room < 0 && path != "/") room = cgroup_room(root, v2);
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
