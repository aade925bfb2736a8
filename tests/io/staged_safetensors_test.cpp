// write_staged_safetensors (io/staged_safetensors.h) against
// write_safetensors as the reference: files whose tensors come from groups
// interleaved in every order, of several dtypes and an empty tensor, are
// byte for byte write_safetensors' files of the same tensors; each group is
// loaded once, in increasing order, and only while its tensors are made; a
// tensor that cannot be made leaves no file and no temporary behind.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/random.h"
#include "io/safetensors.h"
#include "io/staged_safetensors.h"
#include "io_test_util.h"

namespace lt::io {
namespace {

using testing::read_bytes;
using testing::TempDir;

struct Source {
  std::string name;
  Tensor t;
  int group;
};

StagedFile staged(const std::filesystem::path& path, const std::vector<Source>& tensors,
                  const int& loaded) {
  StagedFile f{path, {}, {{"format", "pt"}}};
  for (const Source& s : tensors)
    f.tensors.push_back({{s.name, s.t.dtype(), s.t.shape()}, s.group, [&loaded, s] {
                           EXPECT_EQ(loaded, s.group) << s.name << " made outside its group";
                           return s.t;
                         }});
  return f;
}

NamedTensors named(const std::vector<Source>& tensors) {
  NamedTensors out;
  for (const Source& s : tensors) out.emplace_back(s.name, s.t);
  return out;
}

TEST(StagedSafetensors, WritesWhatWriteSafetensorsWritesOneGroupAtATime) {
  Generator gen(3);
  const std::vector<Source> a = {{"z.late", Tensor::randn({33, 7}, gen), 2},
                                 {"host", Tensor::randn({5}, gen), -1},
                                 {"first", Tensor::randn({4, 4}, gen).to(DType::BF16), 0},
                                 {"empty", Tensor::empty({0, 3}, DType::F32), 1},
                                 {"again", Tensor::randn({129}, gen), 2}};
  const std::vector<Source> b = {
      {"steps", Tensor::from_vector(std::vector<int64_t>{7, 9}, {2}), -1},
      {"codes", Tensor::full({70}, 3, DType::U8), 1},
      {"transposed", Tensor::randn({6, 5}, gen).transpose(0, 1), 0}};
  const TempDir dir;
  write_safetensors(dir / "a_ref.safetensors", named(a), {{"format", "pt"}});
  write_safetensors(dir / "b_ref.safetensors", named(b), {{"format", "pt"}});
  int loaded = -1;
  std::vector<int> loads;
  write_staged_safetensors(
      {staged(dir / "a.safetensors", a, loaded), staged(dir / "b.safetensors", b, loaded)},
      [&](int g) {
        EXPECT_EQ(loaded, -1) << "group " << g << " loaded over group " << loaded;
        loaded = g;
        loads.push_back(g);
      },
      [&](int g) {
        EXPECT_EQ(loaded, g);
        loaded = -1;
      });
  EXPECT_EQ(loads, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(read_bytes(dir / "a.safetensors"), read_bytes(dir / "a_ref.safetensors"));
  EXPECT_EQ(read_bytes(dir / "b.safetensors"), read_bytes(dir / "b_ref.safetensors"));
}

TEST(StagedSafetensors, ATensorThatCannotBeMadeLeavesNoFile) {
  const TempDir dir;
  StagedFile good{dir / "good.safetensors", {}, {}};
  good.tensors.push_back({{"x", DType::F32, {3}}, -1, [] { return Tensor::zeros({3}); }});
  StagedFile bad{dir / "bad.safetensors", {}, {}};
  bad.tensors.push_back({{"y", DType::F32, {2}}, 0, []() -> Tensor {
                           throw std::runtime_error("disk read failed");
                         }});
  EXPECT_THROW(write_staged_safetensors(
                   {good, bad}, [](int) {}, [](int) {}),
               std::exception);
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(StagedSafetensors, ATensorOfAnotherShapeThanItsHeaderIsAnError) {
  const TempDir dir;
  StagedFile f{dir / "f.safetensors", {}, {}};
  f.tensors.push_back({{"w", DType::F32, {2}}, -1, [] { return Tensor::zeros({3}); }});
  try {
    write_staged_safetensors(
        {f}, [](int) {}, [](int) {});
    ADD_FAILURE() << "a tensor of the wrong shape was written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'w' came as"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

}  // namespace
}  // namespace lt::io
