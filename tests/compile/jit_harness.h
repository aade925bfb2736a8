#pragma once
// Runs a compiled kernel on double values stored in the graph's dtypes
// (inputs must already be representable there), and draws such values.
// u8 values are 8-bit codes (0 to 255).
#include <cstdint>
#include <cstring>
#include <vector>

#include "compile/graph.h"
#include "compile/interpret.h"
#include "compile/jit.h"
#include "core/dtype.h"
#include "core/random.h"

namespace lt::compile::testing {

class StoredValues {
 public:
  StoredValues(const Values& values, DType dtype) : dtype_(dtype), bytes_(values.size() * 4) {
    for (size_t i = 0; i < values.size(); ++i) set(i, values[i]);
  }
  StoredValues(size_t count, DType dtype) : dtype_(dtype), bytes_(count * 4) {}
  void* data() { return bytes_.data(); }
  Values read(size_t count) const {
    Values out(count);
    for (size_t i = 0; i < count; ++i) {
      if (dtype_ == DType::U8) {
        out[i] = bytes_[i];
      } else if (dtype_ == DType::I8) {
        out[i] = static_cast<signed char>(bytes_[i]);
      } else if (dtype_ == DType::BF16 || dtype_ == DType::F16) {
        uint16_t bits;
        std::memcpy(&bits, bytes_.data() + 2 * i, 2);
        out[i] = dtype_ == DType::BF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
      } else {
        float f;
        std::memcpy(&f, bytes_.data() + 4 * i, 4);
        out[i] = f;
      }
    }
    return out;
  }

 private:
  void set(size_t i, double v) {
    if (dtype_ == DType::U8) {
      bytes_[i] = static_cast<unsigned char>(v);
    } else if (dtype_ == DType::I8) {
      bytes_[i] = static_cast<unsigned char>(static_cast<signed char>(v));
    } else if (dtype_ == DType::BF16 || dtype_ == DType::F16) {
      const float f = static_cast<float>(v);
      const uint16_t bits = dtype_ == DType::BF16 ? f32_to_bf16(f) : f32_to_f16(f);
      std::memcpy(bytes_.data() + 2 * i, &bits, 2);
    } else {
      const float f = static_cast<float>(v);
      std::memcpy(bytes_.data() + 4 * i, &f, 4);
    }
  }
  DType dtype_;
  std::vector<unsigned char> bytes_;
};

inline std::vector<Values> run_compiled(const CpuKernel& kernel, const KernelGraph& graph,
                                        int64_t rows, int64_t cols,
                                        const std::vector<Values>& inputs) {
  std::vector<StoredValues> stored;
  for (size_t i = 0; i < inputs.size(); ++i)
    stored.emplace_back(inputs[i], graph.inputs()[i].dtype);
  // Each output's buffer as the kernel writes it (a pitched one spans more).
  std::vector<size_t> spans;
  for (const OutputSpec& o : graph.outputs()) {
    const bool full = graph.node(o.node).shape == ShapeClass::Full;
    spans.push_back(static_cast<size_t>(full && o.pitch != 1
                                            ? mapped_span(RowMap{.pitch = o.pitch}, rows, cols)
                                            : element_count(graph.node(o.node).shape, rows, cols)));
    stored.emplace_back(spans.back(), o.dtype);
  }
  std::vector<void*> buffers;
  for (StoredValues& s : stored) buffers.push_back(s.data());
  kernel.run(rows, cols, buffers);
  std::vector<Values> out;
  for (size_t i = 0; i < spans.size(); ++i) {
    const OutputSpec& o = graph.outputs()[i];
    const Values written = stored[inputs.size() + i].read(spans[i]);
    if (o.pitch == 1) {
      out.push_back(written);
      continue;
    }
    Values dense(static_cast<size_t>(rows * cols));  // the interpreter's layout
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        dense[static_cast<size_t>(r * cols + c)] =
            written[static_cast<size_t>(mapped_index(RowMap{.pitch = o.pitch}, r, c, cols))];
      }
    }
    out.push_back(dense);
  }
  return out;
}

// Values in [lo, hi] that `dtype` stores exactly; for u8 and i8, codes of
// 0 to 255 and -128 to 127 whatever the range.
inline Values draw_values(int64_t count, DType dtype, double lo, double hi, Generator& gen) {
  Values v(static_cast<size_t>(count));
  for (double& x : v) {
    if (dtype == DType::U8 || dtype == DType::I8) {
      x = static_cast<double>(gen.below(256)) - (dtype == DType::I8 ? 128 : 0);
      continue;
    }
    x = static_cast<float>(lo + (hi - lo) * gen.uniform());
    if (dtype == DType::BF16) x = round_to_bf16(x);
    if (dtype == DType::F16) x = round_to_f16(x);
  }
  return v;
}

}  // namespace lt::compile::testing
