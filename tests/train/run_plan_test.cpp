// The run plan (train/run_plan.h): one typed resolution of a config on this
// machine, which `train` runs and `plan --config` prints. Checked against
// hand arithmetic: the micro-batch and chunk each settled once, the
// optimizer's block size reaching the byte count, and the plan `plan
// --config` prints being the one `train` ran.
#include <gtest/gtest.h>

#include "exec/memory_budget.h"
#include "support/cli_run.h"
#include "train/run_plan.h"
#include "train/train_helpers.h"

namespace lt::train::testing {
namespace {

class RunPlanTest : public ::testing::Test {
 protected:
  RunPlanTest() : tmp_("run_plan") { write_random_tokens(tmp_ / "data.jsonl", 8, 97, 2); }
  TrainConfig config(std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), {"train.batch_size=8", "train.grad_accum=2"});
    return fixture_config(fixture("llama"), tmp_ / "data.jsonl", tmp_ / "out", overrides);
  }
  models::ModelConfig model() const {
    return models::ModelConfig::from_file(fixture("llama") / "config.json");
  }
  TempDir tmp_;
};

// The grad-accumulation micro-batch is batch / grad_accum; the streaming
// chunk is exec.micro_batch, never more than a micro-batch, and 0 (unset)
// settles to a whole micro-batch: a number, not a "0 means".
TEST_F(RunPlanTest, TheMicroBatchAndTheChunkAreSettledOnceAndNamedApart) {
  const RunPlan resident = resolve_run(config({}), model());
  EXPECT_EQ(resident.executor, exec::ExecutorKind::Resident);
  EXPECT_EQ(resident.grad_accum, 2);
  EXPECT_EQ(resident.accum_sequences, 4);
  EXPECT_TRUE(resident.device.is_cpu());
  EXPECT_EQ(resident.compute_dtype, DType::F32);

  const RunPlan whole = resolve_run(config({"exec.mode=streaming"}), model());
  EXPECT_EQ(whole.executor, exec::ExecutorKind::Streaming);
  EXPECT_EQ(whole.chunk_sequences, 4);
  EXPECT_EQ(whole.schedule.chunk_sequences, 4);
  EXPECT_FALSE(whole.sizes.on_gpu);
  EXPECT_EQ(whole.sizes.compute_bytes, 4);

  EXPECT_EQ(
      resolve_run(config({"exec.mode=streaming", "exec.micro_batch=3"}), model()).chunk_sequences,
      3);
  EXPECT_EQ(
      resolve_run(config({"exec.mode=streaming", "exec.micro_batch=6"}), model()).chunk_sequences,
      4);
}

// exec.micro_batch past a micro-batch runs as the whole micro-batch, and
// `train` says so once among its plan lines, naming the key and both
// numbers, as `plan --micro-batch` does past --batch-size: 6 asked of a
// micro-batch of 8 / 2 = 4 sequences runs chunks of 4 (resolve_run's chunk,
// the one the executor takes); 8 asked of a batch of 2 without
// accumulation, chunks of 2. A chunk that fits, or a run that does not
// chunk (resident), says nothing.
TEST_F(RunPlanTest, AMicroBatchPastTheMicroBatchIsTheWholeOneAndTrainSaysSo) {
  const auto times_said = [&](const std::vector<std::string>& overrides, const std::string& line) {
    const TrainConfig c = config(overrides);
    const fs::path yaml = tmp_ / "clamp.yaml";
    write_text(yaml, c.to_yaml());
    std::string output;
    EXPECT_EQ(run_program({"train", yaml.string(), "--no-sample", "--set", "train.steps=1", "--set",
                           "out.overwrite=true"},
                          tmp_ / "train.log", &output),
              0)
        << output;
    size_t n = 0;
    for (size_t at = output.find(line); at != std::string::npos; at = output.find(line, at + 1))
      ++n;
    return std::make_pair(n, output);
  };
  const std::string accumulated =
      "exec.micro_batch 6 is more than the 4 sequences of a micro-batch (train.batch_size 8 / "
      "train.grad_accum 2): chunks of 4, the whole micro-batch\n";
  EXPECT_EQ(
      resolve_run(config({"exec.mode=streaming", "exec.micro_batch=6"}), model()).chunk_sequences,
      4);
  auto [n, output] = times_said({"exec.mode=streaming", "exec.micro_batch=6"}, accumulated);
  EXPECT_EQ(n, 1u) << output;

  const std::vector<std::string> one_batch = {"exec.mode=streaming", "exec.micro_batch=8",
                                              "train.batch_size=2", "train.grad_accum=1"};
  EXPECT_EQ(resolve_run(config(one_batch), model()).chunk_sequences, 2);
  std::tie(n, output) = times_said(
      one_batch,
      "exec.micro_batch 8 is more than the 2 sequences of train.batch_size: chunks of 2, the "
      "whole batch\n");
  EXPECT_EQ(n, 1u) << output;

  for (const auto& quiet : {std::vector<std::string>{"exec.mode=streaming", "exec.micro_batch=4"},
                            std::vector<std::string>{"exec.mode=resident", "exec.micro_batch=6"}}) {
    std::tie(n, output) = times_said(quiet, "is more than the");
    EXPECT_EQ(n, 0u) << quiet[1] << ": " << output;
  }
}

