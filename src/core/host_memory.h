#pragma once
// What this machine's host memory has free, from Linux's /proc and the
// cgroup (v2) limit: for planning a run on the machine it runs on, where a
// hardware profile's host_memory_gb (the machine's total, or the defaults'
// 128 GB) may be more than the run can have.
#include <cstdint>
#include <string>

namespace lt {

// MemAvailable of a /proc/meminfo text, in bytes; -1 when the line is
// missing or malformed.
int64_t parse_mem_available(const std::string& meminfo);

// What a cgroup memory limit leaves, the limit less the usage, from the
// files' texts (v2: memory.max and memory.current; v1: memory.limit_in_bytes
// and memory.usage_in_bytes), the usage less the inactive page cache that
// memory.stat reports (inactive_file, v1: total_inactive_file), which the
// kernel reclaims first; -1 when there is no limit ("max") or a text is
// malformed. Never below 0.
int64_t parse_cgroup_free(const std::string& memory_max, const std::string& memory_current,
                          const std::string& memory_stat = "");

// The host bytes a plan may count on: what is free (MemAvailable, or the
// cgroup's room when that is less; -1: unknown) plus what the process
// already holds that the plan counts again (`already_counted`), less
// `reserve` for what the plan does not count. -1 when `available` is
// unknown; never below 0.
int64_t host_bytes_for_plan(int64_t available, int64_t cgroup_free, int64_t already_counted,
                            int64_t reserve);

// host_bytes_for_plan on this machine: /proc/meminfo, and the memory
// limit of this process's cgroup (v2 or v1, as /proc/self/cgroup names it).
int64_t host_bytes_for_this_process(int64_t already_counted, int64_t reserve);

// Throws lt::Error "<what> needs X GB of host memory, more than the Y GB
// free" when `bytes` exceed what is free now (host_bytes_for_this_process
// with nothing held and no reserve); nothing when that is unknown. For an
// allocation so large that its failure would name no file.
void check_host_memory_for(int64_t bytes, const std::string& what);

}  // namespace lt
