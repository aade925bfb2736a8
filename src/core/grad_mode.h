#pragma once
// Whether operations record autograd nodes on this thread. The flag lives in
// core so that raw tensor views can refuse to silently cut a gradient path;
// the guards that flip it are in autograd/.
namespace lt {

struct GradMode {
  static bool enabled();
  static void set_enabled(bool enabled);
};

}  // namespace lt
