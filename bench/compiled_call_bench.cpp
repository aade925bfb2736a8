// The host time of one compiled optimizer update call (issue 24): a small
// parameter's update (4096 elements by default: the kernel's own work is a
// few microseconds) called again and again, two ways:
//   looked up  - compiled_adamw_update(cache, ...): the graph built, its key
//                computed and looked up in the kernel cache, the scalars
//                made, every call (what each piece of every parameter did
//                before CompiledUpdateKernels);
//   resolved   - the kernel resolved once (CompiledUpdateKernels) and the
//                scalars made once: the call is its arguments and the run.
// The difference is the overhead the optimizer no longer pays per piece.
// On the CPU only (on CUDA the old path also made nine host-to-device
// copies a call, each waiting for the GPU).
//
//   build/compiled_call_bench [--elements N] [--calls C] [--runs R]
//
// Prints microseconds per call, median of R runs of C calls (min - max).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "compile/compiler_info.h"
#include "compile/kernel_cache.h"
#include "core/error.h"
#include "core/random.h"
#include "optim/compiled_adamw.h"
#include "optim/compiled_adamw8bit.h"
#include "optim/compiled_update_kernels.h"

namespace {

using lt::DType;
using lt::Tensor;

struct Timing {
  double median_us, min_us, max_us;
};

Timing time_calls(int64_t calls, int runs, const std::function<void()>& call) {
  for (int w = 0; w < 10; ++w) call();
  std::vector<double> us;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t c = 0; c < calls; ++c) call();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    us.push_back(s * 1e6 / static_cast<double>(calls));
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2], us.front(), us.back()};
}

void print(const char* name, const Timing& t) {
  std::printf("| %-34s | %8.2f | %8.2f - %8.2f |\n", name, t.median_us, t.min_us, t.max_us);
  std::fflush(stdout);
}

void run(int64_t n, int64_t calls, int runs) {
  lt::Generator gen(1);
  const Tensor p = Tensor::randn({n}, gen), grad = Tensor::randn({n}, gen);
  for (int64_t e = 0; e < n; ++e) grad.data<float>()[e] *= 1e-3f;
  const Tensor m = Tensor::zeros({n}, DType::F32), v = Tensor::zeros({n}, DType::F32);
  const Tensor copy = Tensor::zeros({n}, DType::BF16);
  const lt::optim::AdamWScalars s = lt::optim::adamw_scalars(1e-4, 0.9, 0.999, 1e-8, 0.1, 1.0, 1);
  auto cache = std::make_shared<lt::compile::KernelCache>();

  lt::optim::CompiledUpdateKernels adamw(cache, lt::optim::adamw_kernel_graph);
  const lt::optim::CompiledUpdateKernel& adamw_kernel = adamw.get(DType::F32, true, p.device());
  const Tensor adamw_table = lt::optim::adamw_scalar_table(s, 1);
  print("adamw, looked up every call", time_calls(calls, runs, [&] {
          lt::optim::compiled_adamw_update(*cache, s, p, grad, m, v, copy);
        }));
  print("adamw, resolved once", time_calls(calls, runs, [&] {
          lt::optim::compiled_adamw_update(adamw_kernel, adamw_table, p, grad, m, v, copy);
        }));

  const int64_t block = 2048, blocks = (n + block - 1) / block;
  const Tensor m_codes = Tensor::zeros({n}, DType::U8), v_codes = Tensor::zeros({n}, DType::U8);
  const Tensor m_scales = Tensor::zeros({blocks}, DType::F32);
  const Tensor v_scales = Tensor::zeros({blocks}, DType::F32);
  lt::optim::CompiledUpdateKernels eight_bit(cache, lt::optim::adamw8bit_kernel_graph);
  const lt::optim::CompiledUpdateKernel& eight_bit_kernel =
      eight_bit.get(DType::F32, true, p.device());
  const Tensor eight_bit_table = lt::optim::adamw_scalar_table(s, blocks);
  print("adamw8bit, looked up every call", time_calls(calls, runs, [&] {
          lt::optim::compiled_adamw8bit_update(*cache, s, block, p, grad, m_codes, m_scales,
                                               v_codes, v_scales, copy);
        }));
  print("adamw8bit, resolved once", time_calls(calls, runs, [&] {
          lt::optim::compiled_adamw8bit_update(eight_bit_kernel, eight_bit_table, block, p, grad,
                                               m_codes, m_scales, v_codes, v_scales, copy);
        }));
}

}  // namespace

int main(int argc, char** argv) {
  int64_t elements = 4096, calls = 2000;
  int runs = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--elements" && i + 1 < argc) {
      elements = std::atoll(argv[++i]);
    } else if (a == "--calls" && i + 1 < argc) {
      calls = std::atoll(argv[++i]);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--elements N] [--calls C] [--runs R]\n", argv[0]);
      return 2;
    }
  }
  if (elements < 1 || calls < 1 || runs < 1) {
    std::fprintf(stderr, "--elements, --calls and --runs must be >= 1\n");
    return 2;
  }
  if (!lt::compile::compiler_info().built_in) {
    std::fprintf(stderr, "compiled_call_bench: built without MLIR (-DLT_MLIR=OFF)\n");
    return 1;
  }
  std::printf("%lld elements, f32 gradients, bf16 copy; us per call, median of %d runs of %lld\n\n",
              static_cast<long long>(elements), runs, static_cast<long long>(calls));
  std::printf("| call | us | range |\n| --- | --- | --- |\n");
  try {
    run(elements, calls, runs);
  } catch (const lt::Error& e) {
    std::fprintf(stderr, "compiled_call_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
