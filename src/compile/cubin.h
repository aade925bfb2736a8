#pragma once
// PTX -> cubin with CUDA's ptxas, run as a program. ptxas rather than the
// driver's JIT (cuModuleLoadDataEx on PTX): it needs no GPU, so the
// kernels for the GPU machine (which has no MLIR) are built and cached on
// any machine with the CUDA toolkit, and a cached cubin loads with no JIT
// at run time. ptxas takes 5-40 ms a kernel on this machine (-v reports
// it), against about 1 s for MLIR's lowering before it.
#include <string>

namespace lt::compile {

struct Ptxas {
  std::string path;
  int cuda_major = 0, cuda_minor = 0;  // the release it reports ("release 13.0")
};

// $LT_PTXAS, else /usr/local/cuda/bin/ptxas, else ptxas on PATH; its
// release read from `ptxas --version`. Looked up once. Throws lt::Error
// naming the places looked at when none runs.
const Ptxas& find_ptxas();

// The cubin for `ptx` on `chip` ("sm_90"). Throws lt::Error with ptxas's
// messages when it refuses.
std::string assemble_cubin(const std::string& ptx, const std::string& chip);

}  // namespace lt::compile
