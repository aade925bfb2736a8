#pragma once
// What the data-parallel tests share: `lazytrain [launch --nproc N] train`
// on the qwen3 fixture (Runs), and comparisons of runs against the
// one-process run at the same global batch.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>

#include "io/hf_model.h"
#include "train/checkpoint.h"
#include "train/train_helpers.h"

namespace lt::train::testing {

// This test process's folder for OpenMPI's session files (below).
inline fs::path mpirun_sessions_folder() {
  return fs::temp_directory_path() / ("lt_test_ompi_" + std::to_string(::getpid()));
}

// mpirun refuses root unless told; this sandbox and some CI containers run
// as root. Only the tests set it. Containers also often forbid the
// cross-memory attach OpenMPI's shared-memory transport uses between ranks;
// plain copies work everywhere. Each mpirun gets its own session folder
// (a numbered one in this test process's): two mpiruns from tests ctest
// runs side by side shared /tmp/ompi.HOST.UID, and one failed to start with
// "mkdir ... File exists" as the other removed it (OpenMPI 4.1.4, `make
// test` on 2 cores); so did two a test started at once in one folder
// (MpiSetUpTimeouts, CI 2026-12-05). Call it before each mpirun.
inline void prepare_mpirun_environment() {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  static const bool made = [] {
    fs::create_directories(mpirun_sessions_folder());
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(mpirun_sessions_folder(), ignored);
    });
    return true;
  }();
  (void)made;
  static int runs = 0;
  const fs::path own = mpirun_sessions_folder() / std::to_string(runs++);
  fs::create_directories(own);
  ::setenv("OMPI_MCA_orte_tmpdir_base", own.c_str(), 1);
}

// The process whose command line holds `marker` and whose environment sets
// `variable` (e.g. OMPI_COMM_WORLD_RANK=1); 0 if none.
inline pid_t find_process(const std::string& marker, const std::string& variable) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline, environ;
    {
      std::ifstream c(entry.path() / "cmdline"), e(entry.path() / "environ");
      cmdline.assign(std::istreambuf_iterator<char>(c), {});
      environ.assign(std::istreambuf_iterator<char>(e), {});
    }
    if (cmdline.find(marker) != std::string::npos &&
        ('\0' + environ + '\0').find('\0' + variable + '\0') != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

// The processes `parent` started, from Linux's /proc/PID/task/TID/children.
inline std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& task :
       fs::directory_iterator(fs::path("/proc") / std::to_string(parent) / "task")) {
    std::ifstream list(task.path() / "children");
    for (pid_t pid = 0; list >> pid;) children.push_back(pid);
  }
  return children;
}

struct Runs {
  TempDir tmp{"data_parallel"};
  fs::path data = tmp / "data.jsonl";
  Runs() {
    prepare_mpirun_environment();
    write_random_tokens(data, 24, 97, 3);
  }
  // `lazytrain [launch --nproc N] train` on the fixture with `sets` on top
  // (nproc 0: without launch).
  std::vector<std::string> args(int nproc, const fs::path& out,
                                const std::vector<std::string>& sets,
                                const std::string& resume = "") const {
    std::vector<std::string> a;
    if (nproc > 0) a = {"launch", "--nproc", std::to_string(nproc)};
    a.insert(a.end(), {"train", "--no-sample"});
    for (const std::string& s :
         {"model.path=" + fixture("qwen3").string(), std::string("model.init=pretrained"),
          "data.path=" + data.string(), std::string("data.format=tokens"),
          std::string("train.seq_len=16"), std::string("train.device=cpu"),
          std::string("train.save_every=0"), std::string("train.grad_clip=0.5"),
          std::string("sched.name=constant"), std::string("sched.warmup_steps=0"),
          std::string("optim.lr=2e-3"), std::string("optim.eps=1e-3"), "out.dir=" + out.string()})
      a.insert(a.end(), {"--set", s});
    for (const std::string& s : sets) a.insert(a.end(), {"--set", s});
    if (!resume.empty()) a.insert(a.end(), {"--resume", resume});
    return a;
  }
  // Two ranks of a run of a million steps, once it has logged 3 steps (null
  // if it failed before).
  std::unique_ptr<Child> start_long_run(const fs::path& out,
                                        std::vector<std::string> sets = {}) const {
    sets.insert(sets.end(), {"train.batch_size=4", "train.steps=1000000"});
    auto child = std::make_unique<Child>(args(2, out, sets), out.string() + ".log");
    const bool logging = wait_for_lines(*child, out / "metrics.jsonl", 3, 60);
    EXPECT_TRUE(logging) << child->output();
    return logging ? std::move(child) : nullptr;
  }
  // Runs it to the end, expecting success; the exit code.
  int train(int nproc, const fs::path& out, const std::vector<std::string>& sets,
            std::string* output = nullptr, const std::string& resume = "") {
    std::string text;
    const int code = run_program(args(nproc, out, sets, resume), out.string() + ".log", &text, 120);
    if (output) *output = text;
    EXPECT_EQ(code, 0) << text;
    return code;
  }
};

