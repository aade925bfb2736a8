// Boundaries placed on disk (exec/streaming_disk.h), checked against the
// resident executor: the same losses, gradient norms and final parameters
// bit for bit, with the io_uring backend and with the threaded fallback, and
// with random delays on every engine. Also: a WorkQueue task lets go of what
// it captured before its ticket completes (what keeps the stand-in's device
// peak independent of thread timing).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/random.h"
#include "exec/resident.h"
#include "exec/streaming.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "support/errors.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;

constexpr Placement G = Placement::Gpu, H = Placement::Host, D = Placement::Disk,
                    R = Placement::Recompute;

models::CausalLM llama(int layers) {
  const fs::path dir = fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/llama";
  models::ModelConfig config = models::ModelConfig::from_file(dir / "config.json");
  config.num_hidden_layers = layers;
  Generator gen(23);
  return models::CausalLM::random(config, gen);
}

std::unique_ptr<optim::Optimizer> adamw(const models::CausalLM& model) {
  optim::AdamWOptions o;
  o.lr = 3e-3;
  o.weight_decay = 0.01;
  return std::make_unique<optim::AdamW>(model.parameters(), o, std::vector<std::string>{"norm"});
}

// Two micro-batches of 2 x 9 random tokens per step.
std::vector<std::vector<data::Batch>> batches(int steps, int64_t vocab) {
  Generator gen(9);
  std::vector<std::vector<data::Batch>> out(static_cast<size_t>(steps));
  for (auto& step : out) {
    for (int m = 0; m < 2; ++m) {
      std::vector<int64_t> ids(18);
      for (auto& id : ids) id = static_cast<int64_t>(gen.below(static_cast<uint64_t>(vocab)));
      data::Batch b;
      b.ids = Tensor::from_vector(ids, {2, 9});
      b.targets = models::shift_targets(b.ids);
      b.tokens = 18;
      b.target_count = models::count_targets(b.targets);
      step.push_back(b);
    }
  }
  return out;
}

struct Run {
  std::vector<StepStats> stats;
  std::vector<std::vector<float>> params;
};

Run train(Executor& executor, const models::CausalLM& model,
          const std::vector<std::vector<data::Batch>>& data) {
  Run r;
  for (size_t s = 0; s < data.size(); ++s) {
    StepOptions o;
    o.lr = 3e-3 * (1.0 + 0.1 * static_cast<double>(s));
    o.max_grad_norm = 0.05;  // every step clips
    r.stats.push_back(executor.step(data[s], o));
  }
  executor.sync();
  for (const auto& [name, p] : model.parameters()) r.params.push_back(p.to_vector<float>());
  return r;
}

fs::path scratch_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("lt_disk_test_" + name);
  fs::remove_all(dir);
  return dir;
}

// Resident against streaming with `schedule`; returns streaming's stats.
std::vector<StepStats> expect_bitwise_as_resident(const Schedule& schedule, DiskSpillOptions disk,
                                                  StandInOptions device = {},
                                                  int64_t optimizer_delay_us = 0) {
  const int layers = static_cast<int>(schedule.boundaries.size()) - 1;
  models::CausalLM ref_model = llama(layers), model = llama(layers);
  auto ref_opt = adamw(ref_model), opt = adamw(model);
  const auto data = batches(3, model.config().vocab_size);
  ResidentExecutor resident(ref_model, *ref_opt);
  const Run ref = train(resident, ref_model, data);
  StreamingOptions so;
  so.schedule = schedule;
  so.disk = disk;
  so.max_optimizer_delay_us = optimizer_delay_us;
  Run got;
  {
    StreamingExecutor streaming(model, *opt, std::make_unique<StandInDevice>(device), so);
    got = train(streaming, model, data);
  }
  // The scratch file is gone with the executor.
  EXPECT_TRUE(fs::is_empty(disk.directory)) << disk.directory;
  for (size_t s = 0; s < ref.stats.size(); ++s) {
    EXPECT_EQ(ref.stats[s].loss, got.stats[s].loss) << "step " << s;
    EXPECT_NEAR(ref.stats[s].grad_norm, got.stats[s].grad_norm, 1e-12 * ref.stats[s].grad_norm);
  }
  EXPECT_NE(ref.stats.front().loss, ref.stats.back().loss);
  for (size_t i = 0; i < ref.params.size(); ++i) {
    EXPECT_EQ(ref.params[i].size(), got.params[i].size());
    if (ref.params[i].size() != got.params[i].size()) continue;
    EXPECT_EQ(0, std::memcmp(ref.params[i].data(), got.params[i].data(),
                             ref.params[i].size() * sizeof(float)))
        << model.parameters()[i].first;
  }
  return got.stats;
}

Schedule placements(std::initializer_list<Placement> list) {
  Schedule s;
  s.boundaries = list;
  return s;
}

TEST(StreamingDisk, MixedPlacementsMatchResidentOnBothBackends) {
  for (bool force_threads : {false, true}) {
    SCOPED_TRACE(force_threads ? "threads" : "io_uring if available");
    DiskSpillOptions disk;
    disk.directory = scratch_dir(force_threads ? "threads" : "uring").string();
    disk.file.force_threads = force_threads;
    disk.file.chunk_bytes = 4096;  // several requests per boundary chunk
    disk.file.queue_depth = 3;
    for (const Schedule& s : {placements({D, D, D, D, D}), placements({G, D, R, H, D, R, D}),
                              placements({D, R, R, H, G, D})}) {
      SCOPED_TRACE(to_json(s).dump());
      expect_bitwise_as_resident(s, disk);
    }
  }
}

