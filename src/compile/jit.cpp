// The program's side of the CPU kernels: the calls go to the compiler
// plugin (compile/compiler_plugin.h), which alone links MLIR; running a
// kernel is a call through the entry point it returned.
#include "compile/jit.h"

#include "compile/compiler_plugin.h"
#include "compile/plugin_loader.h"
#include "core/error.h"

namespace lt::compile {

namespace {

std::vector<InputSpec> parameters_of(const KernelGraph& graph) {
  std::vector<InputSpec> params = graph.inputs();
  for (const OutputSpec& out : graph.outputs()) {
    if (out.over >= 0) continue;  // in place: no parameter
    params.push_back({graph.node(out.node).shape, out.dtype, RowMap{.pitch = out.pitch}});
  }
  return params;
}

}  // namespace

std::unique_ptr<CpuKernel> compile_cpu(const KernelGraph& graph) {
  return with_mlir_compiler("kernel " + graph.key(), [&](MlirCompiler& compiler) {
    return std::make_unique<CpuKernel>(compiler.compile_cpu(graph, nullptr), parameters_of(graph));
  });
}

CompiledObject compile_cpu_object(const KernelGraph& graph) {
  return with_mlir_compiler("kernel " + graph.key(), [&](MlirCompiler& compiler) {
    CompiledObject result;
    result.kernel = std::make_unique<CpuKernel>(compiler.compile_cpu(graph, &result.object),
                                                parameters_of(graph));
    return result;
  });
}

std::unique_ptr<CpuKernel> load_cpu_object(const KernelGraph& graph, const std::string& object) {
  return with_mlir_compiler("kernel " + graph.key(), [&](MlirCompiler& compiler) {
    return std::make_unique<CpuKernel>(compiler.load_cpu_object(graph, object),
                                       parameters_of(graph));
  });
}

std::string cpu_target_id() {
  const MlirCompiler* compiler = mlir_compiler();
  return compiler != nullptr ? compiler->cpu_target_id() : "none (no compiler plugin)";
}

CpuKernel::CpuKernel(std::unique_ptr<JitCode> code, std::vector<InputSpec> params)
    : code_(std::move(code)), params_(std::move(params)) {}
CpuKernel::~CpuKernel() = default;

void CpuKernel::run(int64_t rows, int64_t cols, std::span<void* const> buffers) const {
  LT_CHECK(buffers.size() == params_.size(), "compile: the kernel takes ", params_.size(),
           " buffers (inputs, then outputs), got ", buffers.size());
  LT_CHECK(rows >= 0 && cols >= 0, "compile: rows and cols must be >= 0, got ", rows, " and ",
           cols);
  // The packed calling convention: one pointer per scalar argument of the
  // lowered function, where a memref of rank n is (allocated, aligned,
  // offset, n sizes, n strides).
  union Word {
    void* pointer;
    int64_t integer;
  };
  std::vector<Word> words;
  words.reserve(2 + 7 * params_.size());
  words.push_back({.integer = rows});
  words.push_back({.integer = cols});
  for (size_t i = 0; i < params_.size(); ++i) {
    words.push_back({.pointer = buffers[i]});
    words.push_back({.pointer = buffers[i]});
    words.push_back({.integer = 0});
    switch (params_[i].shape) {
      case ShapeClass::Full: {
        // A mapped buffer (compile/to_mlir.h): [entries, cols], rows pitch * cols apart.
        const RowMap& map = params_[i].map;
        words.push_back({.integer = mapped_entries(map, rows)});
        words.push_back({.integer = cols});
        words.push_back({.integer = map.pitch * cols});
        words.push_back({.integer = 1});
        break;
      }
      case ShapeClass::Row:
        words.push_back({.integer = rows});
        words.push_back({.integer = 1});
        break;
      case ShapeClass::Col:
        words.push_back({.integer = cols});
        words.push_back({.integer = 1});
        break;
      case ShapeClass::Scalar:
        fail("compile: a kernel parameter cannot be scalar");
    }
  }
  std::vector<void*> args;
  args.reserve(words.size());
  for (Word& w : words) args.push_back(&w);
  code_->entry()(args.data());
}

}  // namespace lt::compile
