// Corrupt and hostile safetensors files: each is refused with an lt::Error
// naming the file, and the tensor and field where there is one; none
// crashes or reads out of bounds (run under the Sanitize build to check the
// latter). Files are built byte by byte here, independently of our writer.
#include <gtest/gtest.h>

#include <random>

#include "io/safetensors.h"
#include "io_test_util.h"

namespace lt::io {
namespace {

using testing::TempDir;

std::vector<uint8_t> le64_bytes(uint64_t v) {
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  return out;
}

// [declared length][header][data_bytes zero bytes]; the declared length is
// the header's own unless given.
std::vector<uint8_t> make_file(const std::string& header, size_t data_bytes,
                               std::optional<uint64_t> declared = std::nullopt) {
  std::vector<uint8_t> out = le64_bytes(declared.value_or(header.size()));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

class SafetensorsCorrupt : public ::testing::Test {
 protected:
  // Writes `bytes`, opens them, and requires an lt::Error whose message
  // holds the file path and every one of `parts`.
  ::testing::AssertionResult refused(const std::vector<uint8_t>& bytes,
                                     const std::vector<std::string>& parts) {
    const auto path = dir_ / ("bad" + std::to_string(count_++) + ".safetensors");
    testing::write_bytes(path, bytes);
    try {
      SafetensorsFile file(path);
      return ::testing::AssertionFailure() << "file was accepted";
    } catch (const Error& e) {
      std::string msg = e.what();
      if (msg.find(path.string()) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks the file name: " << msg;
      }
      for (const auto& part : parts) {
        if (msg.find(part) == std::string::npos) {
          return ::testing::AssertionFailure() << "message lacks \"" << part << "\": " << msg;
        }
      }
      return ::testing::AssertionSuccess() << msg;
    }
  }

  TempDir dir_;
  int count_ = 0;
};

TEST_F(SafetensorsCorrupt, TooShortForTheLengthField) {
  EXPECT_TRUE(refused({}, {"too short"}));
  EXPECT_TRUE(refused({1, 2, 3, 4, 5}, {"too short"}));
}

TEST_F(SafetensorsCorrupt, HeaderLengthBeyondFileSize) {
  const std::string h = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_TRUE(refused(make_file(h, 4, 1000), {"header length 1000"}));
  EXPECT_TRUE(refused(make_file(h, 4, ~uint64_t{0}), {"header length"}));
  // Truncated inside the header: the declared length runs past the end.
  auto full = make_file(h, 4);
  full.resize(8 + h.size() / 2);
  EXPECT_TRUE(refused(full, {"header length"}));
}

TEST_F(SafetensorsCorrupt, HeaderLengthCutsTheJson) {
  const std::string h = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_TRUE(refused(make_file(h, 4, h.size() - 3), {"not valid JSON"}));
}

TEST_F(SafetensorsCorrupt, EmptyOrNonObjectHeader) {
  EXPECT_TRUE(refused(make_file("", 0), {"JSON object"}));
  EXPECT_TRUE(refused(make_file("[1, 2]  ", 0), {"JSON object"}));
  EXPECT_TRUE(refused(make_file("  {}", 0), {"JSON object"}));
}

TEST_F(SafetensorsCorrupt, BadJson) {
  EXPECT_TRUE(refused(make_file(R"({"w": {"dtype": "F32",)", 0), {"not valid JSON"}));
  EXPECT_TRUE(refused(make_file(R"({"w": 1} trailing)", 0), {"not valid JSON"}));
  EXPECT_TRUE(refused(make_file(std::string("{\"w\": \"\xff\xfe\"}"), 0), {"not valid JSON"}));
  EXPECT_TRUE(refused(make_file(std::string("{}\0\0\0\0\0\0", 8), 0), {"not valid JSON"}));
}

TEST_F(SafetensorsCorrupt, NonObjectEntries) {
  EXPECT_TRUE(refused(make_file(R"({"w": 5})", 0), {"tensor 'w'", "expected an object"}));
  EXPECT_TRUE(refused(make_file(R"({"w": [0, 4]})", 0), {"tensor 'w'", "expected an object"}));
  EXPECT_TRUE(refused(make_file(R"({"w": "F32"})", 0), {"tensor 'w'"}));
}

TEST_F(SafetensorsCorrupt, MissingFields) {
  EXPECT_TRUE(refused(make_file(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4),
                      {"tensor 'w'", "field 'dtype'", "missing"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4),
                      {"tensor 'w'", "field 'shape'", "missing"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[1]}})", 4),
                      {"tensor 'w'", "field 'data_offsets'", "missing"}));
}

TEST_F(SafetensorsCorrupt, BadDtype) {
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F17","shape":[1],"data_offsets":[0,4]}})", 4),
                      {"tensor 'w'", "field 'dtype'", "F17"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", 4),
                      {"tensor 'w'", "field 'dtype'"}));
}

TEST_F(SafetensorsCorrupt, BadShape) {
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                      {"tensor 'w'", "field 'shape'", "negative"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,4]}})", 4),
                      {"tensor 'w'", "field 'shape'"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", 4),
                      {"tensor 'w'", "field 'shape'"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":4,"data_offsets":[0,4]}})", 4),
                      {"tensor 'w'", "field 'shape'"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":["4"],"data_offsets":[0,4]}})", 4),
                      {"tensor 'w'", "field 'shape'"}));
  EXPECT_TRUE(refused(
      make_file(R"({"w":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})", 4),
      {"tensor 'w'", "field 'shape'"}));
  // Nested arrays are deeper than any header nests.
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", 4),
                      {"deeper"}));
}

