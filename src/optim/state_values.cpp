#include "optim/state_values.h"

#include <atomic>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/thread_pool.h"

namespace lt::optim {

void check_state_values(const Tensor& t, const std::string& name, bool non_negative) {
  if (t.dtype() != DType::F32) return;
  const Tensor host = t.device().is_cpu() ? t.contiguous() : t.to(Device::cpu()).contiguous();
  const float* values = host.data<float>();
  // The first bad element, found in parallel chunks: a 7B's f32 states are
  // 56 GB, read from the (mapped) checkpoint here and again by the copy
  // after it, so twice from disk where the page cache cannot hold them; the
  // 8-bit optimizer's are checked in its block scales alone. Under ZeRO-1 the
  // element counts within the rank's part.
  std::atomic<int64_t> first_bad{std::numeric_limits<int64_t>::max()};
  parallel_for(0, host.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float v = values[i];
      if (std::isfinite(v) && (!non_negative || v >= 0)) continue;
      int64_t seen = first_bad.load();
      while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
      }
      return;
    }
  });
  const int64_t i = first_bad.load();
  if (i == std::numeric_limits<int64_t>::max()) return;
  const float v = values[i];
  fail("'", name, "' holds ", v, " at element ", i, ": ",
       std::isfinite(v) ? "a second moment is never negative" : "an optimizer state must be finite",
       " (a damaged checkpoint?)");
}

}  // namespace lt::optim
