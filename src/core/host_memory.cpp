#include "core/host_memory.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

namespace lt {

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

int64_t host_bytes_for_this_process() {
  std::ifstream meminfo("/proc/meminfo");
  std::ifstream statm("/proc/self/statm");
  if (!meminfo || !statm) return -1;
  std::stringstream text;
  text << meminfo.rdbuf();
  const int64_t available = parse_mem_available(text.str());
  int64_t total_pages = 0, resident_pages = -1;
  statm >> total_pages >> resident_pages;
  if (available < 0 || resident_pages < 0) return -1;
  return available + resident_pages * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace lt