// exec.micro_batch goes down the layers once settled: the planner plans the
// chunk the run will use (a whole micro-batch of 4: 6 is more than one),
// not the value the config gave, and nothing overrides its schedule after.
TEST_F(RunPlanTest, ThePlannerPlansTheSettledChunk) {
  const RunPlan p = resolve_run(
      config({"exec.mode=streaming", "exec.schedule=auto", "exec.micro_batch=6"}), model());
  EXPECT_EQ(p.chunk_sequences, 4);
  EXPECT_EQ(p.schedule.chunk_sequences, 4);
  EXPECT_NE(p.plan_description.find("chunks of 4 sequences"), std::string::npos)
      << p.plan_description;
  EXPECT_EQ(p.budget.bytes(exec::MemorySpace::Gpu),
            exec::bytes_needed(model(), p.sizes, p.schedule).bytes(exec::MemorySpace::Gpu));
}

// optim.block_size reaches the byte count (it was fixed at 2048 there):
// adamw8bit's states are a byte each for m and v plus an f32 scale per
// block, for every parameter, on the resident device.
TEST_F(RunPlanTest, TheOptimizersBlockSizeReachesTheBudget) {
  const int64_t n = model().num_parameters();
  for (const int64_t block : {64, 2048}) {
    SCOPED_TRACE(block);
    const RunPlan p = resolve_run(
        config({"optim.name=adamw8bit", "optim.block_size=" + std::to_string(block)}), model());
    int64_t states = -1;
    for (const auto& item : p.budget.items)
      if (item.what.find("AdamW m and v") != std::string::npos) states = item.bytes;
    const int64_t blocks = (n + block - 1) / block;
    EXPECT_EQ(states, 2 * n + 2 * blocks * 4);
    EXPECT_EQ(p.optimizer_block, block);
  }
}

