// `lazytrain plan` end to end: JSON fields, the written schedule, the exit
// status and message when nothing fits, and profile errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "exec/schedule.h"
#include "plan/milp.h"
#include "plan/tiny_model.h"

namespace lt::plan {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int status = -1;
  std::string out;
};

CliResult run_plan(const std::string& args) {
  const std::string cmd = std::string(LT_BINARY_DIR) + "/lazytrain plan " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  CliResult r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

class PlanCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lt_plan_cli_" + std::to_string(getpid()));
    fs::create_directories(dir_ / "model");
    // The tiny Llama of memory_budget_test.cpp, as a model folder.
    write("model/config.json", testing::kTinyLlamaJson);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  fs::path dir_;
};

TEST_F(PlanCommand, JsonHasTheScheduleAndPeaks) {
  if (!have_milp_solver()) GTEST_SKIP() << "built without CBC";
  const std::string out = (dir_ / "schedule.json").string();
  const CliResult r = run_plan("--model " + (dir_ / "model").string() +
                               " --batch-size 2 --seq-len 8 --json --out " + out);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("feasible").get<bool>());
  EXPECT_EQ(j.at("batch_size"), 2);
  EXPECT_GT(j.at("predicted_step_s").get<double>(), 0);
  // The default machine has room for everything: every boundary stays on
  // the GPU. By hand (memory_budget_test.cpp), at micro-batch 2 (16 tokens):
  // 295936 + 51456 + 2*960*16*2 + 2*16*100*4 + 3 boundaries of 2048.
  ASSERT_EQ(j.at("boundaries").size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(j["boundaries"][i]["index"], i);
    EXPECT_EQ(j["boundaries"][i]["placement"], "gpu");
  }
  EXPECT_EQ(j.at("peak_bytes").at("gpu"), 295936 + 51456 + 61440 + 12800 + 3 * 2048);
  EXPECT_EQ(j.at("peak_bytes").at("host"), 16 * 86848);
  EXPECT_EQ(j.at("peak_bytes").at("disk"), 0);
  for (const char* link : {"d2h", "disk_write", "h2d", "disk_read"})
    EXPECT_EQ(j.at("exposed_per_window_s").at(link).size(), 3u) << link;
  const exec::Schedule s = exec::load_schedule(out);
  EXPECT_EQ(s.boundaries.size(), 3u);
  EXPECT_EQ(s.batch_size, 2);
}

TEST_F(PlanCommand, NothingFitsSaysWhichSpaceAndHowMuch) {
  const std::string hw = write("hw.yaml", "host_memory_gb: 0.001\n");
  const CliResult r = run_plan("--model " + (dir_ / "model/config.json").string() + " --hardware " +
                               hw + " --batch-size 2 --seq-len 8");
  EXPECT_EQ(r.status, 3) << r.out;
  // 16 B x 86848 parameters + one 2048-byte boundary of staging - 10^6.
  EXPECT_NE(r.out.find("host is short by 0.00 GB (391616 bytes)"), std::string::npos) << r.out;
}

TEST_F(PlanCommand, ProfileErrorsNameFileAndKey) {
  const std::string hw = write("bad.yaml", "gpu_memory_gb: 80\nd2h_gbps: [1]\n");
  const CliResult r = run_plan("--model " + (dir_ / "model").string() + " --hardware " + hw);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find(hw + ": key 'd2h_gbps' (line 2)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace lt::plan
