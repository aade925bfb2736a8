// The streaming executor on the GPU (CudaStreamingDevice: bf16 compute,
// f32 masters and AdamW on the host, bf16 weights streamed from pinned
// shadows) against the resident executor on the GPU with bf16 compute (its
// masters and AdamW on the device), itself tested against the CPU and
// transformers in resident_gpu_test.cpp. Same fixture model, same batches,
// same AdamW settings, clipping on, several steps and schedules:
//  - every step's loss within 1e-2 relative and gradient norm within 3e-2;
//  - the final masters within 0.35 of how far training moved them (the
//    bound resident_gpu_test uses for bf16; a skipped update or a lost
//    gradient gives about 1).
// Both compute in bf16 but differ in where the bf16 gradient becomes f32
// and in which machine runs AdamW, hence a tolerance, not bitwise.
// A 12-block model shows the device peak of streaming below resident's.
// LT_BENCH=1 adds the Qwen2.5-3B-shaped benchmark (bench/train_3b_streaming.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "bf16_reference.h"
#include "core/cuda/caching_allocator.h"
#include "core/cuda/device_info.h"
#include "core/cuda/stream_delay.h"
#include "core/error.h"
#include "core/random.h"
#include "exec/cuda/streaming_device_cuda.h"
#include "exec/resident.h"
#include "exec/streaming.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "support/fixture_models.h"
#include "train/train_helpers.h"
#include "train_compare.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;
using namespace gpu_test;

// The batches these tests train on: seed 21, targets 0 and 3 masked.
std::vector<std::vector<data::Batch>> make_batches(int steps, int64_t seq, int64_t vocab) {
  return gpu_test::make_batches(steps, seq, vocab, 21, 3);
}

// Masters and AdamW on the host, weights streamed to the GPU in bf16.
// `delay_ms` > 0: before each stage use the compute stream is kept busy
// that long, so that the host runs a use ahead of the GPU (Note [One use
// queued ahead]) while it queues the copies around it.
TrainRun train_streaming(models::CausalLM model,
                         const std::vector<std::vector<data::Batch>>& batches,
                         const Schedule& schedule, double delay_ms = 0) {
  optim::AdamW adam(model.parameters(), adam_options(), {"norm"});
  CudaStreamingDevice device(model.parameters(), adam);
  TrainRun r;
  r.initial = host_values(model);
  {
    StreamingOptions options;
    options.schedule = schedule;
    if (delay_ms > 0) {
      options.observe_use = [&device, delay_ms](size_t, bool computed) {
        if (!computed) cuda::enqueue_delay(device.compute_stream(), delay_ms);
      };
    }
    StreamingExecutor executor(model, adam, device, options);
    for (const auto& b : batches) r.stats.push_back(executor.step(b, step_options()));
    executor.sync();
  }
  r.params = host_values(model);
  return r;
}

void compare(const TrainRun& streaming, const TrainRun& resident, const std::string& label) {
  ASSERT_EQ(streaming.stats.size(), resident.stats.size());
  for (size_t s = 0; s < resident.stats.size(); ++s) {
    EXPECT_FALSE(streaming.stats[s].skipped) << label << " step " << s;
    EXPECT_LT(rel(streaming.stats[s].loss, resident.stats[s].loss), 1e-2)
        << label << " step " << s << ": streaming loss " << streaming.stats[s].loss << ", resident "
        << resident.stats[s].loss;
    EXPECT_LT(rel(streaming.stats[s].grad_norm, resident.stats[s].grad_norm), 3e-2)
        << label << " step " << s << ": streaming grad norm " << streaming.stats[s].grad_norm
        << ", resident " << resident.stats[s].grad_norm;
    EXPECT_GT(streaming.stats[s].peak_bytes.at("gpu"), 0) << label;
  }
  const double err = update_rel_error(streaming, resident);
  std::printf("%s: update error %.4f, last loss %.6f vs %.6f\n", label.c_str(), err,
              streaming.stats.back().loss, resident.stats.back().loss);
  EXPECT_LT(err, 0.35) << label;
}