// plan reads no data, so it plans a config (a recipe) whose data files
// are not there yet, as before renting the GPU; train still refuses them.
TEST_F(RunPlanTest, PlanWithAConfigNeedsNoDataFiles) {
  TrainConfig c = config({"exec.mode=streaming", "train.steps=1"});
  c.data.path = (tmp_ / "not_yet.jsonl").string();
  c.data.eval_path = (tmp_ / "not_yet_eval.jsonl").string();
  const fs::path yaml = tmp_ / "run.yaml";
  write_text(yaml, c.to_yaml());
  std::string output;
  EXPECT_EQ(run_program({"plan", yaml.string(), "--json"}, tmp_ / "plan.log", &output), 0)
      << output;
  // It says what it did not check, and which files are not there yet.
  EXPECT_NE(output.find("plan: not checked here, as train checks them when it starts"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("; not there now: data.path (no file '" + c.data.path +
                        "'), data.eval_path (no file '" + c.data.eval_path + "')"),
            std::string::npos)
      << output;
  EXPECT_EQ(run_program({"train", yaml.string()}, tmp_ / "train.log", &output), 1) << output;
  EXPECT_NE(output.find("config key 'data.path': no file '" + c.data.path + "'"), std::string::npos)
      << output;
}

// train.seq_len left at its default (512) runs at a shorter model's
// context in train; plan refused the same config for it.
TEST_F(RunPlanTest, PlanFitsTheDefaultSeqLenAsTrainDoes) {
  const fs::path yaml = tmp_ / "demo.yaml";
  write_text(yaml,
             "model:\n  path: \"@assets/demo/addition/model\"\n"
             "data:\n  path: \"@assets/demo/addition/train.jsonl\"\n"
             "  tokenizer: \"@assets/demo/addition/tokenizer\"\n"
             "train:\n  batch_size: 16\n");
  std::string output;
  ASSERT_EQ(run_program({"plan", yaml.string()}, tmp_ / "plan.log", &output), 0) << output;
  EXPECT_NE(output.find("config: train.seq_len 512 (the default) is past the model's context of "
                        "128 tokens (max_position_embeddings): it runs at 128"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("batch 16 x seq 128"), std::string::npos) << output;
}

// `lazytrain plan --config` prints the plan `lazytrain train` then runs:
// the same executor and chunk.
TEST_F(RunPlanTest, PlanWithAConfigPrintsWhatTrainRuns) {
  const TrainConfig c = config({"exec.mode=streaming", "exec.micro_batch=2", "train.steps=1"});
  const fs::path yaml = tmp_ / "run.yaml";
  write_text(yaml, c.to_yaml());
  std::string output;
  ASSERT_EQ(run_program({"plan", "--config", yaml.string(), "--json"}, tmp_ / "plan.log", &output),
            0)
      << output;
  const auto j = nlohmann::json::parse(output.substr(output.find('{')));
  EXPECT_EQ(j.at("executor"), "streaming");
  EXPECT_EQ(j.at("chunk_sequences"), 2);
  EXPECT_EQ(j.at("accum_sequences"), 4);
  // The keys `plan --model --json` has, under its names (README): a CPU
  // run has no predicted step, said as null, not left out.
  EXPECT_EQ(j.at("feasible"), true);
  EXPECT_EQ(j.at("micro_batch"), 2);
  EXPECT_TRUE(j.at("predicted_step_s").is_null()) << j.dump();
  EXPECT_TRUE(j.at("predicted_tokens_per_s").is_null()) << j.dump();
  // As train, plan takes the config positionally too.
  std::string positional;
  ASSERT_EQ(run_program({"plan", yaml.string(), "--json"}, tmp_ / "plan2.log", &positional), 0)
      << positional;
  const auto k = nlohmann::json::parse(positional.substr(positional.find('{')));
  for (const char* key : {"executor", "chunk_sequences", "accum_sequences"})
    EXPECT_EQ(k.at(key), j.at(key)) << key;
  ASSERT_EQ(run_program({"train", yaml.string(), "--no-sample"}, tmp_ / "train.log", &output), 0)
      << output;
  EXPECT_EQ(read_metrics(tmp_ / "out").at(0).at("executor"), j.at("executor"));
  EXPECT_NE(output.find("executor: streaming (exec.mode streaming is set)"), std::string::npos)
      << output;
  // A plan that cannot run answers {"feasible": false, "error": ...} on
  // stdout with status 3, as `plan --model --json` does (it printed no
  // JSON and exited 1); without --json it stays an error.
  const fs::path stderr_file = tmp_ / "plan3.err";
  const lt::testing::CliResult r = lt::testing::run_lazytrain(
      "plan " + yaml.string() +
          " --set exec.mode=offload --set exec.device_memory_gb=0.00001 --json",
      stderr_file);
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  const auto no = nlohmann::json::parse(r.out);
  EXPECT_EQ(no.at("feasible"), false);
  EXPECT_MENTIONS(no.at("error").get<std::string>(), "exec.mode offload keeps the whole model");
  EXPECT_EQ(
      lt::testing::run_lazytrain("plan " + yaml.string() +
                                 " --set exec.mode=offload --set exec.device_memory_gb=0.00001")
          .status,
      1);
  // A mistake rather than a shortage stays an error, status 1, with --json.
  const lt::testing::CliResult mistake = lt::testing::run_lazytrain(
      "plan " + yaml.string() + " --set exec.mode=resident --set exec.state_placement=disk --json",
      stderr_file);
  EXPECT_EQ(mistake.status, 1) << mistake.out << mistake.err;
  EXPECT_EQ(mistake.out, "");
}

// `plan --config` takes a --model plan's flags as the run's keys (Note
// [Plan flags with --config]); it used to plan the config's batch 8 x seq
// 32 whatever they said. --batch-size 4 --seq-len 16 --micro-batch 1
// --optimizer adamw8bit plan a micro-batch of 4 / 2 = 2 sequences in chunks
// of 1, the plan train resolves with those keys --set, and --out writes
// that chunk's schedule.
TEST_F(RunPlanTest, PlanFlagsWithAConfigSetTheirKeys) {
  const fs::path yaml = tmp_ / "run.yaml";
  write_text(yaml, config({"exec.mode=streaming"}).to_yaml());
  const fs::path schedule = tmp_ / "schedule.json";
  std::string output;
  ASSERT_EQ(run_program({"plan", "--config", yaml.string(), "--json", "--batch-size", "4",
                         "--seq-len", "16", "--micro-batch", "1", "--optimizer", "adamw8bit",
                         "--out", schedule.string()},
                        tmp_ / "plan.log", &output),
            0)
      << output;
  const auto j = nlohmann::json::parse(output.substr(output.find('{')));
  EXPECT_EQ(j.at("batch_size"), 4);
  EXPECT_EQ(j.at("seq_len"), 16);
  EXPECT_EQ(j.at("accum_sequences"), 2);
  EXPECT_EQ(j.at("chunk_sequences"), 1);
  EXPECT_EQ(j.at("optimizer"), "adamw8bit");
  const RunPlan set =
      resolve_run(config({"exec.mode=streaming", "train.batch_size=4", "train.seq_len=16",
                          "exec.micro_batch=1", "optim.name=adamw8bit"}),
                  model());
  EXPECT_EQ(j.at("peak_bytes").at("device"), set.budget.bytes(exec::MemorySpace::Gpu));
  EXPECT_EQ(j.at("peak_bytes").at("host"), set.budget.bytes(exec::MemorySpace::Host));
  EXPECT_EQ(exec::load_schedule(schedule.string()).chunk_sequences, 1);
}

// A flag and a --set of its key, or a flag without a key, are refused
// naming the flag, as is --out for an executor without a schedule.
TEST_F(RunPlanTest, PlanFlagsWithAConfigThatCannotApplyAreRefused) {
  const fs::path yaml = tmp_ / "run.yaml";
  write_text(yaml, config({}).to_yaml());
  const auto refusal = [&](std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"plan", "--config", yaml.string()});
    std::string output;
    EXPECT_EQ(run_program(flags, tmp_ / "plan.log", &output), 1) << output;
    return output;
  };
  EXPECT_MENTIONS(refusal({"--seq-len", "16", "--set", "train.seq_len=8"}),
                  "--seq-len and --set train.seq_len=8 both set train.seq_len: give one");
  EXPECT_MENTIONS(refusal({"--max-recompute", "3"}),
                  "--max-recompute is for a plan of --model: a train config has no key for it");
  EXPECT_MENTIONS(refusal({"--gpus", "2"}), "--gpus is for a plan of --model");
  EXPECT_MENTIONS(refusal({"--seq-len", "0"}), "--seq-len must be a number of tokens");
  EXPECT_MENTIONS(refusal({"--out", (tmp_ / "s.json").string()}),
                  "--out writes the streaming executor's schedule; this run's executor is "
                  "resident, which has none");
  EXPECT_FALSE(fs::exists(tmp_ / "s.json"));
}

