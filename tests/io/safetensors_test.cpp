// safetensors write -> read: identical bytes for every dtype, the byte layout
// the format prescribes (checked field by field against the specification,
// not against our own reader), zero-copy views that outlive the file object,
// and atomic replacement.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "io/atomic_file.h"
#include "io_test_util.h"

namespace lt::io {
namespace {

using testing::read_bytes;
using testing::TempDir;

// A tensor of random bit patterns: NaN payloads, subnormals and all, so that
// any conversion on the way would show.
Tensor random_bits(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  std::mt19937_64 rng(seed);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(rng());
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == cb.nbytes() &&
         (ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0);
}

uint64_t le64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[at + static_cast<size_t>(i)];
  return v;
}

const DType kAllDTypes[] = {DType::F32, DType::F64, DType::BF16, DType::F16,
                            DType::I64, DType::I32, DType::I8,   DType::U8};

TEST(Safetensors, RoundTripEveryDtypeIsByteIdentical) {
  TempDir dir;
  NamedTensors tensors;
  uint64_t seed = 1;
  for (DType dt : kAllDTypes) {
    tensors.emplace_back(std::string("t_") + dtype_name(dt), random_bits({3, 5}, dt, seed++));
    tensors.emplace_back(std::string("v_") + dtype_name(dt), random_bits({7}, dt, seed++));
  }
  tensors.emplace_back("scalar", random_bits({}, DType::F32, seed++));
  tensors.emplace_back("empty", Tensor::empty({0, 4}, DType::BF16));
  const auto path = dir / "all.safetensors";
  write_safetensors(path, tensors, {{"format", "pt"}, {"note", "round trip"}});

  SafetensorsFile file(path);
  EXPECT_EQ(file.metadata().at("format"), "pt");
  EXPECT_EQ(file.metadata().at("note"), "round trip");
  EXPECT_TRUE(file.header().warnings.empty());
  ASSERT_EQ(file.names().size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    Tensor back = file.tensor(name);
    EXPECT_TRUE(same_bytes(back, t)) << name;
    EXPECT_EQ(back.name(), name);
  }
}

TEST(Safetensors, LayoutFollowsTheSpecification) {
  TempDir dir;
  NamedTensors tensors = {{"b", random_bits({2, 3}, DType::F32, 1)},
                          {"a", random_bits({5}, DType::I8, 2)},
                          {"c", random_bits({1}, DType::I64, 3)}};
  const auto path = dir / "layout.safetensors";
  write_safetensors(path, tensors, {{"format", "pt"}});
  const std::vector<uint8_t> bytes = read_bytes(path);
  const uint64_t n = le64(bytes, 0);
  ASSERT_LE(8 + n, bytes.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "data region must start 8-aligned";
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  EXPECT_EQ(header.front(), '{');
  // Compact JSON, metadata first, tensors in the given order, packed.
  const std::string expected_json = R"({"__metadata__":{"format":"pt"},)"
                                    R"("b":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                                    R"("a":{"dtype":"I8","shape":[5],"data_offsets":[24,29]},)"
                                    R"("c":{"dtype":"I64","shape":[1],"data_offsets":[29,37]}})";
  EXPECT_EQ(header.substr(0, expected_json.size()), expected_json);
  for (size_t i = expected_json.size(); i < header.size(); ++i) {
    EXPECT_EQ(header[i], ' ') << "padding must be spaces";
  }
  EXPECT_LT(header.size() - expected_json.size(), 8u);
  EXPECT_EQ(bytes.size(), 8 + n + 37);
  // Data bytes in order, exactly the tensors' bytes.
  const uint8_t* data = bytes.data() + 8 + n;
  EXPECT_EQ(std::memcmp(data, tensors[0].second.data_ptr(), 24), 0);
  EXPECT_EQ(std::memcmp(data + 24, tensors[1].second.data_ptr(), 5), 0);
  EXPECT_EQ(std::memcmp(data + 29, tensors[2].second.data_ptr(), 8), 0);
}

TEST(Safetensors, NoMetadataMeansNoMetadataKey) {
  TempDir dir;
  write_safetensors(dir / "x.safetensors", {{"w", random_bits({2}, DType::F32, 1)}});
  auto bytes = read_bytes(dir / "x.safetensors");
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(le64(bytes, 0)));
  EXPECT_EQ(header.find("__metadata__"), std::string::npos);
  EXPECT_TRUE(SafetensorsFile(dir / "x.safetensors").metadata().empty());
}

TEST(Safetensors, WritesNonContiguousViewsInLogicalOrder) {
  TempDir dir;
  Tensor m = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = m.transpose(0, 1);  // [[1,4],[2,5],[3,6]]
  write_safetensors(dir / "t.safetensors", {{"t", t}});
  Tensor back = SafetensorsFile(dir / "t.safetensors").tensor("t");
  EXPECT_EQ(back.shape(), (Shape{3, 2}));
  EXPECT_EQ(back.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(Safetensors, TensorsOutliveTheFileObjectAndTheFile) {
  TempDir dir;
  Tensor src = random_bits({64}, DType::F32, 7);
  const auto path = dir / "keep.safetensors";
  write_safetensors(path, {{"w", src}});
  Tensor view;
  {
    SafetensorsFile file(path);
    view = file.tensor("w");
  }
  std::filesystem::remove(path);  // the mapping keeps the inode alive
  EXPECT_TRUE(same_bytes(view, src));
}

TEST(Safetensors, WritingIntoALoadedTensorLeavesTheFileAlone) {
  TempDir dir;
  const auto path = dir / "cow.safetensors";
  write_safetensors(path, {{"w", Tensor::from_vector<float>({1, 2, 3}, {3})}});
  const auto before = read_bytes(path);
  {
    Tensor w = SafetensorsFile(path).tensor("w");
    w.fill_(9.0);
    EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{9, 9, 9}));
  }
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(SafetensorsFile(path).tensor("w").to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(Safetensors, MisalignedTensorsAreCopiedNotMisread) {
  TempDir dir;
  // 3 bytes of u8 first put the f32 and f64 at offsets 3 and 11 of the data
  // region: legal in the format, but not addressable as float*.
  Tensor u = Tensor::from_vector<uint8_t>({1, 2, 3}, {3});
  Tensor f = Tensor::from_vector<float>({1.5f, -2.25f}, {2});
  Tensor d = Tensor::from_vector<double>({3.125}, {1});
  write_safetensors(dir / "m.safetensors", {{"u", u}, {"f", f}, {"d", d}});
  SafetensorsFile file(dir / "m.safetensors");
  EXPECT_EQ(file.entry("f").begin, 3u);
  EXPECT_EQ(file.tensor("f").to_vector<float>(), (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(file.tensor("d").to_vector<double>(), (std::vector<double>{3.125}));
  Tensor fv = file.tensor("f");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(fv.data_ptr()) % alignof(float), 0u);
}

TEST(Safetensors, RefusesBadTensorLists) {
  TempDir dir;
  Tensor t = Tensor::zeros({2});
  EXPECT_THROW(write_safetensors(dir / "a.safetensors", {{"x", t}, {"x", t}}), Error);
  EXPECT_THROW(write_safetensors(dir / "a.safetensors", {{"__metadata__", t}}), Error);
  EXPECT_THROW(write_safetensors(dir / "a.safetensors", {{"x", Tensor()}}), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "a.safetensors"));
  try {
    write_safetensors(dir / "no" / "such" / "folder.safetensors", {{"x", t}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("folder.safetensors"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, FailedWriteKeepsTheOldFileAndLeavesNoTemporaries) {
  TempDir dir;
  const auto path = dir / "model.safetensors";
  write_safetensors(path, {{"w", Tensor::from_vector<float>({1, 2}, {2})}});
  const auto before = read_bytes(path);
  // A tensor list that fails halfway through the header.
  EXPECT_THROW(write_safetensors(path, {{"w", Tensor::zeros({4})}, {"w", Tensor::zeros({4})}}),
               Error);
  {
    // A writer abandoned mid-file, as when an exception unwinds a save.
    AtomicFileWriter out(path);
    out.write(std::string("partial"));
  }
  EXPECT_EQ(read_bytes(path), before);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(e.path().filename(), "model.safetensors");
  }
  EXPECT_EQ(files, 1u);
}

TEST(Safetensors, OverwriteReplacesAtomically) {
  TempDir dir;
  const auto path = dir / "m.safetensors";
  write_safetensors(path, {{"w", Tensor::from_vector<float>({1, 2}, {2})}});
  Tensor old_view = SafetensorsFile(path).tensor("w");
  write_safetensors(path, {{"w", Tensor::from_vector<float>({7, 8, 9}, {3})}});
  // The old mapping still sees the old inode; a new open sees the new file.
  EXPECT_EQ(old_view.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(SafetensorsFile(path).tensor("w").to_vector<float>(), (std::vector<float>{7, 8, 9}));
}

TEST(Safetensors, DtypeNamesMatchTheFormat) {
  EXPECT_STREQ(safetensors_dtype_name(DType::BF16), "BF16");
  EXPECT_EQ(dtype_from_safetensors("BOOL"), DType::U8);
  EXPECT_EQ(dtype_from_safetensors("F64"), DType::F64);
  EXPECT_EQ(dtype_from_safetensors("U16"), std::nullopt);
  EXPECT_EQ(dtype_from_safetensors("nonsense"), std::nullopt);
}

}  // namespace
}  // namespace lt::io
