#include "core/grad_mode.h"

namespace lt {
namespace {
thread_local bool grad_enabled = true;
}
bool GradMode::enabled() {
  return grad_enabled;
}
void GradMode::set_enabled(bool enabled) {
  grad_enabled = enabled;
}
}  // namespace lt
