// matmul, linear and their gradients on the GPU (cuBLASLt) against the CPU
// backend (OpenBLAS) on the same random inputs; GPU casts and strided
// copies against the CPU's; and GemmBench, the TFLOP/s of the products a
// 3B model's layer runs (skipped unless LT_BENCH=1).
//
// Tolerances, as relative error norms ||gpu - cpu|| / ||cpu||:
// - bf16 (and f16): 1e-2. Both backends accumulate in f32 and round the
//   result once, so what remains is that rounding (about 2^-9) and the
//   order of additions.
// - f32: 1e-3. The GPU multiplies on TF32 tensor cores, which keep 10
//   mantissa bits of each input (a relative error of up to 2^-11 per input
//   when rounded); the worst seen on the H200 was 3.6e-4.
// The tests print the worst error they saw.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/cuda/device_info.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "gpu_test_support.h"
#include "ops/matmul.h"
#include "support/gradcheck.h"

namespace lt {
namespace {

using testing::relative_error_norm;

Device gpu() {
  return Device::cuda(0);
}

double tolerance(DType t) {
  switch (t) {
    case DType::F32:
      return 1e-3;
    case DType::F64:
      return 1e-12;
    default:
      return 1e-2;
  }
}

// The worst relative error per dtype over a test, printed at its end so
// that a run records the figures, not just a pass.
class WorstError {
 public:
  explicit WorstError(std::string test) : test_(std::move(test)) {}
  ~WorstError() {
    for (const auto& [dtype, worst] : worst_) {
      std::printf("[%s] %s: worst relative error %.3g (%s)\n", test_.c_str(), dtype_name(dtype),
                  worst.first, worst.second.c_str());
    }
  }
  // EXPECTs gpu ~ cpu (same shape and dtype) and records the error.
  void check(const Tensor& on_gpu, const Tensor& on_cpu, const std::string& what) {
    ASSERT_TRUE(on_gpu.device().is_cuda()) << what;
    ASSERT_EQ(on_gpu.shape(), on_cpu.shape()) << what;
    ASSERT_EQ(on_gpu.dtype(), on_cpu.dtype()) << what;
    const double err = relative_error_norm(on_gpu.to_doubles(), on_cpu.to_doubles());
    EXPECT_LT(err, tolerance(on_cpu.dtype())) << what;
    auto& w = worst_[on_cpu.dtype()];
    if (err >= w.first) w = {err, what};
  }

 private:
  std::string test_;
  std::map<DType, std::pair<double, std::string>> worst_;
};

Shape matrix_shape(Shape batch, int64_t rows, int64_t cols, bool transposed) {
  batch.push_back(transposed ? cols : rows);
  batch.push_back(transposed ? rows : cols);
  return batch;
}

struct Dims {
  int64_t m, k, n;
};

std::string dims_str(const Dims& d) {
  return std::to_string(d.m) + "x" + std::to_string(d.k) + "x" + std::to_string(d.n);
}

enum class Form { Plain, Batched, SharedB };
const char* form_name(Form f) {
  return f == Form::Plain ? "2d" : f == Form::Batched ? "batched" : "shared-b";
}

// matmul forward and both gradients, every transpose combination.
void check_matmul(WorstError& log, Generator& gen, DType dtype, const Dims& d, Form form) {
  const Shape batch = form == Form::Plain ? Shape{} : Shape{2, 3};
  const Shape b_batch = form == Form::Batched ? batch : Shape{};
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const std::string what = std::string(dtype_name(dtype)) + " " + dims_str(d) + " " +
                               form_name(form) + " ta=" + std::to_string(ta) +
                               " tb=" + std::to_string(tb);
      SCOPED_TRACE(what);
      const Tensor a = Tensor::randn(matrix_shape(batch, d.m, d.k, ta), gen, dtype);
      const Tensor b = Tensor::randn(matrix_shape(b_batch, d.k, d.n, tb), gen, dtype);
      const Tensor g = Tensor::randn(matrix_shape(batch, d.m, d.n, false), gen, dtype);
      const Tensor ag = a.to(gpu()), bg = b.to(gpu()), gg = g.to(gpu());
      log.check(ops::matmul(ag, bg, ta, tb), ops::matmul(a, b, ta, tb), what + " forward");
      log.check(ops::matmul_backward_a(gg, bg, ta, tb), ops::matmul_backward_a(g, b, ta, tb),
                what + " grad a");
      const bool shared = form == Form::SharedB;
      log.check(ops::matmul_backward_b(gg, ag, ta, tb, shared),
                ops::matmul_backward_b(g, a, ta, tb, shared), what + " grad b");
    }
  }
}

