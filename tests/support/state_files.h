#pragma once
// What the tests of exec.state_placement share: a tensor's bytes (to compare
// runs bit for bit), a byte of a scratch file changed behind the executor's
// back, and a few steps of small random batches.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "data/batching.h"
#include "support/random_batch.h"

namespace lt::testing {

inline std::vector<unsigned char> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const unsigned char*>(t.data_ptr());
  return {p, p + t.nbytes()};
}

// Flips bit 4 of byte `offset` of the file at `path`.
inline void flip_byte(const std::string& path, int64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  unsigned char b = 0;
  ASSERT_EQ(1, ::pread(fd, &b, 1, offset));
  b ^= 0x10;
  ASSERT_EQ(1, ::pwrite(fd, &b, 1, offset));
  ::close(fd);
}

// `steps` steps of two micro-batches of 2 rows of 9 tokens (seed 9).
inline std::vector<std::vector<data::Batch>> state_test_batches(int steps, int64_t vocab) {
  Generator gen(9);
  std::vector<std::vector<data::Batch>> out(static_cast<size_t>(steps));
  for (auto& step : out)
    for (int m = 0; m < 2; ++m) step.push_back(random_token_batch(gen, 2, 9, vocab));
  return out;
}

}  // namespace lt::testing
