#pragma once
// Random kernel graphs for the compiler's tests: inputs of random shape
// classes and dtypes, then ops drawn over the values so far. Ops whose raw
// domain is limited get operands that keep them in it (log(1 + x^2),
// a / (1 + b^2), exp of a tanh or of x - row_max(x)), so every value is
// finite. The choices come from `choose`, so the same generator serves
// rapidcheck properties (the CPU tests) and fixed seeds (the GPU tests,
// whose kernels are compiled ahead on another machine and must match).
// With `lookups`, the ops also draw table lookups (compile/graph.h's
// Lookup) at computed indices and at u8 inputs added for them; without,
// the graphs of a seed stay what they were before Lookup existed. With
// `halves`, f16 joins the dtypes of inputs, outputs and casts (where the
// value fits f16's range), and the ops draw i8 inputs times a scale (int8
// values dequantized).
#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "compile/graph.h"

namespace lt::compile::testing {

// An integer in [lo, hi).
using Choose = std::function<int(int lo, int hi)>;

class RandomChain {
 public:
  explicit RandomChain(Choose choose, bool lookups = false, bool halves = false)
      : choose_(std::move(choose)), lookups_(lookups), halves_(halves) {}

  KernelGraph graph;

  void build() {
    const int inputs = choose_(1, 4);
    for (int i = 0; i < inputs; ++i) {
      const ShapeClass shape = i == 0 ? ShapeClass::Full : pick_of(kShapes);
      pool_.push_back({graph.input(shape, pick_dtype(2.0)), 2.0});
    }
    const int ops = choose_(1, 12);
    for (int i = 0; i < ops; ++i) add_op();
    // One to three outputs, the last full or row value always among them
    // (col values cannot be outputs; the first input is full).
    for (auto it = pool_.rbegin(); it != pool_.rend(); ++it) {
      const ShapeClass s = graph.node(it->value.id).shape;
      if (s == ShapeClass::Full || s == ShapeClass::Row) {
        graph.output(it->value, pick_dtype(it->magnitude));
        break;
      }
    }
    const int extra = choose_(0, 3);
    for (int i = 0; i < extra; ++i) {
      const Candidate& c = pick();
      const ShapeClass s = graph.node(c.value.id).shape;
      if (s == ShapeClass::Full || s == ShapeClass::Row) {
        graph.output(c.value, pick_dtype(c.magnitude));
      }
    }
  }

 private:
  // Generated values stay within this magnitude, so f32 never overflows
  // and the first-order bound stays meaningful.
  static constexpr double kMaxMagnitude = 1e6;
  static constexpr ShapeClass kShapes[] = {ShapeClass::Full, ShapeClass::Row, ShapeClass::Col};
  static constexpr DType kDtypes[] = {DType::F32, DType::BF16};
  static constexpr DType kHalvesDtypes[] = {DType::F32, DType::BF16, DType::F16};
  // f16's largest value is 65504: larger values store or cast as f32.
  static constexpr double kF16Largest = 6e4;

  struct Candidate {
    Value value;
    double magnitude;  // an upper bound on |value|
  };

  template <class T, size_t N>
  T pick_of(const T (&options)[N]) {
    return options[choose_(0, static_cast<int>(N))];
  }
  // A storage dtype for a value of at most `magnitude`.
  DType pick_dtype(double magnitude) {
    if (!halves_) return pick_of(kDtypes);
    const DType dtype = pick_of(kHalvesDtypes);
    return dtype == DType::F16 && magnitude > kF16Largest ? DType::F32 : dtype;
  }
  const Candidate& pick() { return pool_[static_cast<size_t>(choose_(0, int(pool_.size())))]; }
  const Candidate* pick_full() {
    std::vector<const Candidate*> full;
    for (const Candidate& c : pool_) {
      if (graph.node(c.value.id).shape == ShapeClass::Full) full.push_back(&c);
    }
    if (full.empty()) return nullptr;
    return full[static_cast<size_t>(choose_(0, static_cast<int>(full.size())))];
  }
  Value one_plus_square(const Candidate& c) {
    return graph.add(graph.constant(1.0), graph.mul(c.value, c.value));
  }
  void push(Value v, double magnitude) {
    if (magnitude <= kMaxMagnitude) pool_.push_back({v, magnitude});
  }

