#pragma once
// When the ids of an embedding and the targets of a cross-entropy are
// checked against the vocabulary on a GPU.
//
// On the CPU every index is checked before any work. On a GPU the kernels
// guard every index themselves (a bad one reads and writes nothing outside
// the tables) and record the first bad one on the device; reading that
// record waits for the stream. By default each op waits and throws at once,
// as its contract says. Inside a DeferIndexChecks scope (on this thread),
// the embedding and its backward do not wait: a bad id is thrown by the next
// op that waits anyway (the cross-entropy forward, which reads its count of
// targets) or by check_index_errors, which the scope's owner calls where it
// synchronizes anyway, before it uses any result. The resident executor
// does this once per step.
#include "core/device.h"

namespace lt::ops {

class DeferIndexChecks {
 public:
  DeferIndexChecks();
  ~DeferIndexChecks();
  DeferIndexChecks(const DeferIndexChecks&) = delete;
  DeferIndexChecks& operator=(const DeferIndexChecks&) = delete;

 private:
  bool previous_;
};

// True inside a DeferIndexChecks scope on the calling thread.
bool index_checks_deferred();

// Throws the first bad index recorded on `device` by the kernels queued so
// far on the calling thread's current stream (waiting for them); a no-op
// on the CPU, whose ops check before they run.
void check_index_errors(Device device);

}  // namespace lt::ops
