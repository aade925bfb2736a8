// exec.weight_uploads f32 on the GPU (Note [Pinned masters]): the streaming
// executor uploads the pinned f32 masters and the GPU casts them to bf16,
// instead of uploading the bf16 shadows the CPU update writes.
//  - The cast of an upload larger than the staging buffer (several pieces)
//    equals the CPU's f32 -> bf16 rounding bit for bit.
//  - Training (AdamW and AdamW8bit, with and without stages on disk) gives
//    the shadow path's losses, gradient norms and masters bit for bit: both
//    round to nearest even, so the GPU computes with the same weights. The
//    shadow path itself is checked against the resident executor and
//    transformers (streaming_gpu_test.cpp); this run is also held to the
//    resident reference's tolerance.
//  - The masters live in the pinned allocator, and nothing else is made
//    pinned for them: no shadows.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bf16_reference.h"
#include "core/random.h"
#include "exec/cuda/pinned_masters.h"
#include "exec/cuda/streaming_device_cuda.h"
#include "exec/memory_budget.h"
#include "exec/streaming.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "train_compare.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;
using namespace gpu_test;

TEST(F32UploadsGpu, ConversionOfSeveralPiecesEqualsTheCpuRounding) {
  LT_REQUIRE_GPU();
  // 2.5 staging buffers' worth, so the last piece is partial.
  const int64_t n = kUploadStagingBytes / 4 * 5 / 2 + 77;
  Tensor master = Tensor::empty({n}, DType::F32);
  Generator gen(5);
  master.copy_(Tensor::randn({n}, gen));
  nn::NamedParameters masters = {{"w", master}};
  optim::AdamW adam(masters, adam_options());
  CudaStreamingDevice device(masters, adam, 0, {}, {true});
  EXPECT_GE(pinned_master_allocator().stats().current_bytes, n * 4);
  Tensor dst = device.empty({n}, DType::BF16);
  CopyList copies;
  copies.emplace_back(dst, master);
  device.upload(std::move(copies), Ticket(), "w").get();
  const Tensor got = dst.to(Device::cpu());
  const Tensor want = master.to(DType::BF16);  // the CPU's rounding, as the shadows get it
  ASSERT_EQ(got.nbytes(), want.nbytes());
  EXPECT_EQ(std::memcmp(got.data_ptr(), want.data_ptr(), want.nbytes()), 0);
}

enum class Opt { AdamW, AdamW8bit };

std::unique_ptr<optim::Optimizer> make_optimizer(Opt o, const nn::NamedParameters& params) {
  if (o == Opt::AdamW)
    return std::make_unique<optim::AdamW>(params, adam_options(), std::vector<std::string>{"norm"});
  return std::make_unique<optim::AdamW8bit>(
      params, adam_options(), std::vector<std::string>{"norm"}, optim::AdamW8bitOptions{64, 256});
}

// `f32`: upload the masters of the stages not on disk as f32.
TrainRun train(Opt o, bool f32, const std::vector<bool>& on_disk, const fs::path& dir) {
  models::CausalLM model = io::load_hf_model(fixture("llama"));
  const auto batches = make_batches(4, 16, 97, 21, 3);
  auto opt = make_optimizer(o, model.parameters());
  std::vector<bool> flags;
  if (f32) {
    size_t stage = 0;
    for (const auto& s : model.stages()) {
      nn::NamedParameters own;
      s->collect(own);
      flags.insert(flags.end(), own.size(), !(stage < on_disk.size() && on_disk[stage]));
      ++stage;
    }
  }
  const int64_t pinned_before = pinned_master_allocator().stats().current_bytes;
  CudaStreamingDevice device(model.parameters(), *opt, 0, {}, flags);
  int64_t pinned_masters = 0;
  for (size_t i = 0; i < flags.size(); ++i)
    if (flags[i]) pinned_masters += model.parameters()[i].second.nbytes();
  EXPECT_EQ(pinned_master_allocator().stats().current_bytes - pinned_before, pinned_masters);
  TrainRun r;
  r.initial = host_values(model);
  {
    StreamingOptions options;
    options.schedule = Schedule::every_kth_gpu(2, 2);
    options.schedule.chunk_sequences = 1;
    options.states_on_disk = on_disk;
    options.disk.directory = dir.string();
    StreamingExecutor executor(model, *opt, device, options);
    for (const auto& b : batches) r.stats.push_back(executor.step(b, step_options()));
    executor.sync();
  }
  r.params = host_values(model);
  return r;
}

void expect_bitwise(const TrainRun& a, const TrainRun& b, const std::string& label) {
  ASSERT_EQ(a.stats.size(), b.stats.size());
  for (size_t s = 0; s < a.stats.size(); ++s) {
    EXPECT_EQ(a.stats[s].loss, b.stats[s].loss) << label << " step " << s;
    EXPECT_EQ(a.stats[s].grad_norm, b.stats[s].grad_norm) << label << " step " << s;
  }
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_EQ(a.params[i], b.params[i]) << label << " parameter " << i;
}

TEST(F32UploadsGpu, TrainsAsTheBf16CopiesBitForBit) {
  LT_REQUIRE_GPU();
  const fs::path dir = fs::temp_directory_path() / "lt_f32_uploads_gpu";
  fs::create_directories(dir);
  const TrainRun resident =
      train_resident(io::load_hf_model(fixture("llama")), make_batches(4, 16, 97, 21, 3));
  // Stages: embed, 2 blocks, head; the second block's states on disk.
  const std::vector<std::vector<bool>> placements = {{}, {false, false, true, false}};
  for (Opt o : {Opt::AdamW, Opt::AdamW8bit}) {
    for (const auto& on_disk : placements) {
      const std::string label = std::string(o == Opt::AdamW ? "adamw" : "adamw8bit") +
                                (on_disk.empty() ? "" : ", block 1 on disk");
      SCOPED_TRACE(label);
      const TrainRun copies = train(o, false, on_disk, dir);
      const TrainRun f32 = train(o, true, on_disk, dir);
      expect_bitwise(f32, copies, label);
      if (o == Opt::AdamW) {
        EXPECT_LT(update_rel_error(f32, resident), 0.35) << label;
        for (size_t s = 0; s < resident.stats.size(); ++s)
          EXPECT_LT(rel(f32.stats[s].loss, resident.stats[s].loss), 1e-2) << label;
      }
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace lt::exec
