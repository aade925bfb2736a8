// Blockwise 8-bit AdamW: the dynamic code tables, quantization error against
// a float64 reference, one update against a float64 transcription of the
// same algorithm, the hybrid split, checkpoint state, and convergence parity
// with the fp32 AdamW through the trainer.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "nn/module.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "optim/adamw8bit_kernel.h"
#include "optim/kernels_simd.h"
#include "support/gradcheck.h"
#include "train/train_helpers.h"

namespace lt::optim {
namespace {

using testing::all_close;

const std::array<double, 256>& code64(bool is_signed) {
  static const auto s = detail::make_code(true);
  static const auto u = detail::make_code(false);
  return is_signed ? s : u;
}

TEST(Code8, TablesAreSortedDistinctAndSpanTheirRange) {
  for (bool is_signed : {true, false}) {
    const auto& d = code64(is_signed);
    const Code8& f = is_signed ? signed_code() : unsigned_code();
    for (size_t i = 1; i < 256; ++i) {
      EXPECT_LT(d[i - 1], d[i]) << i;
      EXPECT_LT(f[i - 1], f[i]) << i;  // still distinct after rounding to f32
    }
    EXPECT_EQ(d[255], 1.0);
    EXPECT_EQ(f[255], 1.0f);
    EXPECT_NE(std::find(d.begin(), d.end(), 0.0), d.end());
    if (is_signed) {
      EXPECT_EQ(d[0], -1.0);
      EXPECT_EQ(f[0], -1.0f);
    } else {
      EXPECT_EQ(d[0], 0.0);
    }
  }
  // The top tier: 64 (signed) / 128 (unsigned) evenly spaced values in (0.1, 1].
  const auto& s = code64(true);
  EXPECT_NEAR(s[255] - s[254], 0.9 / 64, 1e-15);
  const auto& u = code64(false);
  EXPECT_NEAR(u[255] - u[254], 0.9 / 128, 1e-15);
  EXPECT_NEAR(u[1], 1e-7, 1e-22);  // the smallest unsigned step
}

// Error bound for one element: rounding to nearest errs by at most half the
// gap between the two table values around x/absmax (see the kernel header:
// 0.45 * 10^-E / 2^F of the absmax in tier E). The f32 arithmetic (x/absmax,
// code*scale) adds a few ulps of |x|, allowed as 4e-7 * |x|; values beyond
// the table's ends cannot occur (|x| <= absmax).
double gap_at(const std::array<double, 256>& code, double y) {
  auto it = std::lower_bound(code.begin(), code.end(), y);
  if (it == code.begin()) return code[1] - code[0];
  if (it == code.end()) return code[255] - code[254];
  return *it - *(it - 1);
}

void check_quantize(const std::vector<float>& x, bool is_signed, int64_t block, const char* what) {
  const Code8& code = is_signed ? signed_code() : unsigned_code();
  const auto& d = code64(is_signed);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(x.size());
  std::vector<float> back(x.size());
  double worst_ratio = 0, top_tier_worst = 0;
  for (int64_t b = 0; b < n; b += block) {
    const int64_t len = std::min(block, n - b);
    const float scale = quantize_block(code, x.data() + b, q.data() + b, len);
    dequantize_block(code, q.data() + b, scale, back.data() + b, len);
    double absmax = 0;
    for (int64_t i = b; i < b + len; ++i) absmax = std::max(absmax, std::abs(double(x[i])));
    EXPECT_EQ(double(scale), absmax) << what;
    for (int64_t i = b; i < b + len; ++i) {
      const double xi = x[i];
      const double err = std::abs(double(back[i]) - xi);
      const double bound = 0.5 * gap_at(d, xi / absmax) * absmax + 4e-7 * std::abs(xi);
      ASSERT_LE(err, bound) << what << " element " << i << " x=" << xi << " absmax=" << absmax;
      worst_ratio = std::max(worst_ratio, err / bound);
      if (std::abs(xi) / absmax > 0.1) top_tier_worst = std::max(top_tier_worst, err / absmax);
    }
  }
  // In the top tier the step is 0.9/2^F: the error is <= 0.45/2^F of absmax.
  const double f_top = is_signed ? 64 : 128;
  EXPECT_LE(top_tier_worst, 0.45 / f_top + 1e-6) << what;
  EXPECT_GT(worst_ratio, 0.5) << what << ": the bound is far from tight, suspicious";
}

TEST(Code8, QuantizeDequantizeErrorWithinHalfSpacingOnNormalAndHeavyTailedData) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::student_t_distribution<float> t2(2.0f);  // heavy tails: infinite variance
  std::cauchy_distribution<float> cauchy(0.0f, 1.0f);
  const int64_t n = 5 * 2048 + 77;
  std::vector<float> a(n), b(n), c(n), sq(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = normal(rng);
    b[i] = t2(rng);
    c[i] = cauchy(rng);
    sq[i] = c[i] * c[i] * 1e-6f;  // like v: non-negative, spanning many decades
  }
  for (int64_t block : {int64_t{2048}, int64_t{256}}) {
    check_quantize(a, true, block, "normal");
    check_quantize(b, true, block, "student-t(2)");
    check_quantize(c, true, block, "cauchy");
    check_quantize(sq, false, block, "cauchy^2 (unsigned)");
  }
}

// An order-preserving map of f32 (not NaN) to uint32, and back.
uint32_t order_key(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
float from_order_key(uint32_t k) {
  const uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Walks every f32 in [lo, hi] upwards, keeping the nearest rank by
// quantize_nearest's own f32 rule (d_hi < d_lo, or a tie going to the
// smaller magnitude), and compares the fast path wherever it answers, and
// the vector quantizers of this CPU on every value of magnitude <= 1 (in
// runs with 1.0 appended: the absmax is 1, so the quotient is the value).
// Returns how many values the fast path declined (near-ties).
int64_t check_every_float(const Code8& code, float lo, float hi) {
  const Code8Segments& segments = segments_of(code);
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    if (isa_supported(isa)) isas.push_back(isa);
  const uint32_t first = order_key(lo), last = order_key(hi);
  const int64_t count = int64_t{last} - int64_t{first} + 1;
  std::atomic<int64_t> declined{0}, wrong{0}, vector_wrong{0};
  std::atomic<uint32_t> first_wrong{0}, first_vector_wrong{0};
  parallel_for(0, count, int64_t{1} << 22, [&](int64_t begin, int64_t end) {
    size_t r = quantize_nearest(code, from_order_key(first + static_cast<uint32_t>(begin)));
    int64_t local_declined = 0;
    std::vector<float> run;
    std::vector<uint8_t> want, got;
    run.reserve(static_cast<size_t>(end - begin) + 1);
    want.reserve(run.capacity());
    for (int64_t i = begin; i < end; ++i) {
      const float x = from_order_key(first + static_cast<uint32_t>(i));
      while (r < 255) {
        const float d_lo = x - code[r], d_hi = code[r + 1] - x;
        if (d_hi < d_lo || (d_hi == d_lo && std::abs(code[r + 1]) < std::abs(code[r]))) {
          ++r;
        } else {
          break;
        }
      }
      uint8_t fast;
      if (!segment_rank(segments, x, fast)) {
        ++local_declined;
      } else if (fast != r) {
        if (wrong++ == 0) first_wrong = first + static_cast<uint32_t>(i);
      }
      if (std::abs(x) <= 1.0f) {
        run.push_back(x);
        want.push_back(static_cast<uint8_t>(r));
      }
    }
    run.push_back(1.0f);
    want.push_back(255);
    got.resize(run.size());
    for (Isa isa : isas) {
      EXPECT_EQ(quantize_block(isa, code, run.data(), got.data(), static_cast<int64_t>(run.size())),
                1.0f);
      for (size_t k = 0; k < run.size(); ++k) {
        if (got[k] != want[k] && vector_wrong++ == 0) first_vector_wrong = order_key(run[k]);
      }
    }
    declined += local_declined;
  });
  EXPECT_EQ(wrong.load(), 0) << "first at x = " << from_order_key(first_wrong.load());
  EXPECT_EQ(vector_wrong.load(), 0) << "first at x = " << from_order_key(first_vector_wrong.load());
  return declined.load();
}

// The kernels' segment search (segment_rank, and the vector quantizers)
// returns exactly the reference search's rank: on every f32 of magnitude
// in [2^-27, 1 + 4 ulp] (vector: to 1) on both sides of 0 (below 2^-27 only
// 0 is near; spot checks there), and it declines few values (near-ties).
TEST(Code8, SegmentSearchEqualsTheReferenceOnEveryFloat) {
  const float one_up = std::nextafter(std::nextafter(1.0f, 2.0f), 2.0f);
  const float top = std::nextafter(std::nextafter(one_up, 2.0f), 2.0f);
  const float small = std::ldexp(1.0f, -27);
  int64_t declined = check_every_float(signed_code(), small, top);
  declined += check_every_float(signed_code(), -top, -small);
  declined += check_every_float(unsigned_code(), small, top);
  const int64_t checked = 3 * (int64_t{order_key(top)} - int64_t{order_key(small)} + 1);
  EXPECT_LT(declined, checked / 500) << "the fast path declines too often";
  for (const Code8* code : {&signed_code(), &unsigned_code()}) {
    std::vector<float> xs = {0.0f,    -0.0f,  1e-30f,
                             -1e-30f, 1e-40f, -1e-40f,
                             small,   -small, std::numeric_limits<float>::quiet_NaN()};
    for (int e = -149; e < -27; ++e) xs.push_back(std::ldexp(1.3f, e));
    for (float x : xs) {
      ASSERT_EQ(quantize_nearest_fast(segments_of(*code), x), quantize_nearest(*code, x)) << x;
    }
  }
}

TEST(Code8, AllZeroBlockHasScaleZeroAndDequantizesToZero) {
  std::vector<float> x(100, 0.0f), back(100, 1.0f);
  std::vector<uint8_t> q(100);
  for (const Code8* code : {&signed_code(), &unsigned_code()}) {
    EXPECT_EQ(quantize_block(*code, x.data(), q.data(), 100), 0.0f);
    dequantize_block(*code, q.data(), 0.0f, back.data(), 100);
    for (float v : back) EXPECT_EQ(v, 0.0f);
  }
}

Tensor make_grad(const Shape& shape, std::mt19937_64& rng, double scale) {
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  for (double& x : v) x = normal(rng);
  return Tensor::from_doubles(v, shape, DType::F32);
}

// One step of the same algorithm in float64 from the optimizer's state:
// dequantize (codes and scales as stored: m and sqrt(v)), update as torch's
// AdamW, then requantize m and sqrt(v) with the float64 block absmax. Codes must agree except where
// the float64 value sits at a tie between two codes, to the precision of
// the f32 arithmetic (relative 1e-5 of the value).
TEST(AdamW8bit, OneStepMatchesFloat64ReferenceOfTheSameAlgorithm) {
  const int64_t block = 2048;
  const Shape shape{3, 2048 + 41};  // three full blocks and a partial one
  Generator gen(3);
  Tensor p = nn::make_parameter(Tensor::randn(shape, gen), "w");
  const AdamWOptions o{.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
  AdamW8bit opt({{"w", p}}, o, {}, {.block_size = block, .min_8bit_numel = 1});
  ASSERT_TRUE(opt.is_quantized(0));
  std::mt19937_64 rng(5);
  for (int s = 0; s < 3; ++s) {  // non-trivial moments first
    p.set_grad(make_grad(shape, rng, 0.5));
    opt.step(2e-2, 1.0);
  }
  // Snapshot the state before step 4.
  NamedTensors before = opt.state();
  std::vector<double> mc = before[0].second.to_doubles(), ms = before[1].second.to_doubles(),
                      vc = before[2].second.to_doubles(), vs = before[3].second.to_doubles();
  std::vector<double> pd = p.to_doubles();
  Tensor g = make_grad(shape, rng, 0.5);
  // A few huge and tiny gradients stress the code's ends.
  std::vector<double> gd = g.to_doubles();
  gd[10] = 40.0;
  gd[3000] = -1e-9;
  g = Tensor::from_doubles(gd, shape, DType::F32);
  p.set_grad(g);
  const double lr = 7e-3, gs = 0.6;
  opt.step(lr, gs);

  const int64_t n = p.numel();
  const auto& sc = code64(true);
  const auto& uc = code64(false);
  const double t = 4;
  const double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
  std::vector<double> m(n), v(n), pr(n);
  for (int64_t i = 0; i < n; ++i) {
    const size_t b = static_cast<size_t>(i / block);
    const double gi = gd[i] * gs;
    m[i] = sc[static_cast<size_t>(mc[i])] * ms[b];
    v[i] = std::pow(uc[static_cast<size_t>(vc[i])] * vs[b], 2);  // stored: sqrt(v)
    pr[i] = pd[i] - lr * o.weight_decay * pd[i];
    m[i] = o.beta1 * m[i] + (1 - o.beta1) * gi;
    v[i] = o.beta2 * v[i] + (1 - o.beta2) * gi * gi;
    pr[i] -= lr * (m[i] / bc1) / (std::sqrt(v[i] / bc2) + o.eps);
  }
  EXPECT_TRUE(all_close(p.to_doubles(), pr, 1e-6, 1e-5));

  NamedTensors after = opt.state();
  const std::vector<double> mc2 = after[0].second.to_doubles(), ms2 = after[1].second.to_doubles(),
                            vc2 = after[2].second.to_doubles(), vs2 = after[3].second.to_doubles();
  int64_t ties = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const auto& code = pass == 0 ? sc : uc;
    std::vector<double> x = m;
    if (pass == 1)
      for (int64_t i = 0; i < n; ++i) x[i] = std::sqrt(v[i]);
    const std::vector<double>& codes = pass == 0 ? mc2 : vc2;
    const std::vector<double>& scales = pass == 0 ? ms2 : vs2;
    for (int64_t b = 0; b * block < n; ++b) {
      const int64_t end = std::min(n, (b + 1) * block);
      double absmax = 0;
      for (int64_t i = b * block; i < end; ++i) absmax = std::max(absmax, std::abs(x[i]));
      EXPECT_NEAR(scales[b], absmax, 1e-6 * absmax) << "pass " << pass << " block " << b;
      for (int64_t i = b * block; i < end; ++i) {
        const double y = x[i] / absmax;
        const uint8_t want = quantize_nearest(code, y);
        const auto got = static_cast<uint8_t>(codes[i]);
        if (got == want) continue;
        // Only a tie may differ: y at the midpoint of the two codes.
        ASSERT_EQ(std::abs(int(got) - int(want)), 1) << "pass " << pass << " element " << i;
        const double mid = 0.5 * (code[got] + code[want]);
        EXPECT_LE(std::abs(y - mid), 1e-5 * std::abs(y) + 1e-12)
            << "pass " << pass << " element " << i << " y=" << y << " codes " << int(got) << " vs "
            << int(want);
        ++ties;
      }
    }
  }
  EXPECT_LE(ties, n / 1000) << "too many near-tie disagreements";
}

TEST(AdamW8bit, HybridSplitCountsParametersPerPath) {
  Generator gen(1);
  nn::NamedParameters params;
  for (const auto& [name, shape] : std::vector<std::pair<std::string, Shape>>{
           {"embed.weight", {64, 128}},   // 8192: 8-bit
           {"big.weight", {4096}},        // exactly the threshold: 8-bit
           {"mid.weight", {4095}},        // just below: fp32
           {"layer.norm.weight", {128}},  // fp32
           {"layer.bias", {10}}}) {       // fp32
    params.emplace_back(name, nn::make_parameter(Tensor::randn(shape, gen), name));
  }
  AdamW8bit opt(params, {}, {"bias", "norm"});
  const AdamW8bit::Split s = opt.split();
  EXPECT_EQ(s.quantized, 8192 + 4096);
  EXPECT_EQ(s.fp32, 4095 + 128 + 10);
  EXPECT_TRUE(opt.is_quantized(0));
  EXPECT_TRUE(opt.is_quantized(1));
  EXPECT_FALSE(opt.is_quantized(2));
  EXPECT_FALSE(opt.is_quantized(3));
  // State: 5 entries per 8-bit tensor, 3 per fp32 one, plus "step"; 8192
  // elements in blocks of 2048 are 4 scales.
  NamedTensors st = opt.state();
  EXPECT_EQ(st.size(), 5u * 2 + 3u * 3 + 1);
  EXPECT_EQ(st[0].first, "embed.weight.exp_avg.codes");
  EXPECT_EQ(st[0].second.dtype(), DType::U8);
  EXPECT_EQ(st[1].first, "embed.weight.exp_avg.scales");
  EXPECT_EQ(st[1].second.numel(), 4);
  EXPECT_EQ(st[10].first, "mid.weight.exp_avg");
  EXPECT_EQ(st.back().first, "step");
}

// The fp32 path is the fp32 AdamW itself: bitwise the same updates.
TEST(AdamW8bit, SmallTensorsUpdateBitwiseLikeAdamW) {
  Generator gen(2);
  Tensor a = nn::make_parameter(Tensor::randn({7, 9}, gen), "a.weight");
  Tensor b = nn::make_parameter(a.clone(), "a.weight");
  const AdamWOptions o{.lr = 1e-2, .weight_decay = 0.1};
  AdamW ref({{"a.weight", a}}, o);
  AdamW8bit opt({{"a.weight", b}}, o);
  ASSERT_FALSE(opt.is_quantized(0));
  std::mt19937_64 rng(3);
  for (int s = 0; s < 4; ++s) {
    Tensor g = make_grad({7, 9}, rng, 1.0);
    a.set_grad(g);
    b.set_grad(g.clone());
    ref.step(1e-2, 0.5);
    opt.step(1e-2, 0.5);
  }
  const auto x = a.to_doubles(), y = b.to_doubles();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], y[i]) << i;
}

NamedTensors deep_copy(const NamedTensors& s) {
  NamedTensors out;
  for (const auto& [name, t] : s) out.emplace_back(name, t.clone());
  return out;
}

void expect_bitwise_equal(const Tensor& x, const Tensor& y, const std::string& what) {
  ASSERT_EQ(x.dtype(), y.dtype()) << what;
  ASSERT_EQ(x.numel(), y.numel()) << what;
  Tensor cx = x.contiguous(), cy = y.contiguous();
  EXPECT_EQ(std::memcmp(cx.data_ptr(), cy.data_ptr(), x.numel() * dtype_size(x.dtype())), 0)
      << what;
}

TEST(AdamW8bit, StateRoundTripIsBitExactAndResumesIdentically) {
  Generator gen(4);
  const std::vector<std::pair<std::string, Shape>> specs = {
      {"w", {5000}}, {"u", {3, 3000}}, {"n.bias", {17}}};
  nn::NamedParameters pa, pb;
  for (const auto& [name, shape] : specs) {
    Tensor t = Tensor::randn(shape, gen);
    pa.emplace_back(name, nn::make_parameter(t.clone(), name));
    pb.emplace_back(name, nn::make_parameter(t.clone(), name));
  }
  const AdamWOptions o{.lr = 1e-2, .weight_decay = 0.05};
  const AdamW8bitOptions o8{.block_size = 1024, .min_8bit_numel = 4096};
  AdamW8bit a(pa, o, {"bias"}, o8);
  AdamW8bit b(pb, o, {"bias"}, o8);
  std::mt19937_64 rng(9);
  auto grads = [&] {
    std::vector<Tensor> g;
    for (const auto& [name, shape] : specs) g.push_back(make_grad(shape, rng, 1.0));
    return g;
  };
  for (int s = 0; s < 3; ++s) {
    auto g = grads();
    for (size_t i = 0; i < pa.size(); ++i) pa[i].second.set_grad(g[i]);
    a.step(1e-2, 1.0);
  }
  // b gets a's parameters and state; then both take the same step.
  NamedTensors saved = deep_copy(a.state());
  for (size_t i = 0; i < pa.size(); ++i) pb[i].second.copy_(pa[i].second);
  b.load_state(saved);
  EXPECT_EQ(b.step_count(), 3);
  NamedTensors loaded = b.state();
  ASSERT_EQ(loaded.size(), saved.size());
  for (size_t k = 0; k < saved.size(); ++k) {
    EXPECT_EQ(loaded[k].first, saved[k].first);
    expect_bitwise_equal(loaded[k].second, saved[k].second, saved[k].first);
  }
  auto g = grads();
  for (size_t i = 0; i < pa.size(); ++i) {
    pa[i].second.set_grad(g[i]);
    pb[i].second.set_grad(g[i].clone());
  }
  a.step(5e-3, 0.8);
  b.step(5e-3, 0.8);
  for (size_t i = 0; i < pa.size(); ++i)
    expect_bitwise_equal(pa[i].second, pb[i].second, pa[i].first);
  NamedTensors sa = a.state(), sb = b.state();
  for (size_t k = 0; k < sa.size(); ++k)
    expect_bitwise_equal(sa[k].second, sb[k].second, sa[k].first);

  // An fp32 AdamW checkpoint is refused, and the refusal changes nothing.
  AdamW fp32(pa, o, {"bias"});
  EXPECT_THROW(b.load_state(fp32.state()), Error);
  NamedTensors sb2 = b.state();
  for (size_t k = 0; k < sb.size(); ++k)
    expect_bitwise_equal(sb[k].second, sb2[k].second, sb[k].first);
}

// One 8-bit parameter "w" (5000 elements, blocks of 1024) after one step.
struct SteppedOnce {
  Generator gen{5};
  Tensor p = nn::make_parameter(Tensor::randn({5000}, gen), "w");
  AdamW8bit opt{{{"w", p}}, {}, {}, {.block_size = 1024, .min_8bit_numel = 1}};
  SteppedOnce() {
    std::mt19937_64 rng(6);
    p.set_grad(make_grad({5000}, rng, 1.0));
    opt.step(1e-3, 1.0);
  }
};

// The layout before the second moment was stored as sqrt(v) named v's codes
// "<name>.exp_avg_sq.codes"; the same bytes would mean something else now,
// so such a checkpoint is refused by name and changes nothing.
TEST(AdamW8bit, LoadStateRefusesTheEarlierLayoutOfV) {
  SteppedOnce stepped;
  AdamW8bit& opt = stepped.opt;
  const NamedTensors current = deep_copy(opt.state());
  NamedTensors earlier;
  for (const auto& [name, t] : current) {
    std::string old_name = name;
    const std::string prefix = "w.sqrt_exp_avg_sq.";
    if (name.rfind(prefix, 0) == 0) old_name = "w.exp_avg_sq." + name.substr(prefix.size());
    earlier.emplace_back(old_name, t.clone());
  }
  ASSERT_NE(earlier[2].first, current[2].first);
  try {
    opt.load_state(earlier);
    FAIL() << "the earlier layout was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'w.exp_avg_sq.codes'"), std::string::npos) << what;
    EXPECT_NE(what.find("earlier layout"), std::string::npos) << what;
    EXPECT_NE(what.find("sqrt(v)"), std::string::npos) << what;
  }
  const NamedTensors after = opt.state();
  for (size_t k = 0; k < current.size(); ++k)
    expect_bitwise_equal(after[k].second, current[k].second, current[k].first);
  // The current layout loads.
  opt.load_state(current);
}