Schedule placements(std::initializer_list<Placement> list) {
  Schedule s;
  s.boundaries = list;
  return s;
}

class StreamingGpuFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamingGpuFixture, SchedulesMatchResidentBf16) {
  LT_REQUIRE_GPU();
  const std::string family = GetParam();
  const auto batches = make_batches(4, 16, 97);
  const TrainRun resident = train_resident(io::load_hf_model(fixture(family)), batches);
  const int blocks =
      static_cast<int>(io::load_hf_model(fixture(family)).config().num_hidden_layers);
  ASSERT_EQ(blocks, 2) << "the host-mix schedule below is written for 2 blocks";
  constexpr Placement G = Placement::Gpu, H = Placement::Host, R = Placement::Recompute;
  Schedule chunked = Schedule::every_kth_gpu(blocks, 2);
  chunked.chunk_sequences = 1;  // one sequence at a time through each stage
  // Note [Stages on the device]: kept whole and updated by the GPU.
  const auto on_device = [](Schedule s, std::vector<int> stages) {
    s.stages_on_device = std::move(stages);
    return s;
  };
  // Note [The fused tail]: the last `tail` blocks and the head per chunk.
  const auto fused = [](Schedule s, int tail = 1) {
    s.tail_blocks = tail;
    return s;
  };
  const auto in_pieces = [](Schedule s) {
    s.tail_chunk_sequences = 1;
    return s;
  };
  const std::vector<std::pair<std::string, Schedule>> schedules = {
      {"fused tail, chunks of 1", fused(chunked)},
      {"fused tail of 2, chunks of 1", fused(chunked, 2)},
      {"fused tail, embed and block 1 on the device",
       fused(on_device(placements({G, R, G}), {0, 2}))},
      {"fused tail of 2, embed and block 1 on the device",
       fused(on_device(placements({G, R, G}), {0, 2}), 2)},
      {"fused tail, head on the device", fused(on_device(Schedule::all_gpu(blocks), {0, 3}))},
      {"fused tail of 2 in pieces of 1 (Note [The tail's own chunks])",
       in_pieces(fused(Schedule::all_gpu(blocks), 2))},
      {"embed and block 0 on the device", on_device(Schedule::all_gpu(blocks), {0, 1})},
      {"every stage on the device", on_device(chunked, {0, 1, 2, 3})},
      {"embed, block 1 and head on the device", on_device(placements({H, R, G}), {0, 2, 3})},
      {"all_gpu", Schedule::all_gpu(blocks)},
      {"every_kth 2", Schedule::every_kth_gpu(blocks, 2)},
      {"host offload mix", placements({H, R, G})},
      {"host + recompute", placements({G, H, R})},
      {"every_kth 2, chunks of 1", chunked},
  };
  for (const auto& [name, schedule] : schedules) {
    SCOPED_TRACE(name);
    compare(train_streaming(io::load_hf_model(fixture(family)), batches, schedule), resident,
            family + " " + name);
  }
}

// The host a use ahead of a slow GPU: uploads into the weight slots,
// gradient downloads, boundary offloads and read-backs, and the updates of
// the stages on the device are all queued while the GPU still runs the use
// before; each must still wait for the compute it follows.
TEST(StreamingGpu, AGpuBehindTheHostMatchesResident) {
  LT_REQUIRE_GPU();
  const auto batches = make_batches(4, 16, 97);
  const TrainRun resident = train_resident(io::load_hf_model(fixture("qwen2")), batches);
  constexpr Placement G = Placement::Gpu, H = Placement::Host, R = Placement::Recompute;
  Schedule chunked = placements({H, R, G});
  chunked.chunk_sequences = 1;
  Schedule embed_on_device = Schedule::all_gpu(2);
  embed_on_device.stages_on_device = {0, 1};
  Schedule fused_tail = Schedule::all_gpu(2);
  fused_tail.chunk_sequences = 1;
  fused_tail.tail_blocks = 2;
  Schedule tail_in_pieces = Schedule::all_gpu(2);
  tail_in_pieces.tail_blocks = 2;
  tail_in_pieces.tail_chunk_sequences = 1;
  const std::vector<std::pair<std::string, Schedule>> schedules = {
      {"fused tail of 2, chunks of 1", fused_tail},
      {"fused tail of 2 in pieces of 1", tail_in_pieces},
      {"host offload mix, chunks of 1", chunked},
      {"host + recompute", placements({G, H, R})},
      {"embed and block 0 on the device", embed_on_device},
  };
  for (const auto& [name, schedule] : schedules) {
    SCOPED_TRACE(name);
    compare(train_streaming(io::load_hf_model(fixture("qwen2")), batches, schedule, 3.0), resident,
            "qwen2 GPU behind, " + name);
  }
}