TEST(GemmGpu, MatmulEveryTransposeAndFormMatchesCpu) {
  LT_REQUIRE_GPU();
  WorstError log("GemmGpu.Matmul");
  Generator gen(101);
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const Dims& d : {Dims{3, 5, 7}, Dims{64, 128, 256}, Dims{17, 40, 9}}) {
      for (Form form : {Form::Plain, Form::Batched, Form::SharedB}) {
        check_matmul(log, gen, dtype, d, form);
      }
    }
    // The large shape once per transpose, as a single product.
    check_matmul(log, gen, dtype, Dims{1000, 1024, 4096}, Form::Plain);
  }
}

TEST(GemmGpu, HalfAndDoubleMatchCpu) {
  LT_REQUIRE_GPU();
  WorstError log("GemmGpu.HalfAndDouble");
  Generator gen(102);
  for (DType dtype : {DType::F16, DType::F64}) {
    check_matmul(log, gen, dtype, Dims{3, 5, 7}, Form::Batched);
    check_matmul(log, gen, dtype, Dims{64, 128, 256}, Form::SharedB);
  }
}

// linear forward (bias in the epilogue) and every gradient.
TEST(GemmGpu, LinearWithAndWithoutBiasMatchesCpu) {
  LT_REQUIRE_GPU();
  WorstError log("GemmGpu.Linear");
  Generator gen(103);
  struct Case {
    Shape x;
    int64_t out;
  };
  const Case cases[] = {
      {{5}, 7}, {{2, 3, 5}, 7}, {{2, 32, 128}, 256}, {{3, 11, 40}, 24}, {{4, 250, 1024}, 4096}};
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const Case& c : cases) {
      for (bool with_bias : {false, true}) {
        const std::string what = std::string(dtype_name(dtype)) + " x" + shape_str(c.x) + " out " +
                                 std::to_string(c.out) + (with_bias ? " bias" : " no bias");
        SCOPED_TRACE(what);
        const int64_t in = c.x.back();
        Shape y_shape = c.x;
        y_shape.back() = c.out;
        const Tensor x = Tensor::randn(c.x, gen, dtype);
        const Tensor w = Tensor::randn({c.out, in}, gen, dtype, 1.0 / std::sqrt(double(in)));
        const Tensor bias = with_bias ? Tensor::randn({c.out}, gen, dtype) : Tensor();
        const Tensor g = Tensor::randn(y_shape, gen, dtype);
        const Tensor xg = x.to(gpu()), wg = w.to(gpu()), gg = g.to(gpu());
        const Tensor bg = with_bias ? bias.to(gpu()) : Tensor();
        log.check(ops::linear(xg, wg, bg), ops::linear(x, w, bias), what + " forward");
        const ops::LinearGrads on_gpu = ops::linear_backward(gg, xg, wg, true, true, true);
        const ops::LinearGrads on_cpu = ops::linear_backward(g, x, w, true, true, true);
        log.check(on_gpu.x, on_cpu.x, what + " grad x");
        log.check(on_gpu.weight, on_cpu.weight, what + " grad weight");
        log.check(on_gpu.bias, on_cpu.bias, what + " grad bias");
      }
    }
  }
}

