#pragma once
// The message of the lt::Error that `fn` throws, or "<no error>".
#include <string>

#include "core/error.h"

namespace lt::testing {

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace lt::testing
