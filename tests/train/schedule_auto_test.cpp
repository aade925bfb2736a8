// exec.schedule: auto (the planner chooses the streaming schedule), disk
// placements through the trainer, and every StepStats field in
// metrics.jsonl. The reference is the resident executor's run on the same
// data: the same losses and saved weights bit for bit.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <linux/magic.h>
#include <sys/vfs.h>

#include <algorithm>

#include "exec/memory_budget.h"
#include "io/hf_model.h"
#include "support/errors.h"
#include "train/executor_choice.h"
#include "train/report.h"
#include "train/schedule_auto.h"
#include "train/train_helpers.h"

namespace lt::train::testing {
namespace {

struct Outcome {
  std::vector<nlohmann::json> metrics;
  std::vector<std::vector<float>> params;  // of the final checkpoint
};

// Settings every run here shares, before its own overrides.
std::vector<std::string> with_common(std::vector<std::string> overrides) {
  const std::vector<std::string> common = {"train.steps=3", "train.batch_size=4",
                                           "train.grad_accum=2", "train.grad_clip=0.05",
                                           "optim.lr=3e-3"};
  overrides.insert(overrides.begin(), common.begin(), common.end());
  return overrides;
}

Outcome run(const fs::path& data, const fs::path& out, std::vector<std::string> overrides,
            const fs::path& model = fixture("llama")) {
  TrainRunResult result =
      train_quietly(fixture_config(model, data, out, with_common(std::move(overrides))));
  Outcome o;
  o.metrics = read_metrics(out);
  models::CausalLM saved = io::load_hf_model(result.last_checkpoint);
  for (const auto& [name, p] : saved.parameters()) o.params.push_back(p.to_vector<float>());
  return o;
}

void expect_same(const Outcome& ref, const Outcome& got) {
  ASSERT_EQ(ref.metrics.size(), 3u);
  EXPECT_EQ(field(ref.metrics, "loss"), field(got.metrics, "loss"));
  EXPECT_NE(ref.metrics.front().at("loss"), ref.metrics.back().at("loss"));
  EXPECT_EQ(ref.params, got.params);
}

// The llama fixture with 8 blocks (random weights from train.seed), so that
// the plan has interior boundaries to place.
fs::path deeper_llama(const fs::path& dir) {
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(fixture("llama"))) {
    if (entry.path().extension() != ".safetensors")
      fs::copy(entry.path(), dir / entry.path().filename());
  }
  nlohmann::json config = nlohmann::json::parse(read_text(dir / "config.json"));
  config["num_hidden_layers"] = 8;
  write_text(dir / "config.json", config.dump());
  return dir;
}

int count(const exec::Schedule& s, exec::Placement p) {
  return static_cast<int>(std::count(s.boundaries.begin(), s.boundaries.end(), p));
}

// The 8-block model trained with random weights in chunks of two
// sequences (exec.micro_batch equals the trainer's micro-batch, so a
// streaming run's arithmetic is resident's), and resident's outcome.
struct DeeperRun {
  explicit DeeperRun(const std::string& tag)
      : tmp(tag),
        model((write_random_tokens(tmp / "data.jsonl", 16, 97, 3), deeper_llama(tmp / "model"))),
        config(models::ModelConfig::from_file(model / "config.json")),
        ref(run(tmp / "data.jsonl", tmp / "resident", with({"exec.mode=resident"}), model)),
        sized(fixture_config(model, tmp / "data.jsonl", tmp / "sized", with_common(with({})))) {}
  static std::vector<std::string> with(std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"model.init=random", "exec.micro_batch=2"});
    return extra;
  }
  TempDir tmp;
  fs::path model;
  models::ModelConfig config;
  Outcome ref;
  TrainConfig sized;  // the run's settings, for the memory budget's sizes
};

