#pragma once
// Named pipes, for tests of readers that must refuse them: a reader that
// opens one for reading waits for a writer, forever. error_of_fifo_load
// runs the load on its own thread; if it is still blocked after a few
// seconds, the FIFO's writing end is opened and closed (again, for as long
// as the load goes on), so that the reader sees an empty file and the test
// fails instead of hanging.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <string>

#include "support/errors.h"

namespace lt::testing {

inline void make_fifo(const std::filesystem::path& path) {
  if (::mkfifo(path.c_str(), 0600) != 0) {
    throw std::runtime_error("mkfifo " + path.string() + " failed");
  }
}

struct FifoLoad {
  std::string error;     // the lt::Error's message, or "<no error>"
  bool blocked = false;  // the load waited on the FIFO
};

template <typename Fn>
FifoLoad error_of_fifo_load(const std::filesystem::path& fifo, Fn&& load) {
  auto done = std::async(std::launch::async, [&] { return error_of(load); });
  FifoLoad result;
  if (done.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    result.blocked = true;
    while (done.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // fails until a reader waits
      if (fd >= 0) ::close(fd);
    }
  }
  result.error = done.get();
  return result;
}

}  // namespace lt::testing