// Views cuBLASLt reads in place at odd offsets and leading dimensions, and
// views it cannot address (copied first).
TEST(GemmGpu, StridedViewsMatchCpu) {
  LT_REQUIRE_GPU();
  WorstError log("GemmGpu.StridedViews");
  Generator gen(104);
  for (DType dtype : {DType::F32, DType::BF16}) {
    const std::string dt = dtype_name(dtype);
    auto both = [&](const Tensor& cpu_base, auto&& make_view) {
      return std::make_pair(make_view(cpu_base), make_view(cpu_base.to(gpu())));
    };
    // A column slice at an odd offset (ld 11, pointer not 16-byte aligned)
    // times a column-stepped view (stride 2: copied first).
    auto [rows_c, rows_g] =
        both(Tensor::randn({9, 11}, gen, dtype), [](const Tensor& t) { return t.slice(1, 1, 8); });
    auto [step_c, step_g] = both(Tensor::randn({7, 8}, gen, dtype),
                                 [](const Tensor& t) { return t.slice(1, 0, 8, 2); });
    log.check(ops::matmul(rows_g, step_g), ops::matmul(rows_c, step_c), dt + " slice @ step");
    // A permuted batch that does not fold into rows, with a shared b.
    auto [perm_c, perm_g] = both(Tensor::randn({5, 4, 7}, gen, dtype), [](const Tensor& t) {
      return t.permute({1, 0, 2});
    });
    const Tensor b = Tensor::randn({7, 3}, gen, dtype);
    log.check(ops::matmul(perm_g, b.to(gpu())), ops::matmul(perm_c, b), dt + " permuted batch");
    // The same permuted batch against a batched b, and summed (grad b).
    const Tensor bb = Tensor::randn({4, 7, 3}, gen, dtype);
    log.check(ops::matmul(perm_g, bb.to(gpu())), ops::matmul(perm_c, bb), dt + " permuted batched");
    const Tensor g = Tensor::randn({4, 5, 3}, gen, dtype);
    log.check(ops::matmul_backward_b(g.to(gpu()), perm_g, false, false, true),
              ops::matmul_backward_b(g, perm_c, false, false, true), dt + " permuted summed");
    // Transposed batched views with both trans flags: op(a) and op(b) are
    // contiguous matrices again, read through the transpose flags.
    auto [at_c, at_g] = both(Tensor::randn({3, 6, 10}, gen, dtype),
                             [](const Tensor& t) { return t.transpose(1, 2); });
    auto [bt_c, bt_g] = both(Tensor::randn({3, 10, 4}, gen, dtype),
                             [](const Tensor& t) { return t.transpose(1, 2); });
    log.check(ops::matmul(at_g, bt_g, true, true), ops::matmul(at_c, bt_c, true, true),
              dt + " transposed batched");
  }
}

TEST(GemmGpu, EmptyProductsAndZeroInner) {
  LT_REQUIRE_GPU();
  Generator gen(105);
  const Tensor a = Tensor::randn({4, 0}, gen).to(gpu());
  const Tensor b = Tensor::randn({0, 3}, gen).to(gpu());
  const Tensor y = ops::matmul(a, b);
  ASSERT_EQ(y.shape(), (Shape{4, 3}));
  for (double v : y.to_doubles()) EXPECT_EQ(v, 0.0);
  const Tensor bias = Tensor::randn({3}, gen);
  const Tensor yl = ops::linear(a, Tensor::empty({3, 0}, DType::F32, gpu()), bias.to(gpu()));
  const std::vector<double> bv = bias.to_doubles(), yv = yl.to_doubles();
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_EQ(yv[i], bv[i % 3]);
  EXPECT_EQ(ops::matmul(Tensor::empty({0, 5}, DType::BF16, gpu()),
                        Tensor::empty({5, 2}, DType::BF16, gpu()))
                .shape(),
            (Shape{0, 2}));
}

// Products run on the current stream, each with its own workspace.
TEST(GemmGpu, RunsOnTheCurrentStream) {
  LT_REQUIRE_GPU();
  WorstError log("GemmGpu.Streams");
  Generator gen(106);
  const Tensor a = Tensor::randn({256, 512}, gen, DType::BF16);
  const Tensor b = Tensor::randn({512, 384}, gen, DType::BF16);
  const Tensor expected = ops::matmul(a, b);
  Stream s1 = Stream::create(gpu()), s2 = Stream::create(gpu());
  Tensor y1, y2;
  {
    StreamGuard guard(s1);
    y1 = ops::matmul(a.to(gpu()), b.to(gpu()));
  }
  {
    StreamGuard guard(s2);
    y2 = ops::matmul(a.to(gpu()), b.to(gpu()));
  }
  s1.synchronize();
  s2.synchronize();
  log.check(y1, expected, "stream 1");
  log.check(y2, expected, "stream 2");
}

// ---------------------------------------------------------------- casts and copies

// NaN compares equal to NaN here: the bit patterns of a NaN may differ
// between the CPU's rounding and CUDA's, and both are NaN.
void expect_same_values(const Tensor& on_gpu, const Tensor& on_cpu, const std::string& what) {
  ASSERT_EQ(on_gpu.shape(), on_cpu.shape()) << what;
  ASSERT_EQ(on_gpu.dtype(), on_cpu.dtype()) << what;
  const std::vector<double> g = on_gpu.to_doubles(), c = on_cpu.to_doubles();
  size_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool same = (std::isnan(g[i]) && std::isnan(c[i])) ||
                      (g[i] == c[i] && std::signbit(g[i]) == std::signbit(c[i]));
    if (!same && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " " << g[i] << " vs " << c[i];
  }
  EXPECT_EQ(bad, 0u) << what;
}