// The stand-in capacity here leaves the planner room for four boundaries
// beyond the fixed memory and the transient ones exec::bytes_needed counts
// (so it must recompute and offload: the 8-block model has 9 boundaries),
// and exec.micro_batch equals the trainer's micro-batch, so the arithmetic
// is resident's and the comparison is bitwise. The executor's measured peak
// must stay within bytes_needed of the plan's schedule, which the planner
// kept within the capacity.
TEST(ScheduleAuto, PlansARunnableScheduleWithResidentsLosses) {
  const DeeperRun d("sched_auto");
  const TempDir& tmp = d.tmp;
  const fs::path& model = d.model;
  const models::ModelConfig& model_config = d.config;
  const auto with = &DeeperRun::with;
  const Outcome& ref = d.ref;
  // The executor cost model is of a GPU: a resident run on the CPU is not predicted.
  EXPECT_FALSE(ref.metrics.front().contains("predicted_step_s"));
  // The capacity, from the memory budget of this run's sizes on the stand-in (f32).
  const TrainConfig& sized = d.sized;
  const exec::TrainSizes sizes{sized.train.batch_size,
                               sized.train.seq_len,
                               exec::OptimizerStates::Fp32,
                               4,
                               {},
                               {},
                               2048,
                               false};
  const int64_t boundary = exec::boundary_bytes(model_config, sizes);
  const int64_t capacity = exec::fixed_bytes(model_config, sizes, 2).bytes(exec::MemorySpace::Gpu) +
                           (exec::kMaxTransientBoundaries + 4) * boundary;
  // A profile whose host activation budget is next to nothing: disk instead.
  write_text(tmp / "hw.yaml",
             "host_activation_gb: 1.0e-7\ndisk_read_gbps: 50\ndisk_write_gbps: 50\n");
  struct Case {
    std::string hardware;
    exec::Placement offload;  // the plan must use it
  };
  for (const Case& c :
       {Case{"", exec::Placement::Host}, Case{(tmp / "hw.yaml").string(), exec::Placement::Disk}}) {
    SCOPED_TRACE(c.hardware);
    const std::vector<std::string> overrides =
        with({"exec.mode=streaming", "exec.schedule=auto", "exec.hardware=" + c.hardware,
              fmt::format("exec.device_memory_gb={:.17g}", capacity / 1e9),
              // The boundaries' planning alone: no stage takes the room,
              // and no fused tail, which needs none offloaded, competes.
              "exec.stages_on_device=none", "exec.fused_tail=off"});
    const TrainConfig config =
        fixture_config(model, tmp / "data.jsonl", tmp / "plan", with_common(overrides));
    const plan::Plan plan =
        plan_for_run(config, model_config, /*stand_in=*/true, FreeMemoryOf::ThisMachine);
    EXPECT_GT(count(plan.schedule, exec::Placement::Recompute), 0);
    EXPECT_GT(count(plan.schedule, c.offload), 0);
    // The solver's read windows for disk boundaries fit the host here, so
    // the plan keeps them (bytes_needed checked that they are valid).
    if (c.offload == exec::Placement::Disk) {
      ASSERT_EQ(plan.schedule.read_windows.size(), plan.schedule.boundaries.size());
      for (size_t b = 0; b < plan.schedule.boundaries.size(); ++b)
        EXPECT_EQ(plan.schedule.read_window(static_cast<int>(b)) >= 0,
                  plan.schedule.boundaries[b] == exec::Placement::Disk)
            << b;
      EXPECT_NE(describe_plan(plan).find(":disk@w"), std::string::npos) << describe_plan(plan);
    }
    const int64_t budgeted = plan.budget.bytes(exec::MemorySpace::Gpu);
    EXPECT_LE(budgeted, capacity);
    const Outcome got = run(tmp / "data.jsonl", tmp / ("auto" + std::to_string(c.hardware.size())),
                            overrides, model);
    expect_same(ref, got);
    for (const auto& line : got.metrics) {
      EXPECT_DOUBLE_EQ(line.at("predicted_step_s").get<double>(), plan.prediction.step_s)
          << line.dump();
      EXPECT_GT(line.at("step_s").get<double>(), 0);
      EXPECT_LE(line.at("peak_bytes").at("device").get<int64_t>(), budgeted);
      EXPECT_EQ(line.at("predicted_gpu_peak_bytes").get<int64_t>(), budgeted);
    }
  }
}