// On the CPU the device's bytes are the CPU's (host memory under the
// device's budget): `plan --config` labels them "device", as the trainer's
// plan line and metrics.jsonl's peak_bytes do, never "gpu". For each
// executor that puts bytes there.
TEST_F(RunPlanTest, PlanOnTheCpuLabelsTheDevicesBytesDevice) {
  for (const char* mode : {"resident", "streaming"}) {
    SCOPED_TRACE(mode);
    const TrainConfig c = config({std::string("exec.mode=") + mode, "train.device=cpu"});
    const fs::path yaml = tmp_ / "run.yaml";
    write_text(yaml, c.to_yaml());
    std::string text;
    ASSERT_EQ(run_program({"plan", yaml.string()}, tmp_ / "plan.log", &text), 0) << text;
    EXPECT_NE(text.find("\nbytes: device (host memory) "), std::string::npos) << text;
    EXPECT_NE(text.find("\n  device "), std::string::npos) << text;
    EXPECT_EQ(text.find("bytes: gpu"), std::string::npos) << text;
    EXPECT_EQ(text.find("\n  gpu "), std::string::npos) << text;
    std::string json;
    ASSERT_EQ(run_program({"plan", yaml.string(), "--json"}, tmp_ / "plan.log", &json), 0) << json;
    const auto peaks = nlohmann::json::parse(json.substr(json.find('{'))).at("peak_bytes");
    EXPECT_GT(peaks.at("device").get<int64_t>(), 0) << peaks;
    EXPECT_FALSE(peaks.contains("gpu")) << peaks;
  }
}

