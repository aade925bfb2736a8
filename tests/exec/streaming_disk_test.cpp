// Boundaries placed on disk (exec/streaming_disk.h), checked against the
// resident executor: the same losses, gradient norms and final parameters
// bit for bit, with the io_uring backend and with the threaded fallback, and
// with random delays on every engine. Also: a WorkQueue task lets go of what
// it captured before its ticket completes (what keeps the stand-in's device
// peak independent of thread timing).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "core/random.h"
#include "exec/memory_budget.h"
#include "exec/resident.h"
#include "exec/streaming.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "support/errors.h"
#include "support/random_batch.h"

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
    for (int m = 0; m < 2; ++m) step.push_back(lt::testing::random_token_batch(gen, 2, 9, vocab));
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

// Per process: ctest runs these tests in parallel processes, and one
// clearing a shared folder deleted another's spill file under it.
fs::path scratch_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("lt_disk_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

// Resident against streaming with `schedule`; returns streaming's stats.
std::vector<StepStats> expect_bitwise_as_resident(const Schedule& schedule, DiskSpillOptions disk,
                                                  StandInOptions device = {},
                                                  int64_t optimizer_delay_us = 0,
                                                  const std::string& trace_path = "") {
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
  so.trace_path = trace_path;
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

// Read windows (Schedule::read_windows) on L = 5, G D D R H G. Stage uses:
// forward 0..5 (uses 0-5), head (6), backward 5 (7), recompute 3 (8),
// backward 4 (9), 3 (10), 2 (11), 1 (12), 0 (13); windows 5..0 start at
// uses 6, 7, 8, 10, 11, 12. Boundary 1 may be read back in windows [2, 5],
// boundary 2 in [4, 5] (boundary 3 is recomputed from it), boundary 4 in
// [5, 5].
Schedule windowed(std::vector<int> windows) {
  Schedule s = placements({G, D, D, R, H, G});
  s.read_windows = std::move(windows);
  return s;
}

// (use, boundary) of each disk read and each upload plan_prefetches issues.
using Issued = std::vector<std::pair<size_t, int>>;
Issued issued(const std::vector<Prefetch>& p, bool reads) {
  Issued out;
  for (size_t u = 0; u < p.size(); ++u)
    for (int b : reads ? p[u].disk_reads : p[u].uploads) out.emplace_back(u, b);
  return out;
}

TEST(ReadWindows, PrefetchesByHand) {
  const std::vector<StageUse> uses = plan_stage_uses(windowed({}), 5);
  ASSERT_EQ(uses.size(), 14u);
  EXPECT_EQ(window_starts(uses, 5),
            (std::vector<int>{-1, -1, -1, -1, -1, -1, 5, 4, 3, -1, 2, 1, 0, -1}));
  // The default: a disk read two uses ahead of the first use (boundary 2:
  // recompute 3 at use 8; boundary 1: backward 2 at use 11), an upload one
  // ahead (boundary 4: backward 5 at use 7).
  const Issued uploads = {{6, 4}, {7, 2}, {10, 1}};
  const auto by_default = plan_prefetches(windowed({}), uses, 5);
  EXPECT_EQ(issued(by_default, true), (Issued{{6, 2}, {9, 1}}));
  EXPECT_EQ(issued(by_default, false), uploads);
  // Both disk reads at the head (window 5), the host boundary too (its only window).
  const auto at_head = plan_prefetches(windowed({-1, 5, 5, -1, 5, -1}), uses, 5);
  EXPECT_EQ(issued(at_head, true), (Issued{{6, 1}, {6, 2}}));
  EXPECT_EQ(issued(at_head, false), uploads);
  // Each in its last window: boundary 2 in window 4, boundary 1 in window 2.
  const auto last = plan_prefetches(windowed({-1, 2, 4, -1, -1, -1}), uses, 5);
  EXPECT_EQ(issued(last, true), (Issued{{7, 2}, {10, 1}}));
  EXPECT_EQ(issued(last, false), uploads);
}

TEST(ReadWindows, JsonRoundTripAndChecks) {
  const Schedule s = windowed({-1, 3, 4, -1, 5, -1});
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j.at("boundaries")[1].at("read_window"), 3);
  EXPECT_EQ(j.at("boundaries")[4].at("read_window"), 5);
  EXPECT_FALSE(j.at("boundaries")[0].contains("read_window"));
  EXPECT_EQ(schedule_from_json(j, "s.json").read_windows, s.read_windows);
  EXPECT_TRUE(schedule_from_json(to_json(windowed({})), "s.json").read_windows.empty());
  const auto error = [](std::vector<int> windows) {
    return testing::error_of([&] { validate(windowed(std::move(windows)), 5, "s.json"); });
  };
  EXPECT_NE(error({-1, 1, -1, -1, -1, -1}).find("boundaries[1].read_window must be in [2, 5]"),
            std::string::npos);
  EXPECT_NE(error({-1, -1, 3, -1, -1, -1}).find("boundaries[2].read_window must be in [4, 5]"),
            std::string::npos);
  EXPECT_NE(error({5, -1, -1, -1, -1, -1}).find("only a host or disk boundary"), std::string::npos);
  EXPECT_NE(error({-1, -1}).find("read windows are given for 2 of 6 boundaries"),
            std::string::npos);
}

// Split reads (Schedule::read_splits) of the disk boundaries 1 and 2 of
// windowed()'s schedule.
Schedule split(std::vector<std::vector<Schedule::ReadPiece>> pieces) {
  Schedule s = windowed({});
  s.read_splits.assign(6, {});
  s.read_splits[1] = std::move(pieces[0]);
  s.read_splits[2] = std::move(pieces[1]);
  return s;
}

// (use, boundary, piece) of each later piece plan_prefetches issues.
using IssuedPieces = std::vector<std::tuple<size_t, int, int>>;
IssuedPieces issued_pieces(const std::vector<Prefetch>& p) {
  IssuedPieces out;
  for (size_t u = 0; u < p.size(); ++u)
    for (const Prefetch::Piece& piece : p[u].disk_read_pieces)
      out.emplace_back(u, piece.boundary, piece.piece);
  return out;
}

TEST(ReadSplits, PrefetchesByHand) {
  const std::vector<StageUse> uses = plan_stage_uses(windowed({}), 5);
  // Windows 5..0 start at uses 6, 7, 8, 10, 11, 12 (above). Boundary 1 in
  // windows 5, 3, 2; boundary 2 in windows 5, 4. The first pieces start the
  // reads (and the host buffers) at the head.
  const Schedule s = split({{{5, 0.5}, {3, 0.25}, {2, 0.25}}, {{5, 0.5}, {4, 0.5}}});
  EXPECT_EQ(s.read_window(1), 5);
  EXPECT_EQ(s.read_window(2), 5);
  const auto p = plan_prefetches(s, uses, 5);
  EXPECT_EQ(issued(p, true), (Issued{{6, 1}, {6, 2}}));
  EXPECT_EQ(issued_pieces(p), (IssuedPieces{{7, 2, 1}, {8, 1, 1}, {10, 1, 2}}));
  // Uploads keep their default (one use ahead), after every piece.
  EXPECT_EQ(issued(p, false), (Issued{{6, 4}, {7, 2}, {10, 1}}));
  // Transit buffers count from the first piece: as with the reads whole in window 5.
  EXPECT_EQ(disk_transit_buffers(s, 5), disk_transit_buffers(windowed({-1, 5, 5, -1, -1, -1}), 5));
}

TEST(ReadSplits, JsonRoundTripAndChecks) {
  const Schedule s = split({{{5, 0.5}, {3, 0.25}, {2, 0.25}}, {{4, 1.0}}});
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j.at("boundaries")[1].at("read_split").dump(),
            R"([{"fraction":0.5,"window":5},{"fraction":0.25,"window":3},)"
            R"({"fraction":0.25,"window":2}])");
  EXPECT_FALSE(j.at("boundaries")[0].contains("read_split"));
  const Schedule back = schedule_from_json(j, "s.json");
  EXPECT_EQ(back.read_splits, s.read_splits);
  EXPECT_EQ(back.read_window(1), 5);
  EXPECT_NO_THROW(validate(back, 5, "s.json"));
  EXPECT_TRUE(schedule_from_json(to_json(windowed({})), "s.json").read_splits.empty());

  const auto error = [](std::vector<std::vector<Schedule::ReadPiece>> pieces) {
    return testing::error_of([&] { validate(split(std::move(pieces)), 5, "s.json"); });
  };
  const auto has = [](const std::string& message, const std::string& part) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  has(error({{{5, 0.5}, {3, 0.25}}, {}}),
      "s.json: boundaries[1].read_split: the fractions must sum to 1, got 0.75");
  has(error({{{3, 0.5}, {5, 0.5}}, {}}),
      "s.json: boundaries[1].read_split[1].window must be below the previous piece's (3)");
  has(error({{{5, 0.5}, {1, 0.5}}, {}}),
      "s.json: boundaries[1].read_split[1].window must be in [2, 5]");
  has(error({{}, {{5, 0.5}, {3, 0.5}}}),
      "s.json: boundaries[2].read_split[1].window must be in [4, 5]");
  has(error({{{5, 1.5}, {3, -0.5}}, {}}),
      "s.json: boundaries[1].read_split[0].fraction must be in (0, 1], got 1.5");
  Schedule on_host = split({{}, {}});
  on_host.read_splits[4] = {{5, 1.0}};
  has(testing::error_of([&] { validate(on_host, 5, "s.json"); }),
      "s.json: boundaries[4].read_split: only a disk boundary below 5 is read in pieces, this "
      "one is host");
  Schedule disagrees = split({{{5, 0.5}, {3, 0.5}}, {}});
  disagrees.read_windows = {-1, 4, -1, -1, -1, -1};
  has(testing::error_of([&] { validate(disagrees, 5, "s.json"); }),
      "boundaries[1].read_split: the first piece's window (5) must be the boundary's "
      "read_window (4)");
  Schedule short_list = windowed({});
  short_list.read_splits.resize(2);
  has(testing::error_of([&] { validate(short_list, 5, "s.json"); }),
      "read splits are given for 2 of 6 boundaries");

  const auto parse_error = [](const std::string& split_json) {
    nlohmann::json j = to_json(windowed({}));
    j["boundaries"][1]["read_split"] = nlohmann::json::parse(split_json);
    return testing::error_of([&] { schedule_from_json(j, "p.json"); });
  };
  has(parse_error("[]"), "p.json: boundaries[1].read_split must be a non-empty list");
  has(parse_error(R"([{"window": 5}])"),
      R"(p.json: boundaries[1].read_split[0] must be {"window": integer >= 0, "fraction": number})");
  has(parse_error(R"([{"window": -2, "fraction": 1}])"), "read_split[0] must be");
}

