// core/host_memory.h against the kernel's own figures: /proc/meminfo texts
// worked by hand, and sysinfo(2) for the live reading.
#include "core/host_memory.h"

#include <gtest/gtest.h>
#include <sys/sysinfo.h>

namespace lt {
namespace {

TEST(HostMemory, ParsesMemAvailableInKibibytes) {
  const std::string meminfo =
      "MemTotal:       131072000 kB\nMemFree:         1000 kB\nMemAvailable:   "
      "65536000 kB\nBuffers:          2048 kB\n";
  EXPECT_EQ(parse_mem_available(meminfo), int64_t{65536000} * 1024);
  EXPECT_EQ(parse_mem_available("MemTotal: 100 kB\n"), -1);       // an old kernel: no line
  EXPECT_EQ(parse_mem_available("MemAvailable: lots kB\n"), -1);  // malformed
  EXPECT_EQ(parse_mem_available("MemAvailable: 100 MB\n"), -1);   // an unknown unit
  EXPECT_EQ(parse_mem_available("XMemAvailable: 100 kB\n"), -1);  // not the line's start
}

// What this process could hold is at least what it holds now and no more
// than the machine's RAM (sysinfo: total RAM; the process's resident set
// is part of it, and MemAvailable leaves out what others use).
TEST(HostMemory, ThisProcessCanHoldNoMoreThanTheMachinesRam) {
  struct sysinfo info {};
  ASSERT_EQ(::sysinfo(&info), 0);
  const int64_t total = static_cast<int64_t>(info.totalram) * info.mem_unit;
  const int64_t bytes = host_bytes_for_this_process();
  ASSERT_GT(bytes, 0);
  EXPECT_LE(bytes, total);
  EXPECT_GT(bytes, static_cast<int64_t>(info.freeram) * info.mem_unit / 2);
}

}  // namespace
}  // namespace lt