Tensor cast_inputs(Generator& gen) {
  std::vector<double> v = {0.0,
                           -0.0,
                           1.0,
                           -1.5,
                           1.00390625,  // halfway between two bf16 values: ties to even
                           1.01171875,  // the other tie direction
                           65504.0,
                           1e-40,  // f32 subnormal
                           3.0e38,
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN()};
  for (int i = 0; i < 1000; ++i) v.push_back(gen.normal() * std::pow(10.0, gen.uniform(-6, 6)));
  return Tensor::from_doubles(v, {static_cast<int64_t>(v.size())}, DType::F32);
}

TEST(CastGpu, RoundTripsMatchCpuConversions) {
  LT_REQUIRE_GPU();
  Generator gen(107);
  const Tensor x = cast_inputs(gen);
  const Tensor xg = x.to(gpu());
  for (DType to : {DType::BF16, DType::F16, DType::F64}) {
    const std::string what = std::string("f32 -> ") + dtype_name(to);
    const Tensor there = xg.to(to);
    EXPECT_TRUE(there.device().is_cuda());
    expect_same_values(there, x.to(to), what);
    expect_same_values(there.to(DType::F32), x.to(to).to(DType::F32), what + " -> f32");
  }
  expect_same_values(xg.to(DType::BF16).to(DType::F16), x.to(DType::BF16).to(DType::F16),
                     "bf16 -> f16");
  // bf16 -> f32 -> bf16 is exact.
  const Tensor h = x.to(DType::BF16);
  expect_same_values(h.to(gpu()).to(DType::F32).to(DType::BF16), h, "bf16 round trip");
}

TEST(CastGpu, ContiguousOfTransposedAndStridedViews) {
  LT_REQUIRE_GPU();
  Generator gen(108);
  for (DType dtype : {DType::F32, DType::BF16}) {
    const std::string dt = dtype_name(dtype);
    const Tensor base = Tensor::randn({6, 9, 13}, gen, dtype);
    const Tensor bg = base.to(gpu());
    const Tensor t = bg.transpose(1, 2).contiguous();
    EXPECT_TRUE(t.is_contiguous());
    EXPECT_TRUE(t.device().is_cuda());
    expect_same_values(t, base.transpose(1, 2).contiguous(), dt + " transpose");
    expect_same_values(bg.permute({2, 0, 1}).contiguous(), base.permute({2, 0, 1}).contiguous(),
                       dt + " permute");
    expect_same_values(bg.slice(2, 1, 12, 3).clone(), base.slice(2, 1, 12, 3).clone(),
                       dt + " stepped slice");
    // Off the device straight from a view, and a dtype change with strides.
    expect_same_values(bg.transpose(0, 2).to(Device::cpu()), base.transpose(0, 2).contiguous(),
                       dt + " to cpu");
    expect_same_values(bg.transpose(0, 1).to(DType::F32), base.transpose(0, 1).to(DType::F32),
                       dt + " strided cast");
    // copy_ broadcasting into a strided destination, across dtypes.
    const Tensor row = Tensor::randn({13}, gen, DType::F32);
    Tensor dst = Tensor::zeros({9, 6, 13}, dtype, gpu());
    dst.transpose(0, 1).copy_(row.to(gpu()));
    Tensor expected = Tensor::zeros({9, 6, 13}, dtype);
    expected.transpose(0, 1).copy_(row);
    expect_same_values(dst, expected, dt + " broadcast copy_");
    // copy_ from the host into a strided GPU view.
    Tensor dst2 = Tensor::zeros({13, 9}, dtype, gpu());
    dst2.transpose(0, 1).copy_(base.select(0, 2));
    expect_same_values(dst2, base.select(0, 2).transpose(0, 1).contiguous(), dt + " host copy_");
    // fill_ on a strided view.
    Tensor filled = Tensor::zeros({4, 5}, dtype, gpu());
    filled.slice(1, 0, 5, 2).fill_(2.5);
    Tensor filled_cpu = Tensor::zeros({4, 5}, dtype);
    filled_cpu.slice(1, 0, 5, 2).fill_(2.5);
    expect_same_values(filled, filled_cpu, dt + " fill_");
    expect_same_values(Tensor::full({3, 3}, -7.25, dtype, gpu()),
                       Tensor::full({3, 3}, -7.25, dtype), dt + " full");
  }
}

// ---------------------------------------------------------------- benchmark