// A block's scale (the absolute maximum of its moment) that is NaN or
// negative is damage, refused by name before anything changes.
TEST(AdamW8bit, LoadStateRefusesNonFiniteOrNegativeScales) {
  SteppedOnce stepped;
  AdamW8bit& opt = stepped.opt;
  const NamedTensors current = deep_copy(opt.state());
  for (const auto& [field, value] :
       {std::pair{"w.exp_avg.scales", NAN}, std::pair{"w.sqrt_exp_avg_sq.scales", -2.0f}}) {
    NamedTensors damaged = deep_copy(current);
    for (auto& [name, t] : damaged)
      if (name == field) t.data<float>()[3] = value;
    try {
      opt.load_state(damaged);
      ADD_FAILURE() << field << " = " << value << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + field + "' holds"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("at element 3"), std::string::npos) << e.what();
    }
  }
  const NamedTensors after = opt.state();
  for (size_t k = 0; k < current.size(); ++k)
    expect_bitwise_equal(after[k].second, current[k].second, current[k].first);
}

// Convergence parity through the trainer: the llama fixture (its embedding
// and lm_head, 97 x 48 = 4656 elements each, take the 8-bit path; the rest
// is below the 4096 threshold) trained 100 steps on 48 random-token rows
// with adamw and with adamw8bit, same seed and data. Batches of 16 at lr
// 1e-3 keep the loss away from the memorized ~0 regime (where 2% relative
// is meaningless) and the per-step loss smooth enough to compare.
TEST(AdamW8bit, TrainerConvergenceWithinTwoPercentOfAdamW) {
  using namespace lt::train::testing;
  TempDir tmp("adamw8bit");
  write_random_tokens(tmp / "data.jsonl", 48, 97, 21);
  const std::vector<std::string> common = {"train.steps=100", "train.batch_size=16",
                                           "optim.lr=1e-3"};
  auto with = [&](const std::string& name) {
    std::vector<std::string> o = common;
    o.push_back("optim.name=" + name);
    return o;
  };
  const auto fp32 = train_quietly(
      fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "fp32", with("adamw")));
  const auto q8 = train_quietly(
      fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "q8", with("adamw8bit")));
  ASSERT_EQ(fp32.steps_done, 100);
  ASSERT_EQ(q8.steps_done, 100);
  // The mean over the last 10 steps as well as the final step's loss.
  auto tail_mean = [](const std::vector<double>& x) {
    double s = 0;
    for (size_t i = x.size() - 10; i < x.size(); ++i) s += x[i];
    return s / 10;
  };
  const double a = tail_mean(field(read_metrics(tmp / "fp32"), "loss"));
  const double b = tail_mean(field(read_metrics(tmp / "q8"), "loss"));
  std::printf("final loss adamw %.5f adamw8bit %.5f; last-10 mean %.5f vs %.5f\n", fp32.final_loss,
              q8.final_loss, a, b);
  EXPECT_NEAR(q8.final_loss, fp32.final_loss, 0.02 * fp32.final_loss);
  EXPECT_NEAR(b, a, 0.02 * a);
}

