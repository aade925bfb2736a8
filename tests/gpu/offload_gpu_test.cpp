// The offload executors on the GPU (CudaStreamingDevice: bf16 weights
// resident on the device, f32 masters and the optimizer on the host)
// against the resident executor on the GPU with bf16 compute, with the
// tolerances streaming_gpu_test.cpp explains (both compute in bf16; they
// differ in which machine runs AdamW). Synchronous offload, and ZenFlow
// with every column on the device (its AdamW then runs on the GPU over
// f32 copies of the masters). ZenFlow's column kernels are checked
// against the CPU backend on the same matrices.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "bf16_reference.h"
#include "core/random.h"
#include "exec/cuda/streaming_device_cuda.h"
#include "exec/offload.h"
#include "exec/resident.h"
#include "gpu_test_support.h"
#include "io/hf_model.h"
#include "ops/columns.h"
#include "optim/adamw.h"
#include "train_compare.h"

namespace lt::exec {
namespace {

using namespace gpu_test;

TrainRun train_offload(models::CausalLM model, const std::vector<std::vector<data::Batch>>& batches,
                       OffloadOptions options) {
  optim::AdamW adam(model.parameters(), adam_options(), {"norm"});
  options.adam = adam_options();
  options.no_decay = {"norm"};
  TrainRun r;
  r.initial = host_values(model);
  {
    OffloadExecutor executor(
        model, adam, std::make_unique<CudaStreamingDevice>(model.parameters(), adam), options);
    for (const auto& b : batches) r.stats.push_back(executor.step(b, step_options()));
    executor.sync_masters();
  }
  r.params = host_values(model);
  return r;
}

void compare(const TrainRun& got, const TrainRun& resident, const std::string& label) {
  ASSERT_EQ(got.stats.size(), resident.stats.size());
  for (size_t s = 0; s < resident.stats.size(); ++s) {
    EXPECT_FALSE(got.stats[s].skipped) << label << " step " << s;
    EXPECT_LT(rel(got.stats[s].loss, resident.stats[s].loss), 1e-2) << label << " step " << s;
    EXPECT_LT(rel(got.stats[s].grad_norm, resident.stats[s].grad_norm), 3e-2)
        << label << " step " << s;
  }
  const double err = update_rel_error(got, resident);
  std::printf("%s: update error %.4f, last loss %.6f vs %.6f\n", label.c_str(), err,
              got.stats.back().loss, resident.stats.back().loss);
  EXPECT_LT(err, 0.35) << label;
}

TEST(OffloadGpu, SynchronousAndAllColumnZenFlowFollowResident) {
  LT_REQUIRE_GPU();
  for (const char* family : {"llama", "qwen2"}) {
    SCOPED_TRACE(family);
    const auto model = io::load_hf_model(fixture(family));
    const auto batches = make_batches(4, 16, model.config().vocab_size, 21, 3);
    const TrainRun ref = train_resident(io::load_hf_model(fixture(family)), batches);
    compare(train_offload(io::load_hf_model(fixture(family)), batches, {}), ref,
            std::string(family) + " offload");
    OffloadOptions zen;
    zen.zenflow = true;
    zen.zenflow_options.topk_ratio = 1.0;
    zen.zenflow_options.update_interval = 1;
    compare(train_offload(io::load_hf_model(fixture(family)), batches, zen), ref,
            std::string(family) + " zenflow topk 1");
  }
}

TEST(OffloadGpu, PartialZenFlowTrains) {
  LT_REQUIRE_GPU();
  const auto batches =
      make_batches(6, 16, io::load_hf_model(fixture("llama")).config().vocab_size, 21, 3);
  OffloadOptions zen;
  zen.zenflow = true;
  zen.zenflow_options.topk_ratio = 0.25;
  zen.zenflow_options.update_interval = 2;
  const TrainRun got = train_offload(io::load_hf_model(fixture("llama")), batches, zen);
  for (const auto& s : got.stats) EXPECT_TRUE(std::isfinite(s.loss) && s.grad_norm > 0);
  // Every parameter moved: the CPU's windows reached the device weights.
  for (size_t i = 0; i < got.params.size(); ++i) EXPECT_NE(got.params[i], got.initial[i]) << i;
}

TEST(ColumnsGpu, KernelsEqualTheCpuBackend) {
  LT_REQUIRE_GPU();
  Generator gen(5);
  for (DType dtype : {DType::F32, DType::BF16}) {
    const Tensor host = Tensor::randn({300, 77}, gen, DType::F32).to(dtype);
    const Tensor dev = host.to(Device::cuda(0));
    const std::vector<double> want = ops::column_abs_sums(host).to_doubles();
    const std::vector<double> got = ops::column_abs_sums(dev).to(Device::cpu()).to_doubles();
    for (size_t c = 0; c < want.size(); ++c) EXPECT_NEAR(got[c], want[c], 1e-5 * want[c]);
    const Tensor cols = Tensor::from_vector<int32_t>({3, 9, 10, 76}, {4});
    const Tensor dcols = cols.to(Device::cuda(0));
    EXPECT_EQ(ops::gather_columns(dev, dcols).to(Device::cpu()).to_doubles(),
              ops::gather_columns(host, cols).to_doubles());
    const Tensor src = Tensor::randn({300, 4}, gen, DType::F32);
    ops::scatter_columns(host, src, cols);
    ops::scatter_columns(dev, src.to(Device::cuda(0)), dcols);
    EXPECT_EQ(dev.to(Device::cpu()).to_doubles(), host.to_doubles());
    ops::zero_columns(host, cols);
    ops::zero_columns(dev, dcols);
    EXPECT_EQ(dev.to(Device::cpu()).to_doubles(), host.to_doubles());
  }
}

// Note [ZenFlow's saves]: ZenFlow saved at step 3 and taken up again by a
// new executor (the optimizer's states and checkpoint_state() handed over,
// as a resume does) goes on as the run that saved and went on: the same
// losses, the device's columns and moments being the checkpoint's.
TEST(OffloadGpu, ZenFlowTakenUpFromASaveGoesOnAsTheSavingRun) {
  LT_REQUIRE_GPU();
  auto batches =
      make_batches(6, 16, io::load_hf_model(fixture("llama")).config().vocab_size, 21, 3);
  OffloadOptions zen;
  zen.zenflow = true;
  zen.zenflow_options.topk_ratio = 0.25;
  zen.zenflow_options.update_interval = 2;
  zen.adam = adam_options();
  zen.no_decay = {"norm"};
  const auto run = [&](models::CausalLM& model, optim::AdamW& adam, size_t from, size_t to,
                       const optim::NamedTensors* saved, std::vector<StepStats>& stats) {
    OffloadExecutor executor(model, adam,
                             std::make_unique<CudaStreamingDevice>(model.parameters(), adam), zen);
    if (saved) {
      EXPECT_EQ(executor.restore_checkpoint_state(*saved), "");
      executor.resume_at(static_cast<int64_t>(from));
    }
    for (size_t s = from; s < to; ++s) {
      stats.push_back(executor.step(batches[s], step_options()));
      if (s + 1 == 3) executor.sync_masters();  // the save at step 3
    }
    executor.sync_masters();
    return executor.checkpoint_state();
  };
  std::vector<StepStats> whole, parts;
  auto a = io::load_hf_model(fixture("llama"));
  optim::AdamW adam_a(a.parameters(), adam_options(), {"norm"});
  run(a, adam_a, 0, 6, nullptr, whole);

  auto b = io::load_hf_model(fixture("llama"));
  optim::AdamW adam_b(b.parameters(), adam_options(), {"norm"});
  const optim::NamedTensors saved = run(b, adam_b, 0, 3, nullptr, parts);
  ASSERT_FALSE(saved.empty());
  optim::AdamW resumed(b.parameters(), adam_options(), {"norm"});
  resumed.load_state(adam_b.state());
  run(b, resumed, 3, 6, &saved, parts);
  ASSERT_EQ(parts.size(), whole.size());
  for (size_t s = 0; s < whole.size(); ++s) {
    EXPECT_EQ(parts[s].loss, whole[s].loss) << "step " << s + 1;
    EXPECT_EQ(parts[s].grad_norm, whole[s].grad_norm) << "step " << s + 1;
  }
}

}  // namespace
}  // namespace lt::exec
