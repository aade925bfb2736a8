#pragma once
// Errors are exceptions that carry context: what was expected, what was
// found, and where. LT_CHECK is always on (it guards user input and
// invariants alike); a failed check is an lt::Error, never an abort.
#include <sstream>
#include <stdexcept>
#include <string>

namespace lt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append(os, rest...);
}
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  append(os, args...);
  return os.str();
}
}  // namespace detail

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(detail::concat(args...));
}

}  // namespace lt

#define LT_CHECK(cond, ...)                                                             \
  do {                                                                                  \
    if (!(cond)) [[unlikely]] {                                                         \
      ::lt::fail(__VA_ARGS__, " [check `" #cond "` at ", __FILE__, ":", __LINE__, "]"); \
    }                                                                                   \
  } while (0)
