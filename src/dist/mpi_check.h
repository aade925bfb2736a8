#pragma once
// Private to src/dist's MPI files (built with LT_HAVE_MPI only): MPI's C
// API and the check that turns an MPI error code into an lt::Error.
// MPI's C API only: the deprecated C++ bindings need their own library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <string>

#include "core/error.h"

namespace lt::dist {

inline void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("MPI error in ", call, ": ", std::string(text, static_cast<size_t>(length)));
}

// MPI counts are ints: larger buffers go in pieces of this many elements.
inline constexpr int64_t kMaxElementsPerCall = INT_MAX / 2;

}  // namespace lt::dist