// exec.mode auto with the default schedule (all_gpu) one byte short of
// what all_gpu needs: the planner chooses the schedule instead, and the run
// trains to resident's losses and weights, bit for bit (the same chunks of
// two sequences), within the capacity. A schedule the user names is kept.
TEST(ScheduleAuto, TheDefaultScheduleGivesWayToThePlannerWhenItDoesNotFit) {
  const DeeperRun d("sched_fallback");
  const TempDir& tmp = d.tmp;
  const fs::path& model = d.model;
  const models::ModelConfig& model_config = d.config;
  const auto with = &DeeperRun::with;
  const Outcome& ref = d.ref;
  const TrainConfig& sized = d.sized;
  exec::Schedule all = exec::Schedule::all_gpu(static_cast<int>(model_config.num_hidden_layers));
  all.chunk_sequences = 2;
  const int64_t capacity = exec::bytes_needed(model_config, streaming_sizes(sized, true), all)
                               .bytes(exec::MemorySpace::Gpu) -
                           1;
  const std::string gb = fmt::format("exec.device_memory_gb={:.17g}", capacity / 1e9);
  const Outcome got =
      run(tmp / "data.jsonl", tmp / "fallback", with({"exec.mode=auto", gb}), model);
  expect_same(ref, got);
  for (const auto& line : got.metrics) {
    EXPECT_EQ(line.at("executor"), "streaming");
    EXPECT_GT(line.at("predicted_step_s").get<double>(), 0) << line.dump();
    EXPECT_LE(line.at("peak_bytes").at("device").get<int64_t>(), capacity);
  }
  const std::string kept = lt::testing::error_of([&] {
    train_quietly(fixture_config(
        model, tmp / "data.jsonl", tmp / "kept",
        with_common(with({"exec.mode=auto", "exec.schedule=every_k", "exec.keep_every=1", gb}))));
  });
  EXPECT_NE(kept.find("the streaming schedule exec.schedule (every_k) needs"), std::string::npos)
      << kept;
  EXPECT_NE(kept.find("set exec.schedule: auto to let the planner"), std::string::npos) << kept;
}

// Note [Stages on the device]: a schedule the user names by rule (every_k
// with keep_every 1: every boundary on the device, as all_gpu) leaves room
// here for the embed stage and block 0 whole on the device (exec.mode
// auto: the memory it compares with), and exec.stages_on_device auto keeps
// them there; the run trains to resident's losses and weights, bit for
// bit, within the capacity. `none` keeps none.
TEST(ScheduleAuto, ANamedScheduleKeepsStagesOnTheDeviceInTheRoomItLeaves) {
  const DeeperRun d("sched_room");
  const auto with = &DeeperRun::with;
  exec::Schedule kept = exec::Schedule::all_gpu(static_cast<int>(d.config.num_hidden_layers));
  kept.chunk_sequences = 2;
  kept.stages_on_device = {0, 1};
  const int64_t capacity = exec::bytes_needed(d.config, streaming_sizes(d.sized, true), kept)
                               .bytes(exec::MemorySpace::Gpu);
  const std::string gb = fmt::format("exec.device_memory_gb={:.17g}", capacity / 1e9);
  const std::vector<std::string> every_k = {"exec.mode=auto", "exec.schedule=every_k",
                                            "exec.keep_every=1", gb};
  const auto config_of = [&](const std::string& out, const std::string& choice) {
    std::vector<std::string> overrides = every_k;
    overrides.push_back(choice);
    return fixture_config(d.model, d.tmp / "data.jsonl", d.tmp / out, with_common(with(overrides)));
  };
  const RunPlan room = resolve_run(config_of("room", "exec.stages_on_device=auto"), d.config);
  EXPECT_EQ(room.schedule.stages_on_device, (std::vector<int>{0, 1}));
  EXPECT_EQ(room.predicted_step_s, 0);  // a named schedule: not the planner's
  EXPECT_TRUE(resolve_run(config_of("none", "exec.stages_on_device=none"), d.config)
                  .schedule.stages_on_device.empty());
  std::vector<std::string> overrides = every_k;
  overrides.push_back("exec.stages_on_device=auto");
  const Outcome got = run(d.tmp / "data.jsonl", d.tmp / "room", with(overrides), d.model);
  expect_same(d.ref, got);
  for (const auto& line : got.metrics) {
    EXPECT_EQ(line.at("executor"), "streaming");
    EXPECT_LE(line.at("peak_bytes").at("device").get<int64_t>(), capacity) << line.dump();
    // The CPU's updates of the other stages, from the second step's forward on.
    EXPECT_EQ(line.contains("cpu_update_gparams_per_s"), line.at("step").get<int>() > 0)
        << line.dump();
  }
}

