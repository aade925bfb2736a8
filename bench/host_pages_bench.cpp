// How fast fresh host memory fills with 4 KiB pages against transparent
// huge pages, and what freeing it costs (Note [Huge pages for large host
// tensors] in src/core/allocator.cpp). Standalone: no lazytrain library.
//   host_pages_bench [GB per block, default 2] [repeats, default 3]
// Prints, per page kind and repeat, the GB/s of the first fill of a fresh
// block, of a second fill of the same block, and the seconds free() took.
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void fill(char* block, size_t bytes, const std::vector<char>& chunk) {
  for (size_t at = 0; at < bytes; at += chunk.size())
    std::memcpy(block + at, chunk.data(), std::min(chunk.size(), bytes - at));
}

}  // namespace

int main(int argc, char** argv) {
  const double gb = argc > 1 ? std::atof(argv[1]) : 2.0;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  const size_t huge = size_t{2} << 20;
  const size_t bytes = static_cast<size_t>(gb * 1e9) / huge * huge;
  const std::vector<char> chunk(size_t{1} << 20, 7);
  for (bool huge_pages : {false, true}) {
    for (int r = 0; r < repeats; ++r) {
      auto start = std::chrono::steady_clock::now();
      auto* block = static_cast<char*>(std::aligned_alloc(huge, bytes));
      if (block == nullptr) return 1;
      if (huge_pages) ::madvise(block, bytes, MADV_HUGEPAGE);
      fill(block, bytes, chunk);
      const double fresh = seconds_since(start);
      start = std::chrono::steady_clock::now();
      fill(block, bytes, chunk);
      const double again = seconds_since(start);
      start = std::chrono::steady_clock::now();
      std::free(block);
      std::printf("%s pages: fresh %.2f GB/s, faulted %.2f GB/s, free %.3f s\n",
                  huge_pages ? "huge" : "4 KiB", bytes / 1e9 / fresh, bytes / 1e9 / again,
                  seconds_since(start));
    }
  }
  return 0;
}
