// Schedule: the every-k-th policy against a direct count, JSON in and out,
// and clear errors on malformed plans.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "exec/schedule.h"
#include "support/errors.h"

namespace lt::exec {
namespace {

TEST(Schedule, EveryKthKeepsMultiplesOfK) {
  for (int blocks : {0, 1, 5, 12}) {
    for (int k : {1, 2, 3, 4, 7}) {
      Schedule s = Schedule::every_kth_gpu(blocks, k);
      ASSERT_EQ(static_cast<int>(s.boundaries.size()), blocks + 1);
      int kept = 0;
      for (int i = 0; i <= blocks; ++i) {
        const bool keep = i % k == 0;
        kept += keep;
        EXPECT_EQ(s.boundaries[i], keep ? Placement::Gpu : Placement::Recompute)
            << blocks << " blocks, k " << k << ", boundary " << i;
      }
      EXPECT_EQ(s.kept_count(), kept);
    }
  }
  EXPECT_EQ(Schedule::all_gpu(6).kept_count(), 7);
  EXPECT_NE(testing::error_of([] { Schedule::every_kth_gpu(4, 0); }).find("k >= 1"),
            std::string::npos);
}

TEST(Schedule, JsonRoundTripThroughAFile) {
  Schedule s;
  s.batch_size = 64;
  s.chunk_sequences = 8;
  s.boundaries = {Placement::Gpu, Placement::Host, Placement::Disk, Placement::Recompute};
  s.has_prediction = true;
  s.predicted_step_s = 1.5;
  s.predicted_peak_bytes = {{"gpu", 123}, {"host", 456}};
  s.stages_on_device = {0, 2};
  const auto path = std::filesystem::temp_directory_path() /
                    ("lt_schedule_" +
                     std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".json");
  save_schedule(s, path.string());
  // The file is the documented format, read back independently.
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j.at("chunk_sequences"), 8);
  EXPECT_FALSE(j.contains("micro_batch"));
  EXPECT_EQ(j.at("boundaries")[1].at("placement"), "host");
  EXPECT_EQ(j.at("boundaries")[2].at("index"), 2);
  EXPECT_EQ(j.at("stages_on_device"), nlohmann::json::array({0, 2}));
  Schedule back = load_schedule(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(back.batch_size, 64);
  EXPECT_EQ(back.chunk_sequences, 8);
  EXPECT_EQ(back.boundaries, s.boundaries);
  EXPECT_TRUE(back.has_prediction);
  EXPECT_EQ(back.predicted_step_s, 1.5);
  EXPECT_EQ(back.predicted_peak_bytes, s.predicted_peak_bytes);
  EXPECT_EQ(back.stages_on_device, s.stages_on_device);
  EXPECT_EQ(back.on_device(3), (std::vector<bool>{true, false, true, false, false}));
  EXPECT_FALSE(j.contains("fused_tail")) << "left out when false";
  EXPECT_EQ(back.tail_blocks, 0);
  // The fused tail (every boundary on the GPU or recomputed) round-trips.
  s.boundaries = {Placement::Gpu, Placement::Recompute, Placement::Gpu, Placement::Gpu};
  s.tail_blocks = 2;
  save_schedule(s, path.string());
  std::ifstream again(path);
  nlohmann::json written = nlohmann::json::parse(again);
  EXPECT_EQ(written.at("fused_tail"), 2);
  EXPECT_FALSE(written.contains("tail_chunk_sequences")) << "left out when 0";
  EXPECT_EQ(load_schedule(path.string()).tail_blocks, 2);
  s.tail_chunk_sequences = 4;
  save_schedule(s, path.string());
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(path)).at("tail_chunk_sequences"), 4);
  EXPECT_EQ(load_schedule(path.string()).tail_chunk_sequences, 4);
  // A schedule written when the tail was one block or none says true/false.
  written["fused_tail"] = true;
  std::ofstream(path) << written.dump();
  EXPECT_EQ(load_schedule(path.string()).tail_blocks, 1);
  written["fused_tail"] = false;
  std::ofstream(path) << written.dump();
  EXPECT_EQ(load_schedule(path.string()).tail_blocks, 0);
  std::filesystem::remove(path);
}

// A schedule written before the chunk was named apart says "micro_batch";
// it is read as the chunk, and the new key wins when a file has both.
TEST(Schedule, OlderSchedulesGiveTheChunkAsMicroBatch) {
  const auto read = [](const std::string& text) {
    return schedule_from_json(nlohmann::json::parse(text), "old.json");
  };
  const std::string boundaries = R"("boundaries": [{"index": 0, "placement": "gpu"}])";
  EXPECT_EQ(read(R"({"batch_size": 64, "micro_batch": 16, )" + boundaries + "}").chunk_sequences,
            16);
  EXPECT_EQ(
      read(R"({"micro_batch": 16, "chunk_sequences": 8, )" + boundaries + "}").chunk_sequences, 8);
  EXPECT_EQ(read("{" + boundaries + "}").chunk_sequences, 0);
}

