// core/host_memory.h: /proc/meminfo and cgroup texts worked by hand, and
// the live reading against sysinfo(2), the kernel's own figures.
#include "core/host_memory.h"

#include <gtest/gtest.h>
#include <sys/sysinfo.h>

#include "core/error.h"

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

TEST(HostMemory, ACgroupLimitLeavesItsLimitLessItsUsage) {
  EXPECT_EQ(parse_cgroup_free("8589934592\n", "1073741824\n"), 7516192768);
  EXPECT_EQ(parse_cgroup_free("max\n", "1073741824\n"), -1);  // v2: no limit
  EXPECT_EQ(parse_cgroup_free("100\n", "300\n"), 0);          // over its limit: none left
  EXPECT_EQ(parse_cgroup_free("", "5\n"), -1);                // no such file
  EXPECT_EQ(parse_cgroup_free("12 34\n", "5\n"), -1);         // not one number
  // 8 GiB limit, 7 GiB used of which 3 GiB is inactive page cache: 4 GiB
  // free (v2 names it inactive_file, v1 total_inactive_file).
  const int64_t gib = int64_t{1} << 30;
  const std::string max = std::to_string(8 * gib), used = std::to_string(7 * gib);
  EXPECT_EQ(
      parse_cgroup_free(max, used,
                        "anon 100\ninactive_file " + std::to_string(3 * gib) + "\nactive_file 5\n"),
      4 * gib);
  EXPECT_EQ(parse_cgroup_free(max, used,
                              "cache 9\ntotal_inactive_file " + std::to_string(3 * gib) + "\n"),
            4 * gib);
  EXPECT_EQ(parse_cgroup_free(max, used, "inactive_file " + std::to_string(9 * gib) + "\n"),
            8 * gib);  // never more than the limit
}

// Free 10 GB, of which a cgroup allows 6; the process holds 3 GB that the
// plan counts; a 1 GB reserve: 6 + 3 - 1 = 8 GB.
TEST(HostMemory, APlanCountsWhatIsFreeAndWhatItAlreadyHolds) {
  const int64_t gb = 1'000'000'000;
  EXPECT_EQ(host_bytes_for_plan(10 * gb, 6 * gb, 3 * gb, gb), 8 * gb);
  EXPECT_EQ(host_bytes_for_plan(10 * gb, -1, 3 * gb, gb), 12 * gb);  // no limit
  EXPECT_EQ(host_bytes_for_plan(10 * gb, 60 * gb, 0, gb), 9 * gb);   // a limit above the RAM
  EXPECT_EQ(host_bytes_for_plan(gb / 2, -1, 0, gb), 0);              // less than the reserve
  EXPECT_EQ(host_bytes_for_plan(-1, 6 * gb, 3 * gb, gb), -1);        // unknown
}

// The live figure, with nothing held and no reserve, is what is free: some,
// and no more than the machine's RAM (sysinfo's total).
TEST(HostMemory, ThisProcessCanHoldNoMoreThanTheMachinesRam) {
  struct sysinfo info {};
  ASSERT_EQ(::sysinfo(&info), 0);
  const int64_t total = static_cast<int64_t>(info.totalram) * info.mem_unit;
  const int64_t bytes = host_bytes_for_this_process(0, 0);
  ASSERT_GT(bytes, 0);
  EXPECT_LE(bytes, total);
}

// An allocation beyond what is free is refused naming what needs it; one
// within it passes.
TEST(HostMemory, AnAllocationBeyondWhatIsFreeIsRefusedByName) {
  try {
    check_host_memory_for(int64_t{1} << 62, "the model of 'm/config.json'");
    ADD_FAILURE() << "4.6 EB of host memory was not refused";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("the model of 'm/config.json' needs 4.61e+09 GB of host memory, more "
                           "than the "),
              std::string::npos)
        << message;
  }
  EXPECT_NO_THROW(check_host_memory_for(4096, "a page"));
}

}  // namespace
}  // namespace lt