INSTANTIATE_TEST_SUITE_P(Families, StreamingGpuFixture,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gpt2"));

// A 12-block model: streaming holds two blocks' bf16 weights plus the kept
// boundaries on the device, resident the whole model's masters, AdamW
// moments and bf16 copy, so streaming's peak must be well below.
TEST(StreamingGpu, PeakBelowResidentOnTwelveBlocks) {
  LT_REQUIRE_GPU();
  models::ModelConfig config = lt::testing::twelve_block_qwen2_config();
  auto make = [&] {
    Generator gen(3);
    return models::CausalLM::random(config, gen);
  };
  const auto batches = make_batches(2, 64, config.vocab_size);
  // Earlier tests in the same process may leave blocks allocated (cached
  // library workspaces): the peaks count from what was held before this test.
  const int64_t held_before = cuda::caching_allocator(0).stats().current_bytes;
  const TrainRun resident = train_resident(make(), batches);
  const TrainRun streaming =
      train_streaming(make(), batches, Schedule::every_kth_gpu(config.num_hidden_layers, 4));
  compare(streaming, resident, "12 blocks every_kth 4");
  const int64_t resident_peak = resident.stats.back().peak_bytes.at("gpu") - held_before;
  const int64_t streaming_peak = streaming.stats.back().peak_bytes.at("gpu") - held_before;
  std::printf("12 blocks: GPU peak streaming %lld bytes, resident %lld bytes (%lld held before)\n",
              static_cast<long long>(streaming_peak), static_cast<long long>(resident_peak),
              static_cast<long long>(held_before));
  EXPECT_LT(streaming_peak, resident_peak);
  // The resident masters + moments + bf16 copy alone are 14 bytes/param.
  EXPECT_LT(streaming_peak, 14 * config.num_parameters());
}

// A bad upload (a dtype conversion from a tensor that is not a registered
// master) is a clear error, not a silent reinterpretation.
TEST(StreamingGpu, UnregisteredConversionIsAnError) {
  LT_REQUIRE_GPU();
  models::CausalLM model = io::load_hf_model(fixture("llama"));
  optim::AdamW adam(model.parameters(), adam_options(), {"norm"});
  CudaStreamingDevice device(model.parameters(), adam);
  Tensor host = Tensor::zeros({4}, DType::F32);
  Tensor dst = device.empty({4}, DType::BF16);
  CopyList copies;
  copies.emplace_back(dst, host);
  EXPECT_THROW(device.upload(std::move(copies), Ticket(), "bad"), Error);
}

// `lazytrain train` with exec.mode streaming on train.device cuda (bf16)
// tracks the same config's resident run on the GPU within 1e-2 per step
// (accumulation and clipping on), and f32 compute is refused clearly.
TEST(StreamingTrainerGpu, StreamingRunTracksResident) {
  LT_REQUIRE_GPU();
  using namespace train::testing;
  TempDir tmp("gpu_streaming");
  write_random_tokens(tmp / "data.jsonl", 12, 97, 11);
  auto overrides = [](const std::string& mode, const std::string& dtype) {
    return std::vector<std::string>{
        "train.steps=4", "train.batch_size=4", "train.grad_accum=2",   "train.grad_clip=0.5",
        "optim.lr=5e-3", "train.device=cuda",  "train.dtype=" + dtype, "exec.mode=" + mode};
  };
  const fs::path model = fixture("qwen2");
  train_quietly(
      fixture_config(model, tmp / "data.jsonl", tmp / "resident", overrides("resident", "bf16")));
  train_quietly(
      fixture_config(model, tmp / "data.jsonl", tmp / "streaming", overrides("streaming", "bf16")));
  const auto resident = read_metrics(tmp / "resident");
  const auto streaming = read_metrics(tmp / "streaming");
  ASSERT_EQ(resident.size(), 4u);
  ASSERT_EQ(streaming.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const double r = resident[i].at("loss").get<double>();
    const double s = streaming[i].at("loss").get<double>();
    EXPECT_LT(rel(s, r), 1e-2) << "step " << i << ": streaming " << s << ", resident " << r;
    EXPECT_GT(streaming[i].at("peak_bytes").at("gpu").get<int64_t>(), 0);
  }
  try {
    train_quietly(
        fixture_config(model, tmp / "data.jsonl", tmp / "f32", overrides("streaming", "f32")));
    ADD_FAILURE() << "streaming with train.dtype f32 on cuda was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.dtype"), std::string::npos) << e.what();
  }
}

