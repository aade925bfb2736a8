#pragma once
// CPU kernels compiled from a KernelGraph: its MLIR (compile/to_mlir.h) is
// lowered to the LLVM dialect, optimized and JIT-compiled by MLIR's
// ExecutionEngine, inside the compiler plugin (compile/mlir_plugin/
// cpu_jit.cpp, loaded on first use: compile/plugin_loader.h). Where the
// plugin cannot load (built without MLIR, or its libraries missing)
// compile_cpu throws, saying which file and why (compile/compiler_info.h
// tells beforehand).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compile/graph.h"

namespace lt::compile {

class JitCode;

class CpuKernel {
 public:
  CpuKernel(std::unique_ptr<JitCode> code, std::vector<InputSpec> params);
  ~CpuKernel();
  CpuKernel(const CpuKernel&) = delete;
  CpuKernel& operator=(const CpuKernel&) = delete;

  // `buffers`: the graph's inputs then its outputs, each contiguous and of
  // its shape class's size over [rows, cols], in its stored dtype. Outputs
  // must not overlap inputs. Safe to call from several threads at once.
  void run(int64_t rows, int64_t cols, std::span<void* const> buffers) const;

 private:
  std::unique_ptr<JitCode> code_;  // the plugin's, which frees it
  std::vector<InputSpec> params_;  // inputs then outputs (an output's pitch as its map)
};

// Throws lt::Error naming the graph's key when lowering or JIT fails.
std::unique_ptr<CpuKernel> compile_cpu(const KernelGraph& graph);

// The same, also returning the machine code as an object file, for a disk
// cache (compile/kernel_cache.h) to keep and load_cpu_object to load.
struct CompiledObject {
  std::unique_ptr<CpuKernel> kernel;
  std::string object;  // ELF relocatable, for this host's CPU (cpu_target_id)
};
CompiledObject compile_cpu_object(const KernelGraph& graph);

// Links an object from compile_cpu_object of the same graph into this
// process. Throws lt::Error when it cannot (a damaged object).
std::unique_ptr<CpuKernel> load_cpu_object(const KernelGraph& graph, const std::string& object);

// What an object depends on besides its graph: the LLVM version, the
// target triple and the host CPU (the JIT uses its features), and that the
// optimizer used the host's cost models, e.g.
// "llvm 19.1.7 x86_64-pc-linux-gnu znver3 host-tuned".
std::string cpu_target_id();

}  // namespace lt::compile