TEST(StreamingDisk, RandomDelaysOnEveryEngineDoNotChangeResults) {
  for (uint64_t seed : {1, 2}) {
    for (bool force_threads : {false, true}) {
      SCOPED_TRACE(seed);
      DiskSpillOptions disk;
      disk.directory = scratch_dir("delays").string();
      disk.file.force_threads = force_threads;
      disk.max_delay_us = 1500;
      disk.delay_seed = seed;
      StandInOptions device;
      device.max_copy_delay_us = 400;
      device.delay_seed = seed;
      expect_bitwise_as_resident(placements({D, R, D, H, D, G}), disk, device, 1000);
    }
  }
}

TEST(StreamingDisk, StatsCountTheDisk) {
  DiskSpillOptions disk;
  disk.directory = scratch_dir("stats").string();
  disk.max_delay_us = 3000;  // reads late enough that backward waits for them
  for (const StepStats& s : expect_bitwise_as_resident(placements({D, D, D, D}), disk)) {
    EXPECT_GT(s.exposed_disk_s, 0);
    EXPECT_GE(s.bubbles_s, 0);
    // Every split adds up to no more than the step.
    EXPECT_LE(s.compute_s + s.recompute_s + s.exposed_h2d_s + s.exposed_d2h_s + s.exposed_disk_s +
                  s.optimizer_s,
              s.seconds + 1e-9);
  }
}

// The engine alone: odd sizes round-trip exactly (against the bytes
// written), regions are reused from step to step, and force_threads
// selects the fallback.
TEST(StreamingDisk, SpillRoundTripsAndReusesItsRegions) {
  for (bool force_threads : {false, true}) {
    DiskSpillOptions o;
    o.directory = scratch_dir("spill").string();
    o.file.force_threads = force_threads;
    o.file.chunk_bytes = 8192;
    DiskSpill spill(o);
    if (force_threads) {
      EXPECT_EQ(spill.backend(), io::DiskOffloadFile::Backend::Threads);
    }
    std::printf("disk spill backend: %s\n", io::backend_name(spill.backend()));
    Generator gen(5);
    int64_t first_step_bytes = 0;
    for (int step = 0; step < 2; ++step) {
      std::vector<Tensor> written, read;
      for (int64_t n : {1, 1023, 5000}) {
        written.push_back(Tensor::randn({n}, gen));
        read.push_back(Tensor::zeros({n}, DType::F32));
      }
      Ticket w = spill.write(3, written, ready_ticket(), nullptr);
      spill.read(3, read, w, nullptr).get();
      for (size_t c = 0; c < written.size(); ++c) {
        EXPECT_EQ(written[c].to_vector<float>(), read[c].to_vector<float>()) << c;
      }
      // Three regions, each padded to 4 KiB; the second step reuses them.
      if (step == 0) first_step_bytes = spill.file_bytes();
      EXPECT_EQ(spill.file_bytes(), (1 + 1 + 5) * 4096);  // 4, 4092 and 20000 bytes
      EXPECT_EQ(spill.file_bytes(), first_step_bytes);
    }
    EXPECT_TRUE(fs::exists(spill.path()));
  }
}

TEST(StreamingDisk, NoDirectoryIsAClearError) {
  models::CausalLM model = llama(2);
  auto opt = adamw(model);
  StreamingOptions so;
  so.schedule = placements({G, D, G});
  const std::string message = testing::error_of(
      [&] { StreamingExecutor e(model, *opt, std::make_unique<StandInDevice>(), so); });
  EXPECT_NE(message.find("exec.disk_path"), std::string::npos) << message;
}

// A capture whose destructor is slow: with the captures released after the
// ticket, the waiter would see it still alive (deterministically, given the
// sleep), as the stand-in's device memory was under load.
TEST(WorkQueue, ReleasesCapturesBeforeTheTicketCompletes) {
  struct SlowToFree {
    std::atomic<bool>* freed;
    ~SlowToFree() {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      freed->store(true);
    }
  };
  WorkQueue queue("test");
  for (int i = 0; i < 3; ++i) {
    std::atomic<bool> freed{false};
    auto held = std::make_shared<SlowToFree>(SlowToFree{&freed});
    // make_shared copied the temporary, whose destructor already ran.
    freed = false;
    Ticket t = queue.enqueue([held = std::move(held)] {});
    t.wait();
    EXPECT_TRUE(freed.load()) << "attempt " << i;
    // A task that throws releases them too.
    freed = false;
    auto again = std::make_shared<SlowToFree>(SlowToFree{&freed});
    freed = false;
    Ticket bad = queue.enqueue([again = std::move(again)] { throw std::runtime_error("x"); });
    bad.wait();
    EXPECT_TRUE(freed.load());
    EXPECT_THROW(bad.get(), std::runtime_error);
  }
}

}  // namespace
}  // namespace lt::exec
