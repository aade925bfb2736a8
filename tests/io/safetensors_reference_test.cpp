// Against the reference implementation, both ways:
//  - files written by the `safetensors` Python package
//    (tools/reference/make_safetensors_fixtures.py, committed under
//    tests/io/fixtures) read back as the values that script's formulas give,
//    written down here independently;
//  - a file our writer produces is read by the Python package (skipped when
//    the project's .venv lacks it), whose strict validation refuses gaps,
//    overlaps and misordered offsets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "io_test_util.h"

namespace lt::io {
namespace {

using testing::fixtures_dir;
using testing::TempDir;

std::vector<double> values(const SafetensorsFile& f, const std::string& name) {
  return f.tensor(name).to_doubles();
}

TEST(SafetensorsReference, ReadsEveryDtypeThePythonPackageWrites) {
  SafetensorsFile f(fixtures_dir() / "reference_all_dtypes.safetensors");
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("made_by"), "make_safetensors_fixtures.py");
  EXPECT_TRUE(f.header().warnings.empty());
  EXPECT_EQ(f.names().size(), 11u);

  Tensor f32 = f.tensor("f32");
  EXPECT_EQ(f32.dtype(), DType::F32);
  EXPECT_EQ(f32.shape(), (Shape{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(values(f, "f32")[i], 0.5 * i - 1.0);

  EXPECT_EQ(f.tensor("f64").dtype(), DType::F64);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(values(f, "f64")[i], 1.0 / (i + 3));

  Tensor bf16 = f.tensor("bf16");
  EXPECT_EQ(bf16.dtype(), DType::BF16);
  EXPECT_EQ(bf16.shape(), (Shape{2, 2}));
  EXPECT_EQ(values(f, "bf16"), (std::vector<double>{1.0, -2.5, 0.15625, 65536.0}));

  EXPECT_EQ(f.tensor("f16").dtype(), DType::F16);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(values(f, "f16")[i], 0.25 * i - 0.5);

  Tensor i64 = f.tensor("i64");
  EXPECT_EQ(i64.dtype(), DType::I64);
  EXPECT_EQ(i64.to_vector<int64_t>(),
            (std::vector<int64_t>{-(int64_t{1} << 40), 0, (int64_t{1} << 40) + 7}));

  Tensor i32 = f.tensor("i32");
  EXPECT_EQ(i32.shape(), (Shape{2, 3}));
  EXPECT_EQ(i32.to_vector<int32_t>(), (std::vector<int32_t>{-3, -2, 1, 6, 13, 22}));

  EXPECT_EQ(f.tensor("i8").to_vector<int8_t>(), (std::vector<int8_t>{-128, -1, 0, 127}));
  EXPECT_EQ(f.tensor("u8").to_vector<uint8_t>(), (std::vector<uint8_t>{0, 128, 255}));

  Tensor b = f.tensor("bool");
  EXPECT_EQ(f.entry("bool").dtype_name, "BOOL");
  EXPECT_EQ(b.dtype(), DType::U8);
  EXPECT_EQ(b.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 0, 1}));

  Tensor empty = f.tensor("empty");
  EXPECT_EQ(empty.shape(), (Shape{0, 3}));
  EXPECT_EQ(empty.numel(), 0);

  Tensor scalar = f.tensor("scalar");
  EXPECT_EQ(scalar.dim(), 0);
  EXPECT_EQ(scalar.item(), 42.0);
}

TEST(SafetensorsReference, UnsupportedDtypeNamedWhenRead) {
  const auto path = fixtures_dir() / "reference_unsupported_u16.safetensors";
  SafetensorsFile f(path);
  EXPECT_EQ(f.tensor("ok").to_doubles(), (std::vector<double>{1.5, -1.5}));
  EXPECT_EQ(f.entry("u16").dtype_name, "U16");
  try {
    f.tensor("u16");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("tensor 'u16'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("U16 is not supported"), std::string::npos) << msg;
  }
}

// Reads a file with the Python package and prints, per tensor, its dtype,
// shape and bytes in hex, plus the metadata: everything that defines the
// file's content, as the reference implementation sees it.
constexpr const char* kPythonDump = R"PY(
import json, sys
import safetensors
path, out = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
tensors = {name: {"dtype": t["dtype"], "shape": list(t["shape"]), "hex": bytes(t["data"]).hex()}
           for name, t in safetensors.deserialize(data)}
with safetensors.safe_open(path, framework="numpy") as f:
    metadata = f.metadata()
json.dump({"tensors": tensors, "metadata": metadata}, open(out, "w"))
)PY";

std::string hex(const Tensor& t) {
  Tensor c = t.contiguous();
  static const char* digits = "0123456789abcdef";
  std::string s;
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  for (size_t i = 0; i < c.nbytes(); ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

TEST(SafetensorsReference, PythonPackageReadsOurFiles) {
  const auto python = testing::venv_python_with("safetensors");
  if (python.empty()) {
    GTEST_SKIP() << "no .venv python with safetensors (pip install safetensors numpy into .venv)";
  }
  TempDir dir;
  Generator gen(7);
  NamedTensors tensors = {
      {"model.embed.weight", Tensor::randn({5, 3}, gen, DType::F32)},
      {"f64", Tensor::randn({4}, gen, DType::F64)},
      {"bf16", Tensor::randn({3, 2}, gen, DType::BF16)},
      {"f16", Tensor::randn({2, 2, 2}, gen, DType::F16)},
      {"ids", Tensor::from_vector<int64_t>({-5, 0, int64_t{1} << 50}, {3})},
      {"i32", Tensor::from_vector<int32_t>({-7, 7}, {2})},
      {"i8", Tensor::from_vector<int8_t>({-128, 127, 3}, {3})},
      {"u8", Tensor::from_vector<uint8_t>({0, 255}, {2})},
      {"scalar", Tensor::scalar(3.5)},
      {"empty", Tensor::empty({0}, DType::F32)},
  };
  const auto file = dir / "ours.safetensors";
  write_safetensors(file, tensors, {{"format", "pt"}, {"source", "lazytrain"}});
  const auto out = dir / "dump.json";
  testing::write_text(dir / "dump.py", kPythonDump);
  const std::string cmd =
      python.string() + " " + (dir / "dump.py").string() + " " + file.string() + " " + out.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "the safetensors package refused our file: " << cmd;

  const auto dump = nlohmann::json::parse(testing::read_text(out));
  EXPECT_EQ(dump["metadata"], (nlohmann::json{{"format", "pt"}, {"source", "lazytrain"}}));
  ASSERT_EQ(dump["tensors"].size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const auto& py = dump["tensors"][name];
    EXPECT_EQ(py["dtype"], safetensors_dtype_name(t.dtype())) << name;
    EXPECT_EQ(py["shape"].get<std::vector<int64_t>>(), t.shape()) << name;
    EXPECT_EQ(py["hex"].get<std::string>(), hex(t)) << name;
  }
}

}  // namespace
}  // namespace lt::io