// Checkpoints carry the quantized state exactly: 3 steps, save, resume for 3
// more gives bitwise the losses of 6 uninterrupted steps.
TEST(AdamW8bit, TrainerResumeFromCheckpointIsBitwiseLikeAnUninterruptedRun) {
  using namespace lt::train::testing;
  TempDir tmp("adamw8bit_resume");
  write_random_tokens(tmp / "data.jsonl", 12, 97, 11);
  auto overrides = [](int steps) {
    return std::vector<std::string>{"train.steps=" + std::to_string(steps), "train.save_every=3",
                                    "optim.name=adamw8bit", "optim.lr=5e-3"};
  };
  train_quietly(fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "a", overrides(6)));
  train_quietly(fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "b", overrides(3)));
  const auto b = train_quietly(
      fixture_config(fixture("llama"), tmp / "data.jsonl", tmp / "b", overrides(6)), "latest");
  ASSERT_EQ(b.steps_done, 6);
  const std::vector<double> la = field(read_metrics(tmp / "a"), "loss");
  const std::vector<double> lb = field(read_metrics(tmp / "b"), "loss");
  ASSERT_EQ(la.size(), 6u);
  ASSERT_EQ(lb.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(la[i], lb[i]) << "step " << i + 1;
}

}  // namespace
}  // namespace lt::optim