inline void expect_same_steps(const fs::path& a, const fs::path& b, size_t first_step = 0) {
  const auto ma = read_metrics(a), mb = read_metrics(b);
  ASSERT_EQ(ma.size(), mb.size());
  for (size_t i = first_step; i < ma.size(); ++i) {
    for (const char* key : {"loss", "grad_norm"}) {
      const double x = ma[i].at(key).get<double>(), y = mb[i].at(key).get<double>();
      EXPECT_NEAR(x, y, 1e-6 * std::max(1.0, std::abs(x))) << key << " at step " << i;
    }
    EXPECT_EQ(ma[i].at("tokens"), mb[i].at("tokens")) << "step " << i;
  }
}

// The largest |x - y| over every weight of two Hugging Face folders.
inline double max_weight_difference(const fs::path& a, const fs::path& b) {
  const models::CausalLM x = io::load_hf_model(a, DType::F32);
  const models::CausalLM y = io::load_hf_model(b, DType::F32);
  const auto px = x.parameters(), py = y.parameters();
  EXPECT_EQ(px.size(), py.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(px.size(), py.size()); ++i) {
    const auto vx = px[i].second.to_vector<float>(), vy = py[i].second.to_vector<float>();
    EXPECT_EQ(vx.size(), vy.size()) << px[i].first;
    for (size_t j = 0; j < std::min(vx.size(), vy.size()); ++j)
      worst = std::max(worst, double(std::abs(vx[j] - vy[j])));
  }
  return worst;
}

// Equal within float tolerance, and trained (far from the start).
inline void expect_same_weights(const fs::path& a, const fs::path& b) {
  EXPECT_LT(max_weight_difference(a, b), 2e-6);
  EXPECT_GT(max_weight_difference(fixture("qwen3"), b), 1e-3);
}

// Host memory per rank, measured by the allocator (metrics.jsonl's host
// peak, the largest from step `first_step`) on 2 ranks of `exec_mode`,
// without and with ZeRO-1 (plus `zero_sets`): the bytes a parameter of the
// fixture that ZeRO-1 saves per rank must be `bytes_per_parameter`, within
// half a byte a parameter.
inline void expect_zero_saves_per_parameter(const std::string& exec_mode, size_t first_step,
                                            const std::vector<std::string>& zero_sets,
                                            double bytes_per_parameter) {
  Runs runs;
  const std::vector<std::string> sets = {"exec.mode=" + exec_mode, "train.batch_size=4",
                                         "train.steps=" + std::to_string(first_step + 2)};
  std::vector<std::string> zero = sets;
  zero.push_back("dist.zero=1");
  zero.insert(zero.end(), zero_sets.begin(), zero_sets.end());
  runs.train(2, runs.tmp / "plain", sets);
  runs.train(2, runs.tmp / "zero", zero);
  auto peak = [&](const fs::path& out) {
    int64_t most = 0;
    const auto lines = read_metrics(out);
    for (size_t i = first_step; i < lines.size(); ++i)
      most = std::max(most, lines[i].at("peak_bytes").at("host").get<int64_t>());
    return most;
  };
  int64_t params = 0;
  for (const auto& [name, p] : io::load_hf_model(fixture("qwen3")).parameters())
    params += p.numel();
  const double saved =
      static_cast<double>(peak(runs.tmp / "plain") - peak(runs.tmp / "zero")) / double(params);
  EXPECT_NEAR(saved, bytes_per_parameter, 0.5) << "bytes a parameter saved per rank";
}

// ZeRO-1 alone (each rank its own weights): a rank holds half the AdamW
// states (8 P / 2 bytes less) and its shard's summed gradients (4 P / 2
// more), the gradient slabs going: 2 bytes a parameter less.
inline void expect_zero_saves_two_bytes_a_parameter(const std::string& exec_mode,
                                                    size_t first_step) {
  expect_zero_saves_per_parameter(exec_mode, first_step, {"dist.share_weights=false"}, 2);
}

}  // namespace lt::train::testing