// exec.mode auto with the default schedule (all_gpu) and room to spare:
// the planner plans it (its search holds all_gpu), so the run gets the
// planner's schedule with its prediction, and may fuse a tail or keep
// stages on the device; it trains to resident's losses and weights, bit
// for bit, within the capacity. exec.mode streaming runs all_gpu as it is.
TEST(ScheduleAuto, TheDefaultScheduleIsPlannedUnderModeAuto) {
  const DeeperRun d("sched_default");
  const auto with = &DeeperRun::with;
  const exec::Schedule all = exec::Schedule::all_gpu(static_cast<int>(d.config.num_hidden_layers));
  const int64_t all_gpu_bytes = exec::bytes_needed(d.config, streaming_sizes(d.sized, true), all)
                                    .bytes(exec::MemorySpace::Gpu);
  const int64_t resident = resident_budget(d.sized, d.config, false).bytes(exec::MemorySpace::Gpu);
  const int64_t capacity = (all_gpu_bytes + resident) / 2;  // all_gpu fits, resident does not
  ASSERT_LT(all_gpu_bytes, capacity);
  ASSERT_LT(capacity, resident);
  const std::string gb = fmt::format("exec.device_memory_gb={:.17g}", capacity / 1e9);
  const auto plan_of = [&](const std::string& out, std::vector<std::string> overrides) {
    overrides.push_back(gb);
    return resolve_run(
        fixture_config(d.model, d.tmp / "data.jsonl", d.tmp / out, with_common(with(overrides))),
        d.config);
  };
  const RunPlan by_default = plan_of("default", {"exec.mode=auto"});
  const RunPlan planned = plan_of("planned", {"exec.mode=auto", "exec.schedule=auto"});
  EXPECT_EQ(by_default.executor, exec::ExecutorKind::Streaming);
  EXPECT_GT(by_default.predicted_step_s, 0);
  EXPECT_FALSE(by_default.plan_description.empty());
  EXPECT_EQ(exec::to_json(by_default.schedule), exec::to_json(planned.schedule));
  EXPECT_NE(fmt::format("{}", fmt::join(by_default.reasons, "\n"))
                .find("the default schedule (all_gpu) fits; planning the schedule instead"),
            std::string::npos);
  // Chosen by the planner, the chunk divides a micro-batch (batch 4 in 2
  // of 2 here): planned for that, not cut to it after planning.
  const RunPlan own_chunk = plan_of("own_chunk", {"exec.mode=auto", "exec.micro_batch=0"});
  EXPECT_EQ(own_chunk.chunk_sequences, 2);
  EXPECT_NE(own_chunk.plan_description.find("chunks of 2 sequences"), std::string::npos)
      << own_chunk.plan_description;
  const RunPlan as_named = plan_of("named", {"exec.mode=streaming"});
  EXPECT_EQ(exec::to_json(as_named.schedule), exec::to_json([&] {
              exec::Schedule s = all;
              s.chunk_sequences = 2;
              return s;
            }()));
  EXPECT_EQ(as_named.predicted_step_s, 0);
  const Outcome got =
      run(d.tmp / "data.jsonl", d.tmp / "default", with({"exec.mode=auto", gb}), d.model);
  expect_same(d.ref, got);
  for (const auto& line : got.metrics) {
    EXPECT_EQ(line.at("executor"), "streaming");
    EXPECT_DOUBLE_EQ(line.at("predicted_step_s").get<double>(), by_default.predicted_step_s);
    EXPECT_LE(line.at("peak_bytes").at("device").get<int64_t>(), capacity) << line.dump();
  }
}