// Note [The plan in host memory], against hand arithmetic. On a GPU the
// host holds the plan's host space and the step's token ids and targets:
// 2 x 1000 sequences x 100 tokens x 8 bytes = 1.6 MB, of which grad_accum
// saves nothing (every micro-batch of a step is made at once).
TEST_F(RunPlanTest, AGpuPlansHostMemoryCountsTheStepsTokenIds) {
  TrainConfig c = config({"train.batch_size=1000", "train.grad_accum=4", "train.seq_len=100"});
  RunPlan p;
  p.device = Device::cuda(0);
  p.executor = exec::ExecutorKind::Resident;
  p.accum_sequences = 250;
  p.budget.add(exec::MemorySpace::Gpu, "on the GPU, not the host", int64_t{1} << 40);
  EXPECT_EQ(host_memory_shortfall(c, model(), p, 1'600'000), "");
  EXPECT_EQ(host_memory_shortfall(c, model(), p, -1), "");  // unknown: no limit
  std::string m = host_memory_shortfall(c, model(), p, 1'599'999);
  EXPECT_NE(m.find("train.batch_size 1000 sequences of train.seq_len 100 tokens: the run's plan "
                   "(executor resident on cuda:0) needs 1.60 MB of host memory (its host part, 0 "
                   "bytes, and the step's token ids and targets, 1.60 MB, which the batcher makes "
                   "on the host), more than the 1.60 MB free now. Lower train.batch_size or "
                   "train.seq_len"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("grad_accum"), std::string::npos) << m;
  // The plan's host space (pinned buffers and the like) counts beside them.
  p.budget.add(exec::MemorySpace::Host, "pinned", 400'000);
  EXPECT_NE(host_memory_shortfall(c, model(), p, 1'999'999), "");
  EXPECT_EQ(host_memory_shortfall(c, model(), p, 2'000'000), "");
  // Within the heap's share (10% on a GPU) of the free memory: warned of.
  EXPECT_EQ(host_memory_warning(c, model(), p, 2'200'000), "");
  m = host_memory_warning(c, model(), p, 2'199'999);
  EXPECT_NE(m.find("the run's plan (executor resident on cuda:0) counts 2.00 MB of host memory "
                   "in tensors, and 2.20 MB is free now; processes held 10% more than their "
                   "tensors, and beyond, in the C library's heap (Note"),
            std::string::npos)
      << m;
  EXPECT_EQ(host_memory_warning(c, model(), p, 1'999'999), "");  // refused instead
  // A CPU-master executor on the CPU stand-in fitted its host space itself.
  p.device = Device::cpu();
  p.executor = exec::ExecutorKind::Streaming;
  EXPECT_EQ(host_memory_shortfall(c, model(), p, 0), "");
}

// Note [The plan in host memory]: on the CPU a resident plan's count is
// refused past the free memory, and warned of once the heap's share of it
// would pass: half of it when a micro-batch's [tokens x hidden] tensors are
// under CpuAllocator::kOwnMappingFrom (the heap serves them), a tenth when
// they are that large. Here 4 sequences of hidden 48 in f32 are small,
// 2^20 are large.
TEST_F(RunPlanTest, ACpuPlanWithinTheHeapsShareOfTheFreeMemoryIsWarnedOf) {
  const TrainConfig c = config({});
  RunPlan p;
  p.device = Device::cpu();
  p.executor = exec::ExecutorKind::Resident;
  p.compute_dtype = DType::F32;
  p.accum_sequences = 4;
  p.budget.add(exec::MemorySpace::Gpu, "the graph", 1'000'000);
  EXPECT_EQ(host_heap_share(c, model(), p), 0.5);
  EXPECT_EQ(host_memory_warning(c, model(), p, 1'500'000), "");
  std::string m = host_memory_warning(c, model(), p, 1'499'999);
  EXPECT_NE(
      m.find("counts 1.00 MB of host memory in tensors, and 1.50 MB is free now; "
             "processes held 50% more than their tensors, and beyond, in the C library's heap "
             "when, as here, a micro-batch's [tokens x hidden] tensors were under 32 MiB"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find("If it does: Lower train.batch_size or train.seq_len, or raise "
                   "train.grad_accum (2 now)"),
            std::string::npos)
      << m;
  EXPECT_EQ(host_memory_shortfall(c, model(), p, 1'000'000), "");
  EXPECT_NE(host_memory_shortfall(c, model(), p, 999'999), "");
  EXPECT_EQ(host_memory_warning(c, model(), p, 999'999), "");  // refused instead
  p.accum_sequences = int64_t{1} << 20;
  EXPECT_EQ(host_heap_share(c, model(), p), 0.1);
  EXPECT_EQ(host_memory_warning(c, model(), p, 1'100'000), "");
  EXPECT_NE(host_memory_warning(c, model(), p, 1'099'999), "");
}

}  // namespace
}  // namespace lt::train::testing