TEST(Schedule, MalformedPlansNameTheField) {
  auto error = [](const std::string& text) {
    return testing::error_of([&] { schedule_from_json(nlohmann::json::parse(text), "plan.json"); });
  };
  EXPECT_NE(error(R"({"boundaries": [{"index": 0, "placement": "ssd"}]})")
                .find("plan.json: boundaries[0].placement: unknown placement \"ssd\""),
            std::string::npos);
  EXPECT_NE(error(R"({"boundaries": [{"index": 1, "placement": "gpu"}]})")
                .find("boundaries[0].index must be 0"),
            std::string::npos);
  EXPECT_NE(error(R"({"chunk_sequences": -1, "boundaries": []})").find("\"chunk_sequences\""),
            std::string::npos);
  EXPECT_NE(error(R"({"micro_batch": -1, "boundaries": []})").find("\"micro_batch\""),
            std::string::npos);
  EXPECT_NE(error(R"({"batch_size": 4})").find("\"boundaries\""), std::string::npos);
  Schedule s = Schedule::all_gpu(3);
  // validate's error for `s` as a 3-block schedule ("<no error>": none).
  const auto invalid = [&] { return testing::error_of([&] { validate(s, 3, "plan.json"); }); };
  EXPECT_NE(testing::error_of([&] {
              validate(s, 4, "plan.json");
            }).find("has 4 entries; a model with 4 blocks has 5 boundaries"),
            std::string::npos);
  s.batch_size = 4;
  s.chunk_sequences = 8;
  EXPECT_NE(invalid().find("exceeds batch_size"), std::string::npos);
  s.chunk_sequences = 2;
  EXPECT_NE(error(R"({"boundaries": [], "stages_on_device": 3})")
                .find("plan.json: field \"stages_on_device\" must be a list"),
            std::string::npos);
  EXPECT_NE(error(R"({"boundaries": [], "stages_on_device": [1, "two"]})")
                .find("plan.json: stages_on_device[1] must be a stage index >= 0"),
            std::string::npos);
  s.stages_on_device = {0, 5};  // 3 blocks: stages 0..4
  EXPECT_NE(invalid().find("stages_on_device[1] must be a stage in [0, 4]"), std::string::npos);
  s.stages_on_device = {2, 1};
  EXPECT_NE(invalid().find("ascending"), std::string::npos);
  s.stages_on_device = {1, 2};
  EXPECT_EQ(invalid(), "<no error>");
  EXPECT_NE(error(R"({"boundaries": [], "fused_tail": "yes"})")
                .find("plan.json: field \"fused_tail\" must be a count of blocks >= 0 (or true, "
                      "false), got \"yes\""),
            std::string::npos);
  EXPECT_NE(error(R"({"boundaries": [], "fused_tail": -1})").find("got -1"), std::string::npos);
  s.tail_blocks = 4;
  EXPECT_NE(invalid().find("plan.json: fused_tail must be a count of blocks in [0, 3], got 4"),
            std::string::npos);
  // A tail's own chunks: only with a tail, no larger than the chunks.
  s.tail_blocks = 0;
  s.tail_chunk_sequences = 2;
  EXPECT_NE(invalid().find("plan.json: field \"tail_chunk_sequences\" is for a fused tail; this "
                           "schedule has none"),
            std::string::npos);
  s.tail_blocks = 1;
  s.batch_size = 8;
  s.chunk_sequences = 4;
  s.tail_chunk_sequences = 5;
  EXPECT_NE(
      invalid().find("plan.json: field \"tail_chunk_sequences\" (5) exceeds the chunk the other "
                     "stages run (4)"),
      std::string::npos);
  s.tail_chunk_sequences = 4;
  EXPECT_EQ(invalid(), "<no error>");
  EXPECT_NE(error(R"({"boundaries": [], "tail_chunk_sequences": -2})")
                .find("plan.json: field \"tail_chunk_sequences\" must be an integer >= 0"),
            std::string::npos);
  s.tail_chunk_sequences = 0;
  s.boundaries[1] = Placement::Disk;
  EXPECT_NE(invalid().find("plan.json: fused_tail needs every boundary on the GPU or recomputed; "
                           "boundaries[1] is disk"),
            std::string::npos);
}

}  // namespace
}  // namespace lt::exec
