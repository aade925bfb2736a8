// train.clip_with_previous_norm on the GPU (Note [Updates during the
// backward]): `lazytrain train` with exec.mode streaming on train.device
// cuda (bf16), updating each stage during the backward, with the states in
// host memory, on disk, and kept on the device (exec.stages_on_device auto:
// every stage of the tiny model, updated there), tracks the resident run on the GPU with the same
// option within 1e-2 per step (the bound StreamingTrainerGpu uses: both
// compute in bf16 but AdamW runs on different machines), and differs from
// the exact-clipping run from the second step on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "train/train_helpers.h"
#include "train_compare.h"

namespace lt::exec {
namespace {

using namespace gpu_test;

TEST(PreviousNormClipGpu, StreamingRunTracksResident) {
  LT_REQUIRE_GPU();
  using namespace train::testing;
  TempDir tmp("gpu_previous_norm");
  write_random_tokens(tmp / "data.jsonl", 12, 97, 11);
  auto overrides = [](const std::string& mode, const std::string& placement, bool option) {
    const bool kept = placement == "device";
    return std::vector<std::string>{
        "exec.stages_on_device=" + std::string(kept ? "auto" : "none"),
        "train.steps=4",
        "train.batch_size=4",
        "train.grad_accum=2",
        "train.grad_clip=0.05",
        "optim.lr=5e-3",
        "train.device=cuda",
        "train.dtype=bf16",
        "exec.mode=" + mode,
        "exec.state_placement=" + std::string(kept ? "host" : placement),
        std::string("train.clip_with_previous_norm=") + (option ? "true" : "false")};
  };
  const fs::path model = fixture("qwen2");
  const auto run = [&](const std::string& name, const std::string& mode,
                       const std::string& placement, bool option) {
    train_quietly(
        fixture_config(model, tmp / "data.jsonl", tmp / name, overrides(mode, placement, option)));
    auto m = read_metrics(tmp / name);
    EXPECT_EQ(m.size(), 4u) << name;
    return m;
  };
  const auto resident = run("resident", "resident", "host", true);
  const auto exact = run("exact", "streaming", "host", false);
  for (const char* placement : {"host", "disk", "device"}) {
    SCOPED_TRACE(placement);
    const auto streaming = run(std::string("streaming_") + placement, "streaming", placement, true);
    ASSERT_EQ(streaming.size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      const double r = resident[i].at("loss").get<double>();
      const double s = streaming[i].at("loss").get<double>();
      EXPECT_LT(rel(s, r), 1e-2) << "step " << i << ": streaming " << s << ", resident " << r;
      EXPECT_FALSE(streaming[i].value("skipped", false)) << "step " << i;
    }
    // Every step clips (grad_clip 0.05), so the previous norm's factor
    // moves the weights otherwise than the exact one: step 3's loss differs.
    EXPECT_NE(streaming[3].at("loss").get<double>(), exact[3].at("loss").get<double>());
  }
}

}  // namespace
}  // namespace lt::exec
