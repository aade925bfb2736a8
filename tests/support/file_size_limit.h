#pragma once
// RLIMIT_FSIZE at `bytes` while a FileSizeLimit lives, with SIGXFSZ
// ignored: a write past it fails with EFBIG ("File too large") instead of
// killing the process, which is what a full disk looks like to the code
// under test. The limit and the signal's handler are restored when it goes.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>

namespace lt::testing {

class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    EXPECT_EQ(0, ::getrlimit(RLIMIT_FSIZE, &saved_));
    rlimit small = saved_;
    small.rlim_cur = bytes;
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    EXPECT_EQ(0, ::setrlimit(RLIMIT_FSIZE, &small));
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace lt::testing