// The engine alone, with 8 KiB requests (several per region).
DiskSpillOptions small_requests(bool force_threads) {
  DiskSpillOptions o;
  o.directory = scratch_dir("spill").string();
  o.file.force_threads = force_threads;
  o.file.chunk_bytes = 8192;
  return o;
}

// split_read by hand: chunks laid end to end, padded to 4 KiB blocks; the
// cuts fall on blocks.
TEST(ReadSplits, BytesByHand) {
  // 10000 bytes (3 blocks) and 100 (1): cuts at 1 and 3 of 4 blocks.
  EXPECT_EQ(
      split_read({10000, 100}, {0.25, 0.5, 0.25}),
      (std::vector<std::vector<ByteRange>>{{{0, 4096}, {}}, {{4096, 10000}, {}}, {{}, {0, 100}}}));
  // Two blocks, half and half: one chunk each.
  EXPECT_EQ(split_read({3456, 3456}, {0.5, 0.5}),
            (std::vector<std::vector<ByteRange>>{{{0, 3456}, {}}, {{}, {0, 3456}}}));
  // A piece below one block rounds to nothing; the last takes the rest.
  EXPECT_EQ(split_read({3456, 3456}, {0.1, 0.9}),
            (std::vector<std::vector<ByteRange>>{{{}, {}}, {{0, 3456}, {0, 3456}}}));
}

