#pragma once
// What this machine's host memory has free, from Linux's /proc: for
// planning a run on the machine it runs on, where a hardware profile's
// host_memory_gb (the machine's total, or the defaults' 128 GB) may be more
// than the run can have.
#include <cstdint>
#include <string>

namespace lt {

// MemAvailable of a /proc/meminfo text, in bytes; -1 when the line is
// missing or malformed.
int64_t parse_mem_available(const std::string& meminfo);

// The bytes this process and the memory other processes leave free could
// hold: MemAvailable plus this process's resident set (/proc/self/statm),
// which already holds what the plan counts as loaded (the model's masters).
// -1 when /proc cannot be read.
int64_t host_bytes_for_this_process();

}  // namespace lt
