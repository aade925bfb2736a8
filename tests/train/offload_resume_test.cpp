// Resuming the offload executors: a checkpoint holds everything they
// trained (the synchronous offload's masters and CPU states; ZenFlow's after
// its open window is ended and its device columns written back), so 3 steps
// and a resume to 6 give bitwise the losses of an uninterrupted run that
// saved at step 3 (ZenFlow's device columns and moments are in the
// checkpoint: Note [ZenFlow's saves]).
#include <gtest/gtest.h>

#include <cstring>

#include "train_helpers.h"

namespace lt::train::testing {
namespace {

std::vector<std::string> overrides(const std::string& mode, int64_t steps) {
  std::vector<std::string> o = {"train.steps=" + std::to_string(steps),
                                "train.batch_size=4",
                                "train.grad_accum=2",
                                "train.grad_clip=0.5",
                                "train.save_every=3",
                                "optim.lr=5e-3",
                                "exec.mode=" + mode};
  if (mode == "zenflow") {
    for (const char* z : {"exec.zenflow.topk_ratio=0.25", "exec.zenflow.update_interval=2",
                          "exec.zenflow.select_strategy=step", "exec.zenflow.select_interval=2",
                          "exec.zenflow.full_warm_up_rounds=1"})
      o.push_back(z);
  }
  return o;
}

TEST(OffloadResume, ThreeStepsAndAResumeEqualSixStepsSavingAtThree) {
  for (const char* mode : {"offload", "zenflow"}) {
    SCOPED_TRACE(mode);
    TempDir tmp(std::string("offload_resume_") + mode);
    write_random_tokens(tmp / "data.jsonl", 12, 97, 11);
    const fs::path data = tmp / "data.jsonl";
    train_quietly(fixture_config(fixture("llama"), data, tmp / "a", overrides(mode, 6)));
    train_quietly(fixture_config(fixture("llama"), data, tmp / "b", overrides(mode, 3)));
    train_quietly(fixture_config(fixture("llama"), data, tmp / "b", overrides(mode, 6)), "latest");
    const auto a = read_metrics(tmp / "a"), b = read_metrics(tmp / "b");
    ASSERT_EQ(a.size(), 6u);
    ASSERT_EQ(b.size(), 6u);
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(a[i].at("loss").get<double>(), b[i].at("loss").get<double>()) << "step " << i;
      EXPECT_EQ(a[i].at("grad_norm").get<double>(), b[i].at("grad_norm").get<double>())
          << "step " << i;
    }
    EXPECT_NE(a.front().at("loss").get<double>(), a.back().at("loss").get<double>());
    EXPECT_EQ(read_text(tmp / "a" / "step-6" / "model.safetensors"),
              read_text(tmp / "b" / "step-6" / "model.safetensors"));
  }
}

}  // namespace
}  // namespace lt::train::testing
