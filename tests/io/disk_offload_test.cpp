// Disk offload round-trips bytes exactly, through io_uring where the kernel
// allows it and through the threaded pread/pwrite fallback.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <random>
#include <vector>

#include "io/disk_offload.h"
#include "support/errors.h"

namespace lt::io {
namespace {

std::string scratch(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("lt-disk-offload-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

std::vector<unsigned char> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

// Several regions of awkward sizes, written in one order and read back in
// another (as backward reads boundaries in reverse).
void round_trip(DiskOffloadFile& f) {
  const std::vector<size_t> sizes = {1,       4095,          4096, 4097, 3 * 65536 + 17,
                                     1 << 20, (1 << 20) + 1, 0};
  std::vector<DiskRegion> regions;
  std::vector<std::vector<unsigned char>> data;
  for (size_t k = 0; k < sizes.size(); ++k) {
    regions.push_back(f.allocate(static_cast<int64_t>(sizes[k])));
    data.push_back(random_bytes(sizes[k], 7 + k));
    f.write(regions[k], data[k].data());
  }
  for (size_t k = sizes.size(); k-- > 0;) {
    std::vector<unsigned char> back(sizes[k] + 1, 0xAB);  // one guard byte
    f.read(regions[k], back.data());
    EXPECT_TRUE(std::equal(data[k].begin(), data[k].end(), back.begin())) << "region " << k;
    EXPECT_EQ(back[sizes[k]], 0xAB) << "read past the end of region " << k;
  }
  // Overwriting a region leaves its neighbours alone.
  const auto fresh = random_bytes(sizes[2], 99);
  f.write(regions[2], fresh.data());
  std::vector<unsigned char> back(sizes[3]);
  f.read(regions[3], back.data());
  EXPECT_EQ(back, data[3]);
  back.assign(sizes[2], 0);
  f.read(regions[2], back.data());
  EXPECT_EQ(back, fresh);
}

TEST(DiskOffload, ThreadedFallbackRoundTripsExactly) {
  DiskOffloadFile::Options o;
  o.force_threads = true;
  o.chunk_bytes = 64 * 1024;  // many chunks per region, several workers
  o.queue_depth = 4;
  DiskOffloadFile f(scratch("threads"), o);
  EXPECT_EQ(f.backend(), DiskOffloadFile::Backend::Threads);
  round_trip(f);
}

TEST(DiskOffload, IoUringRoundTripsExactly) {
  DiskOffloadFile::Options o;
  o.chunk_bytes = 64 * 1024;
  o.queue_depth = 4;
  DiskOffloadFile f(scratch("uring"), o);
  if (f.backend() != DiskOffloadFile::Backend::IoUring)
    GTEST_SKIP() << "io_uring is not available here (the fallback test covers this machine)";
  round_trip(f);
}

TEST(DiskOffload, TheFileIsRemovedAndBadRegionsAreRefused) {
  const std::string path = scratch("cleanup");
  {
    DiskOffloadFile f(path);
    EXPECT_TRUE(std::filesystem::exists(path));
    const DiskRegion r = f.allocate(10);
    EXPECT_EQ(f.size_bytes(), 4096);
    std::vector<char> buf(10);
    const DiskRegion beyond{8192, 10};
    EXPECT_NE(lt::testing::error_of([&] { f.read(beyond, buf.data()); }).find(path),
              std::string::npos);
    f.write(r, buf.data());
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_NE(lt::testing::error_of([] {
              DiskOffloadFile f("/nonexistent-dir/x.bin");
            }).find("/nonexistent-dir/x.bin"),
            std::string::npos);
}

}  // namespace
}  // namespace lt::io