TEST(ScheduleAuto, NothingFeasibleStopsBeforeTrainingWithTheShortSpace) {
  TempDir tmp("sched_auto_short");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 3);
  const std::string message = lt::testing::error_of([&] {
    train_quietly(fixture_config(
        fixture("llama"), tmp / "data.jsonl", tmp / "out",
        {"exec.mode=streaming", "exec.schedule=auto", "exec.device_memory_gb=0.000001"}));
  });
  EXPECT_NE(message.find("exec.schedule: auto: the planner found no feasible schedule"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("gpu is short by"), std::string::npos) << message;
  // A run here: the sizes are this machine's, capped at what is free.
  EXPECT_MENTIONS(message, "GB of disk (each no more than is free now)");
  EXPECT_FALSE(fs::exists(tmp / "out" / "metrics.jsonl")) << "training should not have started";
  // A plan for another machine's GPU reads nothing of this one: the sizes
  // are the profile's (it said "no more than is free now" of 128 GB here).
  TrainConfig elsewhere =
      fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "out",
                     {"exec.mode=streaming", "exec.schedule=auto", "train.device=cuda"});
  write_text(tmp / "hw.yaml", "gpu_memory_gb: 0.000001\n");
  elsewhere.exec.hardware = (tmp / "hw.yaml").string();
  const std::string planned = lt::testing::error_of([&] {
    resolve_run(elsewhere, models::ModelConfig::from_file(fixture("llama") / "config.json"),
                PlanTarget::ProfiledGpu);
  });
  EXPECT_MENTIONS(planned, "GB of disk (the profile's, not this machine's)");
}

// The llama fixture trained on tmp's data.jsonl into tmp/out with
// `overrides`; `extra` is added to them. Returns the error it stops with
// ("<no error>" when it trains: lt::testing::error_of).
std::string train_error(const TempDir& tmp, const std::string& out,
                        std::vector<std::string> overrides, const std::string& extra) {
  overrides.push_back(extra);
  return lt::testing::error_of([&] {
    train_quietly(fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / out, overrides));
  });
}

// Every step of the run in tmp/out stayed within `capacity_bytes` on the
// device (the stand-in refuses any allocation past it).
void expect_within(const TempDir& tmp, const std::string& out, int64_t capacity_bytes) {
  const auto metrics = read_metrics(tmp / out);
  ASSERT_FALSE(metrics.empty());
  for (const auto& line : metrics)
    EXPECT_LE(line.at("peak_bytes").at("device").get<int64_t>(), capacity_bytes) << line.dump();
}

// When the run's batch does not fit, the error names a batch that does;
// that batch then trains within the same device capacity.
TEST(ScheduleAuto, ABatchTooLargeNamesOneThatFits) {
  TempDir tmp("sched_auto_hint");
  write_random_tokens(tmp / "data.jsonl", 16, 97, 3);
  const std::vector<std::string> tight = {"exec.mode=streaming", "exec.schedule=auto",
                                          "exec.device_memory_gb=0.0004"};
  const std::string message = train_error(tmp, "big", tight, "train.batch_size=8");
  const std::string key = "; train.batch_size ";
  const size_t at = message.find(key);
  ASSERT_NE(at, std::string::npos) << message;
  const int64_t hinted = std::stoll(message.substr(at + key.size()));
  ASSERT_GE(hinted, 1);
  ASSERT_LT(hinted, 8);
  EXPECT_EQ(train_error(tmp, "fits", tight, "train.batch_size=" + std::to_string(hinted)),
            "<no error>");
  expect_within(tmp, "fits", 400000);
}

// With exec.micro_batch set too large for the device, the error says the
// planner's own chunking fits the batch; that run then trains within the
// same capacity.
TEST(ScheduleAuto, AChunkTooLargeSaysToLetThePlannerChoose) {
  TempDir tmp("sched_auto_chunk");
  write_random_tokens(tmp / "data.jsonl", 16, 97, 3);
  const std::vector<std::string> tight = {"exec.mode=streaming", "exec.schedule=auto",
                                          "exec.device_memory_gb=0.0006", "train.batch_size=8"};
  const std::string message = train_error(tmp, "big", tight, "exec.micro_batch=8");
  EXPECT_NE(message.find("; batch 8 fits in chunks of "), std::string::npos) << message;
  EXPECT_NE(message.find("leave exec.micro_batch unset"), std::string::npos) << message;
  EXPECT_EQ(train_error(tmp, "fits", tight, "exec.micro_batch=0"), "<no error>");
  expect_within(tmp, "fits", 600000);
}

