#pragma once
// What this process has read through read(2), pread(2) and the like, as
// the kernel counts it (/proc/self/io's rchar): an outside count of the
// bytes a piece of code read from files or sockets.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace lt::testing {

inline int64_t bytes_read_so_far() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  ADD_FAILURE() << "no rchar in /proc/self/io";
  return 0;
}

// The bytes `work` read, less those this count itself reads from
// /proc/self/io.
template <class Work>
int64_t bytes_read_by(Work&& work) {
  const int64_t probe = bytes_read_so_far();
  const int64_t before = bytes_read_so_far();
  work();
  return bytes_read_so_far() - before - (before - probe);
}

}  // namespace lt::testing
