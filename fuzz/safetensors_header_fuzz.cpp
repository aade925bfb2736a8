// libFuzzer target for the safetensors header parser. Every input must end
// in a parsed header or an lt::Error; anything else (a crash, a sanitizer
// report, another exception type, a broken invariant below) is a bug.
//
// Seeds: the files under tests/io/fixtures. See fuzz/CMakeLists.txt for how
// to build and run.
#include <cstddef>
#include <cstdint>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lt::io::SafetensorsHeader header;
  try {
    header = lt::io::parse_safetensors_header(data, size, "fuzz-input");
  } catch (const lt::Error&) {
    return 0;
  }
  // What the reader relies on after a successful parse: every tensor lies
  // inside the data region, tensors do not overlap, and the byte count
  // matches. Reading each tensor's bytes lets AddressSanitizer catch any
  // range that escapes the input buffer.
  if (header.data_start + header.data_bytes != size) __builtin_trap();
  uint64_t covered = 0;
  uint8_t sum = 0;
  for (const auto& e : header.entries) {
    if (e.begin > e.end || e.end > header.data_bytes) __builtin_trap();
    if (e.nbytes() > 0) {
      if (e.begin < covered) __builtin_trap();
      covered = e.end;
    }
    if (e.dtype &&
        static_cast<uint64_t>(lt::numel(e.shape)) * lt::dtype_size(*e.dtype) != e.nbytes()) {
      __builtin_trap();
    }
    for (uint64_t i = e.begin; i < e.end; ++i)
      sum = static_cast<uint8_t>(sum + data[header.data_start + i]);
  }
  volatile uint8_t sink = sum;
  (void)sink;
  return 0;
}