  void add_op() {
    const Candidate a = pick();
    const Candidate b = pick();
    const double ma = a.magnitude, mb = b.magnitude;
    // Ops 0-20 always; 21-22 with lookups; 23-24 with halves.
    std::vector<int> more;
    if (lookups_) more = {21, 22};
    if (halves_) more.insert(more.end(), {23, 24});
    int op = choose_(0, 21 + static_cast<int>(more.size()));
    if (op >= 21) op = more[static_cast<size_t>(op - 21)];
    switch (op) {
      case 0:
        push(graph.add(a.value, b.value), ma + mb);
        break;
      case 1:
        push(graph.sub(a.value, b.value), ma + mb);
        break;
      case 2:
        push(graph.mul(a.value, b.value), ma * mb);
        break;
      case 3:
        push(graph.div(a.value, one_plus_square(b)), ma);
        break;
      case 4:
        push(graph.max(a.value, b.value), std::max(ma, mb));
        break;
      case 5:
        push(graph.neg(a.value), ma);
        break;
      case 6:
        push(graph.exp(graph.tanh(a.value)), std::exp(1.0));
        break;
      case 7:
        push(graph.log(one_plus_square(a)), std::log1p(ma * ma));
        break;
      case 8:
        push(graph.tanh(a.value), 1.0);
        break;
      case 9:
        push(graph.rsqrt(one_plus_square(a)), 1.0);
        break;
      case 10:
        push(graph.sigmoid(a.value), 1.0);
        break;
      case 11:
        push(graph.cast(a.value, DType::BF16), ma * 1.01);
        break;
      case 12: {
        const double c = choose_(-200, 201) / 100.0;
        push(graph.mul(a.value, graph.constant(c)), ma * std::abs(c));
        break;
      }
      case 13:
        // A sum of up to the tests' widest rows (the GPU tests' 700 columns).
        if (const Candidate* f = pick_full()) push(graph.row_sum(f->value), 1024 * f->magnitude);
        break;
      case 14:
        if (const Candidate* f = pick_full()) push(graph.row_max(f->value), f->magnitude);
        break;
      case 15:  // the softmax pattern: exp(x - row_max(x)) / row_sum(...)
        if (const Candidate* f = pick_full()) {
          Value e = graph.exp(graph.sub(f->value, graph.row_max(f->value)));
          push(graph.div(e, graph.row_sum(e)), 1.0);
        }
        break;
      case 16:  // the RMSNorm pattern: x * rsqrt(mean(x^2) + eps)
        if (const Candidate* f = pick_full()) {
          Value ms = graph.row_mean(graph.mul(f->value, f->value));
          push(graph.mul(f->value, graph.rsqrt(graph.add(ms, graph.constant(1e-5)))),
               f->magnitude / std::sqrt(1e-5));
        }
        break;
      case 17:
        push(graph.abs(a.value), ma);
        break;
      case 18:
        push(graph.erf(a.value), 1.0);
        break;
      case 19:  // where(a < b, b, a): a max written with a comparison
        push(graph.select(graph.less(a.value, b.value), b.value, a.value), std::max(ma, mb));
        break;
      case 20:  // GELU, the erf form: x/2 (1 + erf(x / sqrt(2)))
        push(graph.mul(graph.mul(a.value, graph.constant(0.5)),
                       graph.add(graph.constant(1.0),
                                 graph.erf(graph.mul(a.value, graph.constant(M_SQRT1_2))))),
             ma);
        break;
      case 21: {  // a computed index, often out of the table (clamped)
        const std::vector<float> table = random_table();
        const Value index = graph.add(graph.mul(a.value, graph.constant(choose_(1, 41))),
                                      graph.constant(choose_(0, int(table.size()))));
        push(graph.lookup(table, index), largest(table));
        break;
      }
      case 22: {  // an 8-bit code as the index, as 8-bit AdamW dequantizes
        const std::vector<float> table = random_table();
        push(graph.lookup(table, graph.input(pick_of(kShapes), DType::U8)), largest(table));
        break;
      }
      case 23: {  // int8 values times a scale
        const double scale = choose_(1, 201) / 1000.0;
        push(graph.mul(graph.input(pick_of(kShapes), DType::I8), graph.constant(scale)),
             128 * scale);
        break;
      }
      case 24:
        if (ma * 1.001 <= kF16Largest) push(graph.cast(a.value, DType::F16), ma * 1.001);
        break;
    }
  }

  std::vector<float> random_table() {
    std::vector<float> table(static_cast<size_t>(choose_(1, 300)));
    for (float& x : table) x = static_cast<float>(choose_(-200, 201) / 100.0);
    return table;
  }
  static double largest(const std::vector<float>& table) {
    double m = 0;
    for (float x : table) m = std::max(m, double{std::abs(x)});
    return m;
  }

  Choose choose_;
  bool lookups_;
  bool halves_;
  std::vector<Candidate> pool_;
};

}  // namespace lt::compile::testing
