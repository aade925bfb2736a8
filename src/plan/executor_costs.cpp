#include "plan/executor_costs.h"

#include <algorithm>
#include <cmath>

namespace lt::plan {

namespace {

double parameters(const CostModel& m) {
  return static_cast<double>(m.config.num_parameters());
}

double compute_of(const CostModel& m) {
  return m.embed_s + static_cast<double>(m.config.num_hidden_layers) * m.block_train_s +
         m.head_step_s;
}

double cpu_update_s(const CostModel& m) {
  const double rate = m.sizes.optimizer == exec::OptimizerStates::EightBit
                          ? m.hardware.cpu_adam8bit_gparams_per_s
                          : m.hardware.cpu_adam_gparams_per_s;
  return parameters(m) / (rate * 1e9);
}

// Bytes of every weight (or gradient) in the compute dtype, GB.
double model_gb(const CostModel& m) {
  return parameters(m) * static_cast<double>(m.sizes.compute_bytes) / kBytesPerGB;
}

// The update of `share` of the parameters on the device with `optimizer`.
double device_update_s(const CostModel& m, double share, exec::OptimizerStates optimizer) {
  return device_update_seconds(m.hardware, optimizer, share * parameters(m));
}

ExecutorTime finish(ExecutorTime t) {
  t.step_s = t.compute_s + t.optimizer_s + t.copies_s;
  return t;
}

}  // namespace

double device_update_seconds(const HardwareProfile& hardware, exec::OptimizerStates optimizer,
                             double params) {
  const double rate = optimizer == exec::OptimizerStates::EightBit
                          ? hardware.gpu_adam8bit_gparams_per_s
                          : hardware.gpu_adam_gparams_per_s;
  return params / (rate * 1e9);
}

ExecutorTime predict_resident(const CostModel& m) {
  ExecutorTime t;
  t.compute_s = compute_of(m);
  t.optimizer_s = device_update_s(m, 1.0, m.sizes.optimizer);
  return finish(t);
}

ExecutorTime predict_offload(const CostModel& m) {
  ExecutorTime t;
  t.compute_s = compute_of(m);
  t.optimizer_s = cpu_update_s(m);
  t.copies_s = model_gb(m) / m.hardware.d2h_gbps + model_gb(m) / m.hardware.h2d_gbps;
  return finish(t);
}

// The last micro-batch's backward: two thirds of its share of the step's
// compute (a backward is two products for the forward's one).
double last_backward_s(const CostModel& m) {
  const double chunks = m.chunk_sequences > 0 ? std::ceil(static_cast<double>(m.sizes.batch_size) /
                                                          static_cast<double>(m.chunk_sequences))
                                              : 1.0;
  return compute_of(m) / std::max(1.0, chunks) * 2.0 / 3.0;
}

ExecutorTime predict_zenflow(const CostModel& m, double topk_ratio, int64_t update_interval,
                             bool window_end_known) {
  const double window = static_cast<double>(std::max<int64_t>(1, update_interval));
  ExecutorTime t;
  t.compute_s = compute_of(m);
  // Per window: both directions at once, at the bidirectional rate; with
  // the window's end known, beside its last backward.
  const double window_copies = model_gb(m) / m.hardware.bidir_gbps;
  const double behind = window_end_known ? last_backward_s(m) : 0.0;
  t.copies_s = std::max(0.0, window_copies - behind) / window;
  const double hidden_behind = window * (t.compute_s + t.copies_s);
  // The top-k columns update on the device with f32 AdamW whatever the
  // run's optimizer (exec/offload_zenflow.cpp); the CPU's with the run's.
  t.optimizer_s = device_update_s(m, topk_ratio, exec::OptimizerStates::Fp32) +
                  std::max(0.0, cpu_update_s(m) - hidden_behind) / window;
  return finish(t);
}

}  // namespace lt::plan
