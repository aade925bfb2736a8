// TensorBoard event files against outside references: CRC-32C test vectors
// (the "check" value of the Castagnoli CRC and RFC 3720, B.4), and record
// and Event bytes made by the `tensorboard` Python package (2.21.0):
// RecordWriter's framing, masked_crc32c, and Event.SerializeToString() of
// tensorboard.compat.proto messages with the same fields.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "io/tensorboard_events.h"
#include "io/tfrecord.h"
#include "io_test_util.h"

namespace lt::io {
namespace {

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

TEST(Crc32c, KnownTestVectors) {
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  // RFC 3720 (iSCSI), appendix B.4.
  std::string zeros(32, '\0'), ones(32, '\xff'), ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c(descending), 0x113FDB5Cu);
}

TEST(Crc32c, MaskedAsTensorboardMasksIt) {
  // tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c
  EXPECT_EQ(masked_crc32c("123456789"), 0xc78ab0e5u);
  EXPECT_EQ(masked_crc32c(""), 0xa282ead8u);
}

// Event(wall_time=1700000000.25, file_version="brain.Event:2"), and its
// record as tensorboard.summary.writer.record_writer.RecordWriter frames it.
const char* kVersionEventHex = "0900001040fc54d9411a0d627261696e2e4576656e743a32";
const char* kVersionRecordHex =
    "1800000000000000a37f4b220900001040fc54d9411a0d627261696e2e4576656e743a32338d2fe9";

TEST(TfRecord, FramesAsTensorboardsRecordWriter) {
  EXPECT_EQ(tfrecord_frame(""), from_hex("000000000000000029039807d8ea82a2"));
  EXPECT_EQ(tfrecord_frame(from_hex(kVersionEventHex)), from_hex(kVersionRecordHex));
}

TEST(TfRecord, ReadsBackEveryRecordAndStopsAtACutLastOne) {
  const std::vector<std::string> data = {"", "a", std::string(300, 'x'),
                                         from_hex(kVersionEventHex)};
  std::string file;
  for (const auto& d : data) file += tfrecord_frame(d);
  EXPECT_EQ(read_tfrecords(file, "events"), data);
  // A writer killed mid-record leaves a prefix of it: the complete records
  // before it are read.
  for (size_t cut = 1; cut < tfrecord_frame(data.back()).size(); ++cut)
    EXPECT_EQ(read_tfrecords(file.substr(0, file.size() - cut), "events").size(), 3u) << cut;
}

TEST(TfRecord, ACorruptByteIsRefusedNamingTheFileAndRecord) {
  std::string file = tfrecord_frame("first") + tfrecord_frame("second");
  std::string bad_data = file;
  bad_data[bad_data.size() - 6] ^= 0x01;  // inside "second"
  EXPECT_THROW(
      {
        try {
          read_tfrecords(bad_data, "run/tb/events");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("run/tb/events: record 1"), std::string::npos)
              << e.what();
          EXPECT_NE(std::string(e.what()).find("data's CRC"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  std::string bad_length = file;
  bad_length[0] ^= 0x01;
  EXPECT_THROW(read_tfrecords(bad_length, "events"), Error);
}

TEST(TensorBoardEvents, EncodeAsProtobufDoes) {
  EXPECT_EQ(file_version_event(1700000000.25), from_hex(kVersionEventHex));
  // Summary with train/loss = 2.5 and train/lr = 0 (a oneof member: a zero
  // is still written), at step 300.
  EXPECT_EQ(scalars_event(1700000001.5, 300, {{"train/loss", 2.5f}, {"train/lr", 0.0f}}),
            from_hex("0900006040fc54d94110ac022a240a110a0a747261696e2f6c6f737315000020400a0f0a08"
                     "747261696e2f6c721500000000"));
  // SessionLog(status=START) at step -1: a negative step is a ten-byte varint.
  EXPECT_EQ(session_start_event(1700000002.0, -1),
            from_hex("0900008040fc54d94110ffffffffffffffffff013a020801"));
}

TEST(TensorBoardEvents, WriterMakesANewNamedFileEachTime) {
  testing::TempDir tmp;
  const auto dir = tmp.path() / "tb";
  TensorBoardEventWriter first(dir);
  first.add_scalars(0, {{"train/loss", 1.0f}});
  TensorBoardEventWriter second(dir);  // within the same second: a suffix
  EXPECT_NE(first.path(), second.path());
  EXPECT_EQ(first.path().parent_path(), dir);
  EXPECT_EQ(first.path().filename().string().rfind("events.out.tfevents.", 0), 0u);
  const auto bytes = testing::read_bytes(first.path());
  const auto records = read_tfrecords(std::string(bytes.begin(), bytes.end()), "first");
  ASSERT_EQ(records.size(), 2u);  // flushed as written, before the writer closes
  EXPECT_NE(records[0].find("brain.Event:2"), std::string::npos);
  EXPECT_NE(records[1].find("train/loss"), std::string::npos);
}

}  // namespace
}  // namespace lt::io