// ---- benchmark (not a test): skipped unless LT_BENCH=1 ----
// The Qwen2.5-3B-shaped model (bench/models/qwen2.5-3b, random weights),
// streaming bf16 training with host AdamW, seq 1024, every_kth 4 schedule,
// batch 8 and batch 32 (LT_BENCH_BATCHES, comma-separated), in chunks of
// LT_BENCH_MICRO (8) sequences. Medians over LT_BENCH_STEPS (4) steps after
// one warm-up: tokens/s, TFLOP/s by 6 N tokens, GPU peak and the StepStats
// split. LT_BENCH_LAYERS / _SEQ shrink it; LT_BENCH_CONFIG names another
// config.json under bench/models (e.g. qwen2.5-7b) and LT_BENCH_OPTIM=adamw8bit
// takes blockwise 8-bit states (what lets the 7B shape fit a 128 GB host).
std::vector<int64_t> bench_batches() {
  const char* v = std::getenv("LT_BENCH_BATCHES");
  std::string s = v && *v ? v : "8,32";
  std::vector<int64_t> out;
  size_t at = 0;
  while (at < s.size()) {
    const size_t comma = s.find(',', at);
    out.push_back(std::atoll(s.substr(at, comma - at).c_str()));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

// The process's peak resident set (VmHWM, bytes): host masters, optimizer
// states and the pinned buffers, as the OS counts them; 0 where unreadable.
int64_t process_peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmHWM:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(StreamingBench, Qwen25Shaped3B) {
  if (std::getenv("LT_BENCH") == nullptr) GTEST_SKIP() << "benchmark: set LT_BENCH=1";
  LT_REQUIRE_GPU();
  const char* config_name = std::getenv("LT_BENCH_CONFIG");
  models::ModelConfig config = models::ModelConfig::from_file(
      fs::path(LT_SOURCE_DIR) / "bench/models" /
      (config_name && *config_name ? config_name : "qwen2.5-3b") / "config.json");
  config.num_hidden_layers = env_int("LT_BENCH_LAYERS", config.num_hidden_layers);
  const int64_t seq = env_int("LT_BENCH_SEQ", 1024);
  const int64_t steps = std::max<int64_t>(4, env_int("LT_BENCH_STEPS", 4));
  const int blocks = static_cast<int>(config.num_hidden_layers);

  models::CausalLM model = models::CausalLM::uninitialized(config, DType::F32);
  fill_bench_weights(model);
  const char* optim_name = std::getenv("LT_BENCH_OPTIM");
  const bool eight_bit = optim_name && std::string(optim_name) == "adamw8bit";
  std::unique_ptr<optim::Optimizer> owned;
  if (eight_bit) {
    owned = std::make_unique<optim::AdamW8bit>(model.parameters(), adam_options(),
                                               std::vector<std::string>{"bias", "norm"});
  } else {
    owned = std::make_unique<optim::AdamW>(model.parameters(), adam_options(),
                                           std::vector<std::string>{"bias", "norm"});
  }
  optim::Optimizer& adam = *owned;
  CudaStreamingDevice device(model.parameters(), adam);
  const double n_params = static_cast<double>(config.num_parameters());
  Generator gen(9);
  for (const int64_t batch : bench_batches()) {
    StreamingOptions options;
    options.schedule = Schedule::every_kth_gpu(blocks, 4);
    options.schedule.chunk_sequences = env_int("LT_BENCH_MICRO", 8);
    StreamingExecutor executor(model, adam, device, options);
    StepOptions so;
    so.lr = 1e-5;
    so.max_grad_norm = 1.0;
    std::vector<double> times, compute, recompute, h2d, d2h, optimizer, bubbles;
    int64_t peak = 0, host_peak = 0;
    for (int64_t s = 0; s < 1 + steps; ++s) {
      const data::Batch b = lt::testing::random_token_batch(gen, batch, seq, config.vocab_size);
      const StepStats st = executor.step({b}, so);
      ASSERT_FALSE(st.skipped) << "step " << s << ": loss " << st.loss << ", norm " << st.grad_norm;
      std::printf(
          "batch %lld step %lld: loss %.4f norm %.4f %.3f s (compute %.3f recompute %.3f h2d %.3f "
          "d2h %.3f optimizer %.3f bubbles %.3f) gpu peak %.2f GB\n",
          static_cast<long long>(batch), static_cast<long long>(s), st.loss, st.grad_norm,
          st.seconds, st.compute_s, st.recompute_s, st.exposed_h2d_s, st.exposed_d2h_s,
          st.optimizer_s, st.bubbles_s, st.peak_bytes.at("gpu") / 1e9);
      std::fflush(stdout);
      if (s == 0) continue;  // warm-up
      times.push_back(st.seconds);
      compute.push_back(st.compute_s);
      recompute.push_back(st.recompute_s);
      h2d.push_back(st.exposed_h2d_s);
      d2h.push_back(st.exposed_d2h_s);
      optimizer.push_back(st.optimizer_s);
      bubbles.push_back(st.bubbles_s);
      peak = std::max(peak, st.peak_bytes.at("gpu"));
      host_peak = std::max(host_peak, st.peak_bytes.at("host"));
    }
    executor.sync();
    const double tokens = static_cast<double>(batch * seq);
    const double step_s = median(times);
    std::printf(
        "RESULT {\"system\": \"lazytrain streaming\", \"params\": %.0f, \"layers\": %d, "
        "\"optimizer\": \"%s\", \"batch\": %lld, \"seq\": %lld, \"schedule\": \"every_kth 4\", "
        "\"steps\": %lld, "
        "\"median_step_s\": %.4f, \"tokens_per_s\": %.1f, \"tflops\": %.1f, \"peak_gb\": %.2f, "
        "\"host_tensor_peak_gb\": %.2f, \"process_peak_rss_gb\": %.2f, "
        "\"compute_s\": %.4f, \"recompute_s\": %.4f, \"exposed_h2d_s\": %.4f, "
        "\"exposed_d2h_s\": %.4f, \"optimizer_s\": %.4f, \"bubbles_s\": %.4f}\n",
        n_params, blocks, eight_bit ? "adamw8bit" : "adamw", static_cast<long long>(batch),
        static_cast<long long>(seq), static_cast<long long>(steps), step_s, tokens / step_s,
        6.0 * n_params * tokens / step_s / 1e12, peak / 1e9, host_peak / 1e9,
        process_peak_rss_bytes() / 1e9, median(compute), median(recompute), median(h2d),
        median(d2h), median(optimizer), median(bubbles));
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace lt::exec
