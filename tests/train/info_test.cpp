// `lazytrain info --json` against what the kernel reports: the CPU kernels'
// vector builds against /proc/cpuinfo's flags, the free host memory against
// sysinfo(2)'s total.
#include <gtest/gtest.h>
#include <sys/sysinfo.h>

#include <fstream>
#include <sstream>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

bool cpu_flag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string word;
    while (words >> word)
      if (word == flag) return true;
    return false;
  }
  return false;
}

TEST(InfoCommand, ReportsTheCpuKernelsAndFreeHostMemory) {
  TempDir tmp("info");
  std::string output;
  ASSERT_EQ(run_program({"info", "--json"}, tmp / "info.log", &output), 0) << output;
  const nlohmann::json info = nlohmann::json::parse(output);
  const std::string rows = info.at("cpu_kernels").at("cross_entropy_rows");
  const std::string expected = cpu_flag("avx512f")                   ? "avx512"
                               : cpu_flag("avx2") && cpu_flag("fma") ? "avx2"
                                                                     : "baseline";
  EXPECT_EQ(rows, expected);
  const std::string optimizer = info.at("cpu_kernels").at("optimizer");
  EXPECT_TRUE(optimizer == "scalar" || optimizer == "avx2" || optimizer == "avx512") << optimizer;
  if (!cpu_flag("avx2")) {
    EXPECT_EQ(optimizer, "scalar");
  }
  struct sysinfo s {};
  ASSERT_EQ(::sysinfo(&s), 0);
  const double total_gb = static_cast<double>(s.totalram) * s.mem_unit / 1e9;
  const double free_gb = info.at("host_memory_free_gb").get<double>();
  EXPECT_GT(free_gb, 0);
  EXPECT_LE(free_gb, total_gb);
}

}  // namespace
}  // namespace lt::train::testing
