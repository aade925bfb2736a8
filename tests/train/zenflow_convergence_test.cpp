// ZenFlow trains as well as AdamW on real data: assets/demo/gsm8k.yaml's
// corpus (GSM8K questions and answers) and model, trained from scratch by `lazytrain
// train` twice from the same seed, once resident and once with ZenFlow at
// its defaults (a tenth of each weight's columns on the device, the auto
// window, the CPU update overlapped and one window late). After 200 steps
// the mean loss of the last 20 is within 2% of resident's.
//
// The rate is 1e-3, not that config's 3e-3: at 3e-3 the one-window-late
// updates of this 96-wide model cost it about 14% at step 200 (and 0.6%
// without overlap_step), which is the price of staleness at a rate this
// high, measured and written in docs/design.md.
#include <gtest/gtest.h>

#include <numeric>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

double mean_of_last(const std::vector<double>& v, size_t n) {
  return std::accumulate(v.end() - static_cast<std::ptrdiff_t>(n), v.end(), 0.0) /
         static_cast<double>(n);
}

std::vector<double> train_losses(const TempDir& tmp, const std::string& mode) {
  const fs::path out = tmp / mode;
  std::string output;
  const int code =
      run_program({"train", (assets_dir() / "demo/gsm8k.yaml").string(), "--no-sample", "--set",
                   "exec.mode=" + mode, "--set", "train.steps=200", "--set", "train.seq_len=64",
                   "--set", "train.batch_size=4", "--set", "optim.lr=1e-3", "--set",
                   "train.save_every=0", "--set", "out.dir=" + out.string()},
                  tmp / (mode + ".log"), &output, 900);
  EXPECT_EQ(code, 0) << output;
  return field(read_metrics(out), "loss");
}

TEST(ZenFlowConvergence, DemoCorpusWithinTwoPercentOfResidentAfter200Steps) {
  TempDir tmp("zenflow_convergence");
  const std::vector<double> resident = train_losses(tmp, "resident");
  const std::vector<double> zenflow = train_losses(tmp, "zenflow");
  ASSERT_EQ(resident.size(), 200u);
  ASSERT_EQ(zenflow.size(), 200u);
  const double r = mean_of_last(resident, 20), z = mean_of_last(zenflow, 20);
  std::cout << "last 20 steps' mean loss: resident " << r << ", zenflow " << z << "\n";
  EXPECT_LT(r, resident.front() - 3.0) << "resident should learn";
  EXPECT_LE(z, 1.02 * r);
}

}  // namespace
}  // namespace lt::train::testing