// Median milliseconds per call of `fn`, over `samples` timings of `batch`
// calls enqueued back to back after `warmup` calls. Back to back, as in
// training, the host enqueues the next product while the GPU runs the last
// one, so the figure is the GPU's; timing single calls would also count the
// host's enqueue time (descriptors, allocation: microseconds), which is
// several percent of a 0.1 ms product.
template <typename Fn>
double median_ms(Fn&& fn, int warmup = 3, int samples = 15, int batch = 5) {
  const Stream stream = current_stream(gpu());
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < samples; ++i) {
    Event start(true), end(true);
    start.record(stream);
    for (int j = 0; j < batch; ++j) fn();
    end.record(stream);
    end.synchronize();
    ms.push_back(start.elapsed_ms(end) / batch);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void report(const char* what, double flops, double ms) {
  std::printf("  %-44s %9.3f ms %8.1f TFLOP/s\n", what, ms, flops / (ms * 1e-3) / 1e12);
}

// bf16 8192^3, and the products of one Qwen2.5-3B-shaped layer over 8192
// tokens (hidden 2048, 16/2 heads of 128, FFN 11008): forward, input
// gradient and weight gradient of each projection. DEVICE.md has cuBLAS at
// 788 TFLOP/s on 8192^3 and 762-810 on layer shapes.
TEST(GemmBench, Throughput) {
  LT_REQUIRE_GPU();
  const char* on = std::getenv("LT_BENCH");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "set LT_BENCH=1 to run";
  Generator gen(109);
  // Random [rows, cols] matrices from a block of at most 256 random rows
  // repeated down the matrix: drawing hundreds of millions of values on the
  // host would cost more than the whole benchmark, and the repetition does
  // not change what the tensor cores do.
  auto rand_gpu = [&](const Shape& s, DType t) {
    if (s.size() != 2 || s[0] % 256 != 0) {
      return Tensor::uniform(s, gen, -1, 1, DType::F32).to(gpu()).to(t);
    }
    const Tensor block = Tensor::uniform({256, s[1]}, gen, -1, 1, DType::F32).to(gpu());
    Tensor out = Tensor::empty(s, t, gpu());
    out.view({s[0] / 256, 256, s[1]}).copy_(block);
    return out;
  };
  std::printf("GemmBench (median of 15 timings of 5 back-to-back calls, CUDA events):\n");
  {
    const int64_t n = 8192;
    const Tensor a = rand_gpu({n, n}, DType::BF16), b = rand_gpu({n, n}, DType::BF16);
    report("bf16 8192x8192x8192", 2.0 * n * n * n, median_ms([&] { ops::matmul(a, b); }));
    const Tensor af = rand_gpu({n, n}, DType::F32), bf = rand_gpu({n, n}, DType::F32);
    report("f32 (TF32) 8192x8192x8192", 2.0 * n * n * n, median_ms([&] { ops::matmul(af, bf); }));
  }
  const int64_t tokens = 8192, hidden = 2048, ffn = 11008, kv = 2 * 128;
  struct Proj {
    const char* name;
    int64_t in, out;
    bool bias;
  };
  const Proj projs[] = {{"qkv (bias)", hidden, hidden + 2 * kv, true},
                        {"o", hidden, hidden, false},
                        {"gate+up", hidden, 2 * ffn, false},
                        {"down", ffn, hidden, false}};
  double total_flops = 0, total_ms = 0;
  for (const Proj& p : projs) {
    const Tensor x = rand_gpu({tokens, p.in}, DType::BF16);
    const Tensor w = rand_gpu({p.out, p.in}, DType::BF16);
    const Tensor b = p.bias ? rand_gpu({p.out}, DType::BF16) : Tensor();
    const Tensor g = rand_gpu({tokens, p.out}, DType::BF16);
    const double flops = 2.0 * tokens * p.in * p.out;
    const double fwd = median_ms([&] { ops::linear(x, w, b); });
    const double dx = median_ms([&] { ops::linear_backward(g, x, w, true, false, false); });
    const double dw = median_ms([&] { ops::linear_backward(g, x, w, false, true, false); });
    const std::string name = std::string(p.name) + " " + std::to_string(tokens) + "x" +
                             std::to_string(p.in) + "x" + std::to_string(p.out);
    report((name + " fwd").c_str(), flops, fwd);
    report((name + " dx").c_str(), flops, dx);
    report((name + " dW").c_str(), flops, dw);
    total_flops += 3 * flops;
    total_ms += fwd + dx + dw;
  }
  report("layer total (fwd + dx + dW)", total_flops, total_ms);
}

}  // namespace
}  // namespace lt