// On a GPU the plan fits what the device has free, less the reserve, when
// that is less than the profile says: by hand, 80 GB free on a 150 GB
// profile leaves 80e9 - 512 MiB = 79463129088 bytes.
TEST(ScheduleAuto, AGpuPlanFitsTheFreeMemoryLessTheReserve) {
  EXPECT_DOUBLE_EQ(usable_gpu_gb(150, 80'000'000'000), 79.463129088);
  EXPECT_DOUBLE_EQ(usable_gpu_gb(10, 80'000'000'000), 10);  // the profile is smaller
  EXPECT_DOUBLE_EQ(usable_gpu_gb(150, 100 << 20), 0);       // less free than the reserve
}

// Host memory and disk are capped at what is free, whichever is less; on
// this machine free_memory_for_run reads them (the disk of out.dir, which
// does not exist yet: the nearest folder above it).
TEST(ScheduleAuto, HostAndDiskAreCappedByWhatIsFree) {
  TrainConfig c;
  const plan::HardwareProfile defaults;
  plan::HardwareProfile hw =
      auto_hardware(c, FreeMemory{.host_bytes = 2'000'000'000, .disk_bytes = 5'000'000'000});
  EXPECT_DOUBLE_EQ(hw.host_memory_gb, 2.0);
  EXPECT_DOUBLE_EQ(hw.disk_gb, 5.0);
  EXPECT_DOUBLE_EQ(hw.gpu_memory_gb, defaults.gpu_memory_gb);
  hw = auto_hardware(c, FreeMemory{.host_bytes = 500'000'000'000, .disk_bytes = 500'000'000'000});
  EXPECT_DOUBLE_EQ(hw.host_memory_gb, defaults.host_memory_gb);  // the profile is smaller
  EXPECT_DOUBLE_EQ(hw.disk_gb, defaults.disk_gb);
  hw = auto_hardware(c);
  EXPECT_DOUBLE_EQ(hw.host_memory_gb, defaults.host_memory_gb);  // unknown: the profile's

  TempDir tmp("sched_free");
  c.out.dir = (tmp / "not" / "yet").string();
  const FreeMemory free = free_memory_for_run(c, FreeMemoryOf::ThisMachine, -1);
  EXPECT_EQ(free.gpu_bytes, -1);
  EXPECT_GT(free.host_bytes, 0);
  // Where the temporary folder is itself a tmpfs, there is no disk (below).
  struct statfs tmp_fs {};
  ASSERT_EQ(::statfs(tmp.path().c_str(), &tmp_fs), 0);
  const bool tmp_in_memory = tmp_fs.f_type == TMPFS_MAGIC;
  const auto space = std::filesystem::space(tmp.path());
  // Other processes write to the same disk meanwhile: within 1 GB.
  EXPECT_NEAR(static_cast<double>(free.disk_bytes),
              tmp_in_memory ? 0.0 : static_cast<double>(space.available), 1e9);
  // On out.dir's file system, room for the checkpoints this run may add is
  // kept: train.keep_last + 1 of 2 GB each (keep_last 2, 10 saves: 6 GB),
  // fewer when the run saves fewer (save_every 0: one, 2 GB), less those
  // already in out.dir (two: 1 more, 2 GB).
  c.train.keep_last = 2;
  c.train.steps = 100;
  c.train.save_every = 10;
  // The share kept, and for how many, are told apart for the messages.
  const auto expect_reserved = [&](int64_t checkpoints, bool by_keep_last) {
    const double reserved = 2e9 * static_cast<double>(checkpoints);
    const FreeMemory room = free_memory_for_run(c, FreeMemoryOf::ThisMachine, -1, 2'000'000'000);
    EXPECT_NEAR(
        static_cast<double>(room.disk_bytes),
        tmp_in_memory ? 0.0 : std::max(0.0, static_cast<double>(space.available) - reserved), 1e9);
    if (tmp_in_memory) return;
    EXPECT_EQ(room.checkpoints_kept_for, checkpoints);
    EXPECT_EQ(room.checkpoints_kept_by_keep_last, by_keep_last);
    EXPECT_EQ(room.disk_kept_for_checkpoints, checkpoints * 2'000'000'000);
    EXPECT_NEAR(static_cast<double>(room.disk_free), static_cast<double>(space.available), 1e9);
  };
  expect_reserved(3, true);
  c.train.save_every = 0;
  expect_reserved(1, false);
  c.train.save_every = 10;
  fs::create_directories(tmp / "not" / "yet" / "step-10");
  fs::create_directories(tmp / "not" / "yet" / "step-20");
  expect_reserved(1, true);
  // exec.disk_path, when set, is where disk boundaries go. /dev/shm is a
  // tmpfs (host memory): no disk at all there, so the plan keeps such
  // boundaries on the host, where they are counted.
  struct statfs shm {};
  if (::statfs("/dev/shm", &shm) == 0 && shm.f_type == TMPFS_MAGIC) {
    c.exec.disk_path = "/dev/shm/lazytrain-not-yet";
    EXPECT_EQ(free_memory_for_run(c, FreeMemoryOf::ThisMachine, -1, 2'000'000'000).disk_bytes, 0);
  }
}

// A checkpoint's bytes against a checkpoint the trainer wrote: the
// safetensors files of its weights and optimizer states, whose headers
// (names, shapes) add a little.
TEST(ScheduleAuto, ACheckpointHoldsTheWeightsAndTheOptimizersStates) {
  TempDir tmp("sched_ckpt");
  write_random_tokens(tmp / "data.jsonl", 8, 97, 3);
  const auto model = models::ModelConfig::from_file(fixture("llama") / "config.json");
  for (const std::string optimizer : {"adamw", "adamw8bit"}) {
    SCOPED_TRACE(optimizer);
    const TrainConfig c = fixture_config(
        fixture("llama"), tmp / "data.jsonl", tmp / optimizer,
        with_common({"train.steps=1", "optim.name=" + optimizer, "optim.min_8bit_numel=1"}));
    const TrainRunResult result = train_quietly(c);
    int64_t on_disk = 0;
    for (const auto& entry : fs::directory_iterator(result.last_checkpoint))
      if (entry.path().extension() == ".safetensors") on_disk += fs::file_size(entry.path());
    // A reservation: at least what was written, and not far more (beyond
    // its constant 64 KiB, which this small model's files are near).
    const int64_t counted = checkpoint_bytes(c, model);
    EXPECT_GE(counted, on_disk);
    EXPECT_LE(counted, on_disk * 6 / 5 + (int64_t{64} << 10))
        << "counted " << counted << ", on disk " << on_disk;
  }
}

TEST(ScheduleAuto, DiskPlacementsThroughTheTrainer) {
  TempDir tmp("sched_disk");
  write_random_tokens(tmp / "data.jsonl", 16, 97, 3);
  write_text(tmp / "disk.json", R"({"boundaries": [{"index": 0, "placement": "disk"},
      {"index": 1, "placement": "recompute"}, {"index": 2, "placement": "disk"}]})");
  const Outcome ref = run(tmp / "data.jsonl", tmp / "resident", {"exec.mode=resident"});
  const fs::path spill = tmp / "spill";
  const Outcome got = run(tmp / "data.jsonl", tmp / "disk",
                          {"exec.mode=streaming", "exec.schedule=" + (tmp / "disk.json").string(),
                           "exec.disk_path=" + spill.string()});
  expect_same(ref, got);
  // The scratch file was made there and removed at the end of the run.
  ASSERT_TRUE(fs::is_directory(spill));
  EXPECT_TRUE(fs::is_empty(spill));
}

// Every StepStats field, by its own distinct value.
TEST(Metrics, StepJsonWritesEveryStepStatsField) {
  exec::StepStats s;
  s.loss = 2.5;
  s.tokens = 1000;
  s.target_count = 990;
  s.grad_norm = 0.75;
  s.seconds = 2.0;
  s.compute_s = 1.1;
  s.recompute_s = 0.2;
  s.exposed_h2d_s = 0.03;
  s.exposed_d2h_s = 0.04;
  s.exposed_disk_s = 0.05;
  s.optimizer_s = 0.06;
  s.bubbles_s = 0.07;
  s.peak_bytes = {{"host", 123}, {"device", 456}, {"disk", 789}};
  const nlohmann::json j = step_json(7, s, 1e-3, 1e6, 1.9);
  EXPECT_EQ(j.at("step"), 7);
  EXPECT_EQ(j.at("loss"), 2.5);
  EXPECT_EQ(j.at("tokens"), 1000);
  EXPECT_EQ(j.at("target_count"), 990);
  EXPECT_EQ(j.at("grad_norm"), 0.75);
  EXPECT_EQ(j.at("step_s"), 2.0);
  EXPECT_EQ(j.at("compute_s"), 1.1);
  EXPECT_EQ(j.at("recompute_s"), 0.2);
  EXPECT_EQ(j.at("exposed_h2d_s"), 0.03);
  EXPECT_EQ(j.at("exposed_d2h_s"), 0.04);
  EXPECT_EQ(j.at("exposed_disk_s"), 0.05);
  EXPECT_EQ(j.at("optimizer_s"), 0.06);
  EXPECT_EQ(j.at("bubbles_s"), 0.07);
  EXPECT_EQ(j.at("predicted_step_s"), 1.9);
  EXPECT_EQ(j.at("tokens_per_s"), 500.0);
  EXPECT_DOUBLE_EQ(j.at("tflops").get<double>(), 6.0 * 1e6 * 500.0 / 1e12);
  EXPECT_EQ(j.at("peak_bytes"), (nlohmann::json{{"host", 123}, {"device", 456}, {"disk", 789}}));
  EXPECT_FALSE(j.contains("skipped"));
  s.skipped = true;
  EXPECT_EQ(step_json(7, s, 1e-3, 1e6).at("skipped"), true);
  EXPECT_FALSE(step_json(7, s, 1e-3, 1e6).contains("predicted_step_s"));
}

// A streaming run's lines hold every field, and the split adds up.
TEST(Metrics, StreamingRunWritesTheWholeSplit) {
  TempDir tmp("metrics_split");
  write_random_tokens(tmp / "data.jsonl", 16, 97, 3);
  write_text(tmp / "mixed.json", R"({"boundaries": [{"index": 0, "placement": "host"},
      {"index": 1, "placement": "recompute"}, {"index": 2, "placement": "disk"}]})");
  const Outcome got = run(tmp / "data.jsonl", tmp / "out",
                          {"exec.mode=streaming", "exec.schedule=" + (tmp / "mixed.json").string(),
                           "exec.device_memory_gb=0.004"});
  for (const auto& l : got.metrics) {
    double parts = 0;
    for (const char* key : {"compute_s", "recompute_s", "exposed_h2d_s", "exposed_d2h_s",
                            "exposed_disk_s", "optimizer_s", "bubbles_s"}) {
      ASSERT_TRUE(l.contains(key)) << key << " missing: " << l.dump();
      EXPECT_GE(l.at(key).get<double>(), 0) << key;
      parts += l.at(key).get<double>();
    }
    // Boundary 1 is recomputed every step.
    EXPECT_GT(l.at("recompute_s").get<double>(), 0);
    EXPECT_GE(l.at("step_s").get<double>() + 1e-9, parts - 1e-9) << l.dump();
    EXPECT_GT(l.at("peak_bytes").at("host").get<int64_t>(), 0);
    EXPECT_GT(l.at("peak_bytes").at("device").get<int64_t>(), 0);
    EXPECT_LE(l.at("peak_bytes").at("device").get<int64_t>(), 4000000);
    EXPECT_GT(l.at("target_count").get<int64_t>(), 0);
  }
}

}  // namespace
}  // namespace lt::train::testing
