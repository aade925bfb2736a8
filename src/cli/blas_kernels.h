#pragma once

namespace lt::cli {

// OpenBLAS picks its kernels from the CPU's family and model. Virtual
// machines often report a generic model ("Intel Xeon Processor"), and
// OpenBLAS then falls back to its SSE3 "Prescott" kernels, 2-3x slower than
// the AVX2/AVX-512 ones the CPU actually has (measured on the 2-core dev VM:
// 203 vs 613 tokens/s on the demo). The choice is made when the library
// loads, before main(), so the only fix from inside is to run again with
// OPENBLAS_CORETYPE set from the CPU's feature flags. Does nothing when the
// user set OPENBLAS_CORETYPE or OpenBLAS already chose a modern core.
void reexec_for_blas_kernels(char** argv);

}  // namespace lt::cli
