// The stage times of `lazytrain profile --model` and of a run's own
// profile (plan/profile.h): a block, the embedding and the head, timed at
// the chunk sizes a plan may take.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <limits>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/random.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "exec/memory_budget.h"
#include "models/causal_lm.h"
#include "plan/planner.h"
#include "plan/profile.h"
#include "plan/profile_timing.h"
#include "plan/stage_times_fields.h"

#ifdef LT_WITH_CUDA
#include "core/cuda/device_info.h"
#endif

namespace lt::plan {

std::vector<int64_t> default_stage_batch_sizes(Device device, int64_t seq_len) {
  if (device.is_cpu()) return {1, 2};
  const int64_t chunk = min_chunk_sequences(seq_len);
  if (chunk == 1) return {1, 2, kMaxChunkGrowth};
  return {smallest_tail_piece(seq_len), chunk, kMaxChunkGrowth * chunk};
}

std::optional<std::pair<int64_t, int64_t>> working_set_sizes(
    const models::ModelConfig& config, int64_t seq_len, const std::vector<int64_t>& batch_sizes,
    Device device) {
  const int64_t bend = exec::loss_chunk_rows(config.vocab_size, !device.is_cpu());
  std::vector<int64_t> above, below;
  for (int64_t b : batch_sizes) {
    if (b * seq_len >= bend) above.push_back(b);
    if (b * seq_len <= bend) below.push_back(b);
  }
  for (const auto& side : {above, below})
    if (side.size() >= 2) return std::make_pair(side.front(), side.back());
  return std::nullopt;
}

namespace {

// Note [Cold inputs]: in a run, each chunk of a stage reads activations
// written long before (a boundary, a gradient from the next stage), so they
// come from device memory. Timed again and again on one input, a small
// chunk's input stays in the GPU's L2 (50 MB on the H200; a 3B block's
// input at chunks of 8 is 34 MB), and the profile priced chunks of 8 about
// 3% faster than runs made them, while chunks of 32 (134 MB, no such help)
// came out 1% slow (bench/RESULTS.md, sessions 27-28; issue 27). So the
// timed runs cycle through inputs that together hold kColdInputBytes, more
// than any GPU's L2. Measured on the H200 (session 31), the block's times
// per 64 sequences moved by under 0.5% (backward 50.9 ms at chunks of 8,
// 52.5 at 32), so L2 was not what priced chunks of 32 slow; the inputs stay
// cycled because a run's are.
constexpr int64_t kColdInputBytes = int64_t{256} << 20;
constexpr int kMaxColdInputCopies = 8;

// Rounds of Note [Sizes timed in turns] on a GPU (at least; `repeats` when
// more): the median of 5 is unmoved by two outliers, and the 5 rounds of 3
// sizes take about as long as the 3 sizes did one after another, each
// after its own half second of load and 3 batches.
constexpr int kRoundsOnGpu = 5;

int cold_input_copies(int64_t input_bytes) {
  return static_cast<int>(
      std::clamp<int64_t>((kColdInputBytes + input_bytes - 1) / std::max<int64_t>(input_bytes, 1),
                          1, kMaxColdInputCopies));
}

// Device bytes free for a measurement: what the driver reports free, and
// what the caching allocator keeps from earlier measurements (at most its
// high-water mark `peak_bytes`) beyond the `current_bytes` it hands out.
int64_t device_room_bytes([[maybe_unused]] Device device, [[maybe_unused]] int64_t peak_bytes,
                          [[maybe_unused]] int64_t current_bytes) {
#ifdef LT_WITH_CUDA
  if (device.is_cuda())
    return static_cast<int64_t>(cuda::device_free_memory(device.index)) + peak_bytes -
           current_bytes;
#endif
  return std::numeric_limits<int64_t>::max();  // the CPU: sizes there are small (CI)
}

}  // namespace

void check_stage_batch_sizes(const std::vector<int64_t>& batch_sizes) {
  std::vector<int64_t> sorted = batch_sizes;
  std::sort(sorted.begin(), sorted.end());
  LT_CHECK(sorted.size() >= 2 && sorted.front() > 0 &&
               std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
           "--batch-sizes needs two or more different sizes > 0, each once, got ",
           fmt::format("{}", fmt::join(batch_sizes, ",")));
}

StageTimes measure_stage_times(const models::ModelConfig& config, int64_t seq_len,
                               std::vector<int64_t> batch_sizes, Device device, int repeats,
                               std::vector<std::string>* notes) {
  check_stage_batch_sizes(batch_sizes);
  std::sort(batch_sizes.begin(), batch_sizes.end());
  LT_CHECK(seq_len > 0 && repeats >= 1, "profile: --seq-len and --repeats must be > 0");
  // Every block has the same shape: one is timed.
  models::ModelConfig one = config;
  one.num_hidden_layers = 1;
  Generator gen(1);
  models::CausalLM model = models::CausalLM::random(one, gen);
  const DType dtype = device.is_cpu() ? DType::F32 : DType::BF16;
  if (!device.is_cpu()) model.to(device, dtype);
  const models::Stage& embed = *model.stages().at(0);
  const models::Stage& block = *model.stages().at(1);
  const models::Stage& head = *model.stages().at(2);
  const auto finish = [&] { current_stream(device).synchronize(); };
  const auto clear_grads = [&] {
    for (const auto& [name, p] : model.parameters()) p.set_grad(Tensor());
  };
  // Device bytes a use holds at its peak beyond what was held before it:
  // the second of two runs, so that the parameters' .grad from the first
  // is there and added into, as a stage's later chunks add into it.
  Allocator& memory = default_allocator(device);
  auto working_set = [&](auto&& run) {
    run();
    finish();
    const int64_t before = memory.stats().current_bytes;
    memory.reset_peak();
    run();
    finish();
    const int64_t held = memory.stats().peak_bytes - before;
    clear_grads();
    return static_cast<double>(held);
  };
  // The streaming executor's uses (exec/streaming_plan.h) at one size: a
  // no-grad forward, and for backward a forward under grad mode then its
  // backward. Gradients accumulate over a batch of runs, as over a stage's
  // chunks. As the executor's backward use runs it, the output is only
  // backpropagated.
  struct SizeInputs {
    Tensor ids;
    models::StageContext ctx, backward_ctx;
    std::vector<Tensor> xs, dys;  // Note [Cold inputs]: each run reads the next
    size_t turn = 0;
    size_t next_input() { return turn++ % xs.size(); }
  };
  std::vector<SizeInputs> inputs;  // per size timed
  const auto no_grad = [&](const models::Stage& st, const Tensor& in, const SizeInputs& at) {
    NoGradGuard guard;
    (void)st.forward(in, at.ctx);
  };
  const auto with_grad = [&](const models::Stage& st, const Tensor& in, const Tensor& dy,
                             bool input_grad, const SizeInputs& at) {
    Tensor leaf = in.detach();
    if (input_grad) leaf.set_requires_grad(true);
    Tensor out = st.forward(leaf, at.backward_ctx);
    if (out.numel() == 1)
      backward(out);
    else
      backward(out, dy);
  };
  // One run of use `use` (in kStageTimeCurves' order, which the fits below
  // walk) at the `size`-th size timed.
  static_assert(std::size(kStageTimeCurves) == 5, "one use per fit in kStageTimeCurves");
  enum Use : size_t { kEmbedForward, kEmbedBackward, kBlockForward, kBlockBackward, kHeadStep };
  const auto run_use = [&](size_t use, size_t size) {
    SizeInputs& at = inputs[size];
    switch (use) {
      case kEmbedForward:
        return no_grad(embed, at.ids, at);
      case kEmbedBackward:
        return with_grad(embed, at.ids, at.dys[0], false, at);
      case kBlockForward:
        return no_grad(block, at.xs[at.next_input()], at);
      case kBlockBackward: {
        const size_t k = at.next_input();
        return with_grad(block, at.xs[k], at.dys[k], true, at);
      }
      default:
        return with_grad(head, at.xs[at.next_input()], Tensor(), true, at);
    }
  };
  // Per size timed, in kStageBytesFits' order.
  std::vector<std::array<double, std::size(kStageBytesFits)>> bytes;
  std::vector<int64_t> timed;  // the sizes measured, ascending
  int64_t high_water = 0;      // the allocator's highest peak so far
  for (int64_t batch : batch_sizes) {
    if (timed.size() >= 2) {
      // What this size would hold: its inputs (ids and targets, x and dy)
      // and the larger working set, on the line through the two sizes
      // before it (which over-estimates past the head's bend). The
      // smaller sizes' inputs stay held (their times are taken in turns
      // with this one's), and device_room_bytes counts them.
      const int64_t tokens = batch * seq_len;
      const double input_bytes =
          static_cast<double>(tokens) *
          (2 * sizeof(int64_t) + 2 * config.hidden_size * dtype_size(dtype)) *
          static_cast<double>(cold_input_copies(tokens * config.hidden_size *
                                                static_cast<int64_t>(dtype_size(dtype))));
      double working = 0;
      for (size_t k = 0; k < std::size(kStageBytesFits); ++k)
        working = std::max(
            working, fit_line(timed.end()[-2], bytes.end()[-2][k], timed.back(), bytes.back()[k])
                         .at(static_cast<double>(batch)));
      const int64_t need = static_cast<int64_t>(input_bytes + working);
      const int64_t room = device_room_bytes(device, high_water, memory.stats().current_bytes);
      if (need > room) {
        if (notes)
          notes->push_back(fmt::format(
              "stage_times: batch size {} was not timed: it would hold about {:.1f} GB on {}, "
              "and {:.1f} GB are free; the times above batch {} extrapolate its last segment",
              batch, need / 1e9, device.str(), room / 1e9, timed.back()));
        continue;
      }
    }
    timed.push_back(batch);
    SizeInputs& at = inputs.emplace_back();
    std::vector<int64_t> id_values(static_cast<size_t>(batch * seq_len));
    for (auto& id : id_values)
      id = static_cast<int64_t>(gen.below(static_cast<uint64_t>(config.vocab_size)));
    const Tensor cpu_ids = Tensor::from_vector(id_values, {batch, seq_len});
    at.ids = cpu_ids.to(device);
    at.ctx = model.context(seq_len, models::shift_targets(cpu_ids).to(device),
                           static_cast<double>(batch * seq_len));
    at.backward_ctx = at.ctx;
    at.backward_ctx.output_unread = true;
    const int copies = cold_input_copies(batch * seq_len * config.hidden_size *
                                         static_cast<int64_t>(dtype_size(dtype)));
    for (int k = 0; k < copies; ++k) {
      at.xs.push_back(Tensor::randn({batch, seq_len, config.hidden_size}, gen).to(device, dtype));
      at.dys.push_back(Tensor::randn({batch, seq_len, config.hidden_size}, gen, DType::F32, 1e-3)
                           .to(device, dtype));
    }
    const size_t size = inputs.size() - 1;
    static_assert(std::size(kStageBytesFits) == 2, "one measurement per fit in kStageBytesFits");
    bytes.push_back({working_set([&] { run_use(kBlockBackward, size); }),
                     working_set([&] { run_use(kHeadStep, size); })});
    high_water = std::max(high_water, memory.stats().peak_bytes);
  }
  StageTimes t = StageTimes::for_model(config, seq_len);
  t.device = device.is_cpu() ? "cpu" : "cuda";
  t.batch_sizes = timed;
  // Note [Sizes timed in turns] (plan/profile_timing.h). Timing noise can
  // still make a larger chunk measure faster than a smaller one, but a
  // stage never gets faster with more sequences: each figure is at least
  // the one before it.
  const bool sustained = !device.is_cpu();
  const int rounds = sustained ? std::max(repeats, kRoundsOnGpu) : repeats;
  for (size_t k = 0; k < std::size(kStageTimeCurves); ++k) {
    const std::vector<double> seconds = timing::seconds_in_turns(
        timed.size(), rounds, sustained, [&](size_t size) { run_use(k, size); }, finish,
        clear_grads);
    StageCurve& curve = t.*kStageTimeCurves[k].member;
    curve.batches = timed;
    for (double s : seconds)
      curve.seconds.push_back(std::max(s, curve.seconds.empty() ? 0.0 : curve.seconds.back()));
  }
  // The working sets: lines through two sizes on one side of the head's
  // bend (working_set_sizes), with slope at least 0 and through the larger
  // of the two figures at the larger size.
  if (const auto sizes = working_set_sizes(config, seq_len, timed, device)) {
    const size_t lo =
        static_cast<size_t>(std::find(timed.begin(), timed.end(), sizes->first) - timed.begin());
    const size_t hi =
        static_cast<size_t>(std::find(timed.begin(), timed.end(), sizes->second) - timed.begin());
    for (size_t k = 0; k < std::size(kStageBytesFits); ++k) {
      LinearFit& fit = t.*kStageBytesFits[k].member;
      const double at_lo = bytes[lo][k], at_hi = bytes[hi][k];
      fit = fit_line(timed[lo], at_lo, timed[hi], at_hi);
      fit.b = std::max(0.0, fit.b);
      fit.a = std::max(at_lo, at_hi) - fit.b * static_cast<double>(timed[hi]);
    }
  }
  return t;
}

}  // namespace lt::plan