// The engine reads a boundary in pieces, each into its bytes of the same
// host buffers, and they round-trip what was written, on both backends.
TEST(ReadSplits, SpillReadsPiecesExactly) {
  for (bool force_threads : {false, true}) {
    DiskSpillOptions o = small_requests(force_threads);
    o.max_delay_us = 300;
    DiskSpill spill(o);
    Generator gen(11);
    std::vector<Tensor> written, read;
    std::vector<int64_t> bytes;
    for (int64_t n : {1, 1023, 5000, 3000}) {
      written.push_back(Tensor::randn({n}, gen));
      read.push_back(Tensor::zeros({n}, DType::F32));
      bytes.push_back(n * 4);
    }
    Ticket last = spill.write(2, written, ready_ticket(), nullptr);
    const auto pieces = split_read(bytes, {0.2, 0.3, 0.1, 0.4});
    for (size_t k = 0; k < pieces.size(); ++k)
      last = spill.read_piece(2, static_cast<int>(k), read, pieces[k], last, nullptr);
    last.get();
    for (size_t c = 0; c < written.size(); ++c)
      EXPECT_EQ(written[c].to_vector<float>(), read[c].to_vector<float>()) << c;
  }
}

// The trace's order on the compute thread: each read back it issued, and
// the compute span that followed it (the use it was issued before).
std::vector<std::pair<std::string, std::string>> issued_before(const fs::path& trace) {
  std::ifstream in(trace);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::map<int, std::string> tracks;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "M") tracks[e.at("tid").get<int>()] = e.at("args").at("name");
  std::vector<std::pair<std::string, std::string>> out;
  std::vector<std::string> pending;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const std::string& track = tracks.at(e.at("tid").get<int>());
    if (track == "prefetch") pending.push_back(e.at("name"));
    if (track != "compute") continue;
    for (auto& p : pending) out.emplace_back(std::move(p), e.at("name"));
    pending.clear();
  }
  return out;
}