TEST_F(SafetensorsCorrupt, ElementCountOverflow) {
  // 2^31 * 2^31 * 2^31 elements overflows 64 bits; must not wrap to a small count.
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[2147483648,2147483648,2147483648],)"
                                R"("data_offsets":[0,0]}})",
                                0),
                      {"tensor 'w'", "field 'shape'"}));
  // 2^62 elements of 4 bytes: the byte count overflows.
  EXPECT_TRUE(refused(
      make_file(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0),
      {"tensor 'w'", "field 'shape'"}));
}

TEST_F(SafetensorsCorrupt, BadOffsets) {
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
                      {"tensor 'w'", "field 'data_offsets'"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", 8),
                      {"tensor 'w'", "field 'data_offsets'"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4),
                      {"tensor 'w'", "field 'data_offsets'"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", 8),
                      {"tensor 'w'", "field 'data_offsets'", "begin 8 > end 4"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":"0-4"}})", 4),
                      {"tensor 'w'", "field 'data_offsets'"}));
}

TEST_F(SafetensorsCorrupt, OffsetsBeyondTheData) {
  // Two floats whose file holds one: 4 bytes cut off the end, which the
  // message says in so many words.
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
                      {"tensor 'w'", "field 'data_offsets'", "beyond the data region of 4",
                       "the file is truncated (at least 4 bytes missing"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[1],)"
                                R"("data_offsets":[18446744073709551612,18446744073709551615]}})",
                                4),
                      {"tensor 'w'", "field 'data_offsets'"}));
}

TEST_F(SafetensorsCorrupt, ByteCountMismatch) {
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
                      {"tensor 'w'", "field 'data_offsets'", "holds 8 bytes", "needs 12"}));
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,4]}})", 4),
                      {"tensor 'w'", "needs 8"}));
  // Four-bit floats: 3 of them do not fill whole bytes.
  EXPECT_TRUE(refused(make_file(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2),
                      {"tensor 'w'", "whole bytes"}));
}

TEST_F(SafetensorsCorrupt, OverlappingTensors) {
  const std::string h = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  EXPECT_TRUE(refused(make_file(h, 12), {"tensor 'b'", "overlaps tensor 'a'"}));
  // The same range twice is an overlap too.
  const std::string same = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_TRUE(refused(make_file(same, 8), {"overlaps"}));
  // One tensor inside another.
  const std::string inside = R"({"big":{"dtype":"U8","shape":[16],"data_offsets":[0,16]},)"
                             R"("small":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})";
  EXPECT_TRUE(refused(make_file(inside, 16), {"tensor 'small'", "overlaps tensor 'big'"}));
}

TEST_F(SafetensorsCorrupt, DuplicateKeys) {
  const std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_TRUE(refused(make_file(h, 8), {"repeats the key 'a'"}));
  EXPECT_TRUE(refused(
      make_file(R"({"a":{"dtype":"F32","dtype":"I32","shape":[1],"data_offsets":[0,4]}})", 4),
      {"'dtype' inside 'a'"}));
}

TEST_F(SafetensorsCorrupt, BadMetadata) {
  EXPECT_TRUE(refused(make_file(R"({"__metadata__":{"format":1}})", 0),
                      {"field '__metadata__'", "'format'"}));
  EXPECT_TRUE(refused(make_file(R"({"__metadata__":["pt"]})", 0), {"field '__metadata__'"}));
}

TEST_F(SafetensorsCorrupt, UnsupportedDtypeIsRefusedOnlyWhenAskedFor) {
  const std::string h = R"({"ok":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("q":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[4,8]}})";
  const auto path = dir_ / "fp8.safetensors";
  testing::write_bytes(path, make_file(h, 8));
  SafetensorsFile file(path);
  EXPECT_NO_THROW(file.tensor("ok"));
  try {
    file.tensor("q");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("tensor 'q'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("F8_E4M3 is not supported"), std::string::npos) << msg;
  }
  EXPECT_THROW(file.tensor("absent"), Error);
}

TEST_F(SafetensorsCorrupt, HolesAndTrailingBytesAreWarnedNotRefused) {
  const std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  auto bytes = make_file(h, 16);
  auto header = parse_safetensors_header(bytes.data(), bytes.size(), "holes");
  ASSERT_EQ(header.warnings.size(), 2u);
  EXPECT_NE(header.warnings[0].find("4 unused bytes before tensor 'b'"), std::string::npos);
  EXPECT_NE(header.warnings[1].find("4 unused bytes after the last tensor"), std::string::npos);
}

TEST_F(SafetensorsCorrupt, NotARegularFile) {
  EXPECT_THROW(SafetensorsFile(dir_.path()), Error);
  EXPECT_THROW(SafetensorsFile(dir_ / "missing.safetensors"), Error);
}

// Random byte damage to a valid file: every outcome is a parsed header or an
// lt::Error, never a crash or another exception type. (The libFuzzer target
// in fuzz/ explores far more; this keeps a cheap version in CI.)
TEST_F(SafetensorsCorrupt, RandomDamageNeverCrashes) {
  const std::string h =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
      R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}}  )";
  const auto good = make_file(h, 22);
  std::mt19937 rng(12345);
  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    auto bytes = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      switch (rng() % 3) {
        case 0:
          bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
          break;
        case 1:
          bytes.resize(rng() % (bytes.size() + 1));
          break;
        default:
          bytes.insert(bytes.begin() + static_cast<long>(rng() % (bytes.size() + 1)),
                       static_cast<uint8_t>(rng()));
      }
      if (bytes.empty()) break;
    }
    try {
      parse_safetensors_header(bytes.data(), bytes.size(), "damaged");
      ++accepted;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(accepted, 0);  // some edits (in the data region) are harmless
}

}  // namespace
}  // namespace lt::io
