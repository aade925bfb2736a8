#pragma once
// Errors are exceptions that carry context: what was expected, what was
// found, and where. LT_CHECK is always on (it guards user input and
// invariants alike); a failed check is an lt::Error, never an abort.
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace lt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A run that cannot go ahead in the memory it has (device, host or disk),
// as opposed to a mistake in its input: `lazytrain plan --json` answers it
// as a plan ({"feasible": false}, status 3), a script's cue to shrink the
// batch; any other Error is status 1.
class DoesNotFit : public Error {
 public:
  using Error::Error;
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
// Whether a failed LT_CHECK adds "[check `cond` at file:line]": a pointer
// for developers (LT_DEBUG=1), noise in what a user reads.
inline bool show_check_sites() {
  static const bool on = [] {
    const char* v = std::getenv("LT_DEBUG");
    return v != nullptr && *v != '\0' && std::string_view(v) != "0";
  }();
  return on;
}
}  // namespace detail

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(detail::concat(args...));
}

template <typename... Args>
[[noreturn]] void fail_does_not_fit(const Args&... args) {
  throw DoesNotFit(detail::concat(args...));
}

}  // namespace lt

#define LT_CHECK(cond, ...)                                                               \
  do {                                                                                    \
    if (!(cond)) [[unlikely]] {                                                           \
      if (::lt::detail::show_check_sites())                                               \
        ::lt::fail(__VA_ARGS__, " [check `" #cond "` at ", __FILE__, ":", __LINE__, "]"); \
      ::lt::fail(__VA_ARGS__);                                                            \
    }                                                                                     \
  } while (0)