// The executor issues each read back before the use plan_prefetches names
// (the start of its read window), gives resident's results bit for bit,
// and stays within bytes_needed (the stand-in's capacity here: it would
// throw past it).
TEST(ReadWindows, ExecutorReadsInTheAssignedWindowsWithResidentsLosses) {
  const models::CausalLM model = llama(5);
  std::vector<Schedule> schedules;
  for (const std::vector<int>& windows : std::vector<std::vector<int>>{
           {}, {-1, 5, 5, -1, 5, -1}, {-1, 2, 4, -1, -1, -1}, {-1, 3, 5, -1, -1, -1}})
    schedules.push_back(windowed(windows));
  // Split reads: each boundary's two 3456-byte chunks pad to two 4 KiB
  // blocks, so a half/half split reads one chunk per piece; a third piece
  // of a quarter rounds to nothing and is still issued in its window.
  schedules.push_back(split({{{5, 0.5}, {3, 0.25}, {2, 0.25}}, {{5, 0.5}, {4, 0.5}}}));
  schedules.push_back(split({{{4, 0.5}, {2, 0.5}}, {{5, 0.75}, {4, 0.25}}}));
  for (const Schedule& s : schedules) {
    SCOPED_TRACE(to_json(s).dump());
    DiskSpillOptions disk;
    disk.directory = scratch_dir("windows").string();
    disk.max_delay_us = 500;
    StandInOptions device;
    // Two micro-batches of 2 x 9 tokens, in f32.
    device.capacity_bytes =
        bytes_needed(model.config(), {4, 9, OptimizerStates::Fp32, 4, {}, {}, 2048, false}, s)
            .bytes(MemorySpace::Gpu);
    const fs::path trace = fs::temp_directory_path() / "lt_disk_test_windows_trace.json";
    for (const StepStats& stats : expect_bitwise_as_resident(s, disk, device, 0, trace.string()))
      EXPECT_LE(stats.peak_bytes.at("device"), device.capacity_bytes);
    const std::vector<StageUse> uses = plan_stage_uses(s, 5);
    const std::vector<Prefetch> prefetches = plan_prefetches(s, uses, 5);
    std::vector<std::pair<std::string, std::string>> expected;
    for (int step = 0; step < 3; ++step) {  // every traced step
      for (size_t u = 0; u < uses.size(); ++u) {
        const std::string use = std::string(stage_work_name(uses[u].work)) + " " +
                                model.stages()[uses[u].stage]->name();
        for (int b : prefetches[u].disk_reads)
          expected.emplace_back(
              "read boundary " + std::to_string(b) + (s.read_split(b).empty() ? "" : " piece 0"),
              use);
        for (const Prefetch::Piece& p : prefetches[u].disk_read_pieces)
          expected.emplace_back(
              "read boundary " + std::to_string(p.boundary) + " piece " + std::to_string(p.piece),
              use);
        for (int b : prefetches[u].uploads)
          expected.emplace_back("upload boundary " + std::to_string(b), use);
      }
    }
    EXPECT_EQ(issued_before(trace), expected);
    fs::remove(trace);
  }
}

// The engine alone: odd sizes round-trip exactly (against the bytes
// written), regions are reused from step to step, and force_threads
// selects the fallback.
TEST(StreamingDisk, SpillRoundTripsAndReusesItsRegions) {
  for (bool force_threads : {false, true}) {
    const DiskSpillOptions o = small_requests(force_threads);
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
