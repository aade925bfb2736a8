#include "exec/streaming.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "optim/clip.h"

namespace lt::exec {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// For its scope, the model's parameter tensors point at device copies: the
// stage's own code then computes with them, and autograd accumulates into
// the same parameters' .grad (in device memory, inside a compute scope).
class WeightBinding {
 public:
  WeightBinding(const std::vector<Tensor>& params, const std::vector<Tensor>& copies) {
    for (size_t i = 0; i < params.size(); ++i) {
      TensorImpl* impl = params[i].impl();
      saved_.push_back({impl, impl->storage, impl->offset, impl->dtype});
      impl->storage = copies[i].storage();
      impl->offset = copies[i].offset();
      impl->dtype = copies[i].dtype();
    }
  }
  ~WeightBinding() {
    for (auto& s : saved_) {
      s.impl->storage = std::move(s.storage);
      s.impl->offset = s.offset;
      s.impl->dtype = s.dtype;
    }
  }
  WeightBinding(const WeightBinding&) = delete;
  WeightBinding& operator=(const WeightBinding&) = delete;

 private:
  struct Saved {
    TensorImpl* impl;
    std::shared_ptr<Storage> storage;
    int64_t offset;
    DType dtype;
  };
  std::vector<Saved> saved_;
};

// One piece of the global batch that goes through a stage at a time.
struct Chunk {
  Tensor ids;
  models::StageContext ctx;
};

// Splits each micro-batch into pieces of at most `rows` sequences (0: keep
// it whole); pieces without a counted target add nothing and are left out,
// as the resident executor leaves out such micro-batches.
std::vector<data::Batch> split_rows(const std::vector<data::Batch>& micro_batches, int64_t rows) {
  std::vector<data::Batch> out;
  for (const auto& mb : micro_batches) {
    if (mb.target_count == 0) continue;
    const int64_t n = mb.ids.size(0);
    if (rows <= 0 || rows >= n) {
      out.push_back(mb);
      continue;
    }
    for (int64_t r = 0; r < n; r += rows) {
      data::Batch piece;
      piece.ids = mb.ids.slice(0, r, std::min(n, r + rows)).contiguous();
      piece.targets = mb.targets.slice(0, r, std::min(n, r + rows)).contiguous();
      piece.target_count = models::count_targets(piece.targets);
      if (piece.target_count > 0) out.push_back(std::move(piece));
    }
  }
  return out;
}

}  // namespace

struct StreamingExecutor::Impl {
  struct StageInfo {
    size_t first = 0, last = 0;   // the parameters it owns: [first, last) of `params`
    std::vector<size_t> weights;  // the parameters it reads (owned + a tied weight)
  };
  struct Slot {
    int stage = -1;
    std::vector<Tensor> weights;  // device copies, in StageInfo::weights order
    Ticket ready;
  };
  // Boundary activations of one step.
  struct Boundary {
    std::vector<Tensor> device;  // per chunk; empty when not on the device
    std::vector<Tensor> host;    // per chunk, when offloaded
    Ticket offloaded, fetched;
    Ticket downloaded;  // the offload's device -> host copy (it holds `device` until done)
    // Placement::Disk: the chunks' shapes while their bytes are on disk.
    std::vector<Shape> disk_shapes;
    std::vector<DType> disk_dtypes;
    Ticket written, read_back;
    // A split read (Schedule::read_splits): per piece, the chunks' byte
    // ranges, and how many pieces have been issued; read_back is the
    // latest piece's ticket, each piece waiting for the one before.
    std::vector<std::vector<ByteRange>> pieces;
    size_t pieces_issued = 0;
  };

  const models::CausalLM& model;
  optim::Optimizer& optimizer;
  StreamingDevice& device;
  StreamingOptions options;
  int num_blocks = 0;
  std::vector<Tensor> params;  // model.parameters(), in order
  std::vector<std::string> names;
  std::vector<Tensor> masters;     // the parameters' memory, through handles no binding moves
  std::vector<Tensor> grad_slabs;  // host gradients, filled by the download engine
  std::vector<Tensor> norm_views;  // handles whose .grad is the slab, for grad_squared_sum
  std::vector<bool> has_grad;
  std::vector<StageInfo> stages;
  Slot slots[2];
  int current_slot = 0;
  std::vector<double> stage_squares;  // sum of g^2 per stage, written by the download engine
  std::vector<Ticket> updated;        // per stage: its latest update has finished
  Ticket step_finished;               // the latest optimizer finish_step()

  // Per step.
  std::vector<Chunk> chunks;
  std::vector<Boundary> boundaries;
  std::vector<Tensor> dy;         // per chunk: d loss / d (output of the stage being walked back)
  std::vector<Ticket> downloads;  // gradient copies (their squared sums)
  Ticket last_download, download_before_last;
  StepStats* stats = nullptr;

  WorkQueue optimizer_queue{"optimizer"};  // last: stops first, while all above still exist

  Impl(const models::CausalLM& m, optim::Optimizer& o, StreamingDevice& d, StreamingOptions opts)
      : model(m), optimizer(o), device(d), options(std::move(opts)) {
    num_blocks = static_cast<int>(model.config().num_hidden_layers);
    for (Placement p : options.schedule.boundaries) {
      if (p == Placement::Disk && !disk) disk = std::make_unique<DiskSpill>(options.disk);
    }
    LT_CHECK(options.schedule.executor == ExecutorKind::Streaming, "exec.schedule: executor is \"",
             executor_name(options.schedule.executor), "\", but this is the streaming executor");
    for (auto& [name, p] : model.parameters()) {
      LT_CHECK(p.device().is_cpu() && p.dtype() == DType::F32 && p.is_contiguous(),
               "streaming executor: master parameter '", name,
               "' must be a contiguous f32 CPU tensor, got ", p.str());
      names.push_back(name);
      params.push_back(p);
      masters.push_back(
          Tensor::from_storage(p.storage(), p.offset(), p.shape(), p.strides(), p.dtype()));
      norm_views.push_back(
          Tensor::from_storage(p.storage(), p.offset(), p.shape(), p.strides(), p.dtype()));
      // In the device's compute dtype (the gradients' own), in memory its
      // download engine copies into fastest (pinned on a GPU).
      grad_slabs.push_back(Tensor::empty(p.shape(), device.compute_dtype(), device.host_memory()));
      grad_slabs.back().zero_();
    }
    has_grad.assign(params.size(), false);
    LT_CHECK(optimizer.size() == params.size(), "streaming executor: the optimizer holds ",
             optimizer.size(), " parameters, the model ", params.size());
    size_t next = 0;
    for (const auto& stage : model.stages()) {
      nn::NamedParameters own;
      stage->collect(own);
      StageInfo info;
      info.first = next;
      for (const auto& [name, p] : own) {
        LT_CHECK(next < params.size() && params[next].same_impl(p), "streaming executor: stage '",
                 stage->name(), "' lists its parameters out of the model's order at '", name, "'");
        info.weights.push_back(next++);
      }
      info.last = next;
      const auto* head = dynamic_cast<const models::HeadStage*>(stage.get());
      if (head && head->tied()) {  // the head also reads the embedding matrix
        const auto& embed = dynamic_cast<const models::EmbedStage&>(*model.stages().front());
        for (size_t i = 0; i < params.size(); ++i)
          if (params[i].same_impl(embed.tokens().weight)) info.weights.push_back(i);
        LT_CHECK(info.weights.size() == info.last - info.first + 1,
                 "streaming executor: the tied head's embedding weight is not a model parameter");
      }
      stages.push_back(std::move(info));
    }
    LT_CHECK(next == params.size(), "streaming executor: stages list ", next, " of ", params.size(),
             " parameters");
    stage_squares.assign(stages.size(), 0.0);
    updated.assign(stages.size(), ready_ticket());
    step_finished = ready_ticket();
    if (!options.trace_path.empty()) trace = std::make_unique<TraceRecorder>();
    prefetches = plan_prefetches(options.schedule, plan_stage_uses(options.schedule, num_blocks),
                                 num_blocks);
    if (options.max_optimizer_delay_us > 0) {
      optimizer_queue.inject_delays(options.max_optimizer_delay_us, 7);
    }
  }

  std::vector<Tensor> stage_weights(int stage) const {
    std::vector<Tensor> out;
    for (size_t i : stages[stage].weights) out.push_back(params[i]);
    return out;
  }

  int find_slot(int stage) const {
    for (int k = 0; k < 2; ++k)
      if (slots[k].stage == stage) return k;
    return -1;
  }

  void load(int slot, int stage) {
    Slot& s = slots[slot];
    s.weights.clear();  // frees the previous occupant (a queued copy keeps its own reference)
    s.stage = stage;
    CopyList copies;
    for (size_t i : stages[stage].weights) {
      Tensor copy = device.empty(masters[i].shape(), device.compute_dtype());
      s.weights.push_back(copy);
      copies.emplace_back(copy, masters[i]);
    }
    // The copy reads the master, so it waits for the stage's update.
    s.ready = device.upload(std::move(copies), updated[stage],
                            "weights " + model.stages()[stage]->name());
  }

  // The slot holding `stage`'s weights, ready; also starts copying the
  // weights of `next_stage` (-1: none) into the other slot.
  int acquire(int stage, int next_stage) {
    int slot = find_slot(stage);
    if (slot < 0) {
      slot = 1 - current_slot;
      load(slot, stage);
    }
    current_slot = slot;
    if (next_stage >= 0 && next_stage != stage && find_slot(next_stage) < 0) {
      load(1 - slot, next_stage);
    }
    stats->exposed_h2d_s += wait_seconds(slots[slot].ready);
    return slot;
  }

  // Waits until both copy engines have run everything queued so far (each
  // runs in queue order): nothing in flight may outlive the step's state or
  // the trace recorder its tasks write to.
  void drain_copies() {
    wait_seconds(device.upload({}, Ticket(), "drain"));
    wait_seconds(device.download({}, {}, "drain"));
  }

  void invalidate_slots() {
    for (auto& s : slots) {
      s.stage = -1;
      s.weights.clear();
      s.ready = Ticket();
    }
  }

  // Starts bringing an offloaded boundary back to the device.
  void fetch(int b) {
    Boundary& bd = boundaries[b];
    if (!bd.device.empty()) return;
    if (bd.host.empty() && !bd.disk_shapes.empty()) read_from_disk(b);
    if (bd.host.empty()) return;
    // plan_prefetches issues every piece before the upload; this is only
    // for a fetch outside that walk (prepare_input's).
    while (bd.pieces_issued < bd.pieces.size()) read_piece(b, static_cast<int>(bd.pieces_issued));
    CopyList copies;
    for (const auto& h : bd.host) {
      bd.device.push_back(device.empty(h.shape(), h.dtype()));
      copies.emplace_back(bd.device.back(), h);
    }
    bd.fetched = device.upload(std::move(copies), bd.offloaded, "boundary " + std::to_string(b));
  }

  void offload(int b) {
    Boundary& bd = boundaries[b];
    CopyList copies;
    for (const auto& d : bd.device) {
      bd.host.push_back(Tensor::empty(d.shape(), d.dtype(), device.host_memory()));
      copies.emplace_back(bd.host.back(), d);
    }
    bd.offloaded = download(std::move(copies), {}, "boundary " + std::to_string(b));
    bd.downloaded = bd.offloaded;
    if (options.schedule.boundaries[b] == Placement::Disk) write_to_disk(b);
  }

  // The host buffers go to the disk engine once downloaded; it holds them
  // until written, and the boundary keeps only their shapes.
  // At most two boundaries wait for the disk at a time, so the host memory
  // that disk placement saves stays saved when the disk lags.
  void write_to_disk(int b) {
    Boundary& bd = boundaries[b];
    stats->exposed_disk_s += wait_seconds(disk_write_before_last);
    disk_write_before_last = disk_last_write;
    for (const auto& h : bd.host) {
      bd.disk_shapes.push_back(h.shape());
      bd.disk_dtypes.push_back(h.dtype());
    }
    bd.written = disk->write(b, std::move(bd.host), bd.offloaded, tracing());
    disk_last_write = bd.written;
    bd.host.clear();
    bd.offloaded = Ticket();
  }

  // Fresh host buffers, filled by the disk engine; fetch() uploads them
  // after bd.offloaded, which is now the read's ticket. A split read
  // allocates the whole buffers here and reads its first piece.
  void read_from_disk(int b) {
    Boundary& bd = boundaries[b];
    for (size_t c = 0; c < bd.disk_shapes.size(); ++c) {
      bd.host.push_back(Tensor::empty(bd.disk_shapes[c], bd.disk_dtypes[c], cpu_allocator()));
    }
    bd.disk_shapes.clear();
    bd.disk_dtypes.clear();
    const auto& split = options.schedule.read_split(b);
    if (split.empty()) {
      bd.read_back = disk->read(b, bd.host, bd.written, tracing());
      bd.offloaded = bd.read_back;
      return;
    }
    std::vector<int64_t> chunk_bytes;
    for (const Tensor& h : bd.host) chunk_bytes.push_back(static_cast<int64_t>(h.nbytes()));
    std::vector<double> fractions;
    for (const auto& piece : split) fractions.push_back(piece.fraction);
    bd.pieces = split_read(chunk_bytes, fractions);
    bd.pieces_issued = 0;
    bd.read_back = bd.written;
    read_piece(b, 0);
  }

  void read_piece(int b, int piece) {
    Boundary& bd = boundaries[b];
    LT_CHECK(piece == static_cast<int>(bd.pieces_issued) && bd.pieces_issued < bd.pieces.size(),
             "streaming executor: boundary ", b, " read piece ", piece, " out of order (",
             bd.pieces_issued, " of ", bd.pieces.size(), " issued)");
    bd.read_back = disk->read_piece(b, piece, bd.host, bd.pieces[static_cast<size_t>(piece)],
                                    bd.read_back, tracing());
    bd.offloaded = bd.read_back;
    ++bd.pieces_issued;
  }
  std::unique_ptr<DiskSpill> disk;  // when the schedule places a boundary on disk
  Ticket disk_last_write, disk_write_before_last;

  // At most two downloads in flight: device memory a copy still holds is
  // freed in a bounded time, so the device peak does not depend on how far
  // the download engine lags.
  Ticket download(CopyList copies, std::function<void()> then, std::string label) {
    stats->exposed_d2h_s += wait_seconds(download_before_last);
    download_before_last = last_download;
    last_download = device.download(std::move(copies), std::move(then), std::move(label));
    return last_download;
  }

  // The token ids (embed's input) and targets (the head's) go to the device
  // once per step, ahead of the first weights.
  void upload_batch() {
    CopyList copies;
    for (auto& chunk : chunks) {
      for (Tensor* host : {&chunk.ids, &chunk.ctx.targets}) {
        Tensor source = host->contiguous();
        *host = device.empty(source.shape(), source.dtype());
        copies.emplace_back(*host, source);
      }
    }
    batch_uploaded = device.upload(std::move(copies), Ticket(), "token ids and targets");
  }
  Ticket batch_uploaded;

  // The model's RoPE table is in host memory (the masters' device); a GPU
  // device computes with a copy of it in its memory, made on the compute
  // stream (inside the compute scope) when the host table changes.
  void place_rope() {
    const RopeTable* host = chunks.front().ctx.rope;
    if (host == nullptr || host->cos.device() == device.memory().device()) return;
    if (rope_source != host->cos.data_ptr() || device_rope.cos.size(0) != host->cos.size(0)) {
      device_rope = *host;
      device_rope.cos = host->cos.to(device.memory().device());
      device_rope.sin = host->sin.to(device.memory().device());
      rope_source = host->cos.data_ptr();
    }
    for (auto& chunk : chunks) chunk.ctx.rope = &device_rope;
  }
  RopeTable device_rope;
  const void* rope_source = nullptr;

  // Makes the input boundary of `stage` ready on the device (bringing an
  // offloaded one back), before the stage's compute is timed.
  void prepare_input(int stage) {
    if (batch_uploaded.valid()) {
      stats->exposed_h2d_s += wait_seconds(batch_uploaded);
      batch_uploaded = Ticket();
    }
    if (stage == 0) return;
    Boundary& bd = boundaries[stage - 1];
    if (bd.device.empty()) {
      LT_CHECK(!bd.host.empty() || !bd.disk_shapes.empty(), "streaming executor: boundary ",
               stage - 1, " is neither on the device nor offloaded (a bug in the stage plan)");
      fetch(stage - 1);
    }
    if (bd.read_back.valid()) {  // the disk's share of the wait
      stats->exposed_disk_s += wait_seconds(bd.read_back);
      bd.read_back = Ticket();
    }
    if (bd.fetched.valid()) {
      stats->exposed_h2d_s += wait_seconds(bd.fetched);
      bd.fetched = Ticket();
    }
  }

  // The input of `stage` for chunk `c`, on the device (after prepare_input).
  const Tensor& input(int stage, size_t c) const {
    return stage == 0 ? chunks[c].ids : boundaries[stage - 1].device[c];
  }

  // Frees a boundary's device copy now: an offload still copying it out is
  // waited for first (it holds the memory too), so the device's peak does
  // not depend on how far the download engine lags.
  void release_device_copy(int b) {
    if (b < 0) return;
    Boundary& bd = boundaries[b];
    if (bd.downloaded.valid()) stats->exposed_d2h_s += wait_seconds(bd.downloaded);
    bd.downloaded = Ticket();
    bd.device.clear();
  }

  // Moves the gradients of the parameters `stage` owns to the host slabs and
  // adds their squared sum, on the download engine.
  void copy_out(int stage) {
    const StageInfo& info = stages[stage];
    CopyList copies;
    nn::NamedParameters views;
    for (size_t i = info.first; i < info.last; ++i) {
      Tensor g = params[i].grad();
      has_grad[i] = g.defined();
      norm_views[i].set_grad(g.defined() ? grad_slabs[i] : Tensor());
      if (!g.defined()) continue;
      params[i].set_grad(Tensor());
      copies.emplace_back(grad_slabs[i], g.contiguous());
      views.emplace_back(names[i], norm_views[i]);
    }
    double* square = &stage_squares[stage];
    *square = 0;
    downloads.push_back(download(
        std::move(copies),
        [square, views = std::move(views)] { *square = optim::grad_squared_sum(views); },
        "grads " + model.stages()[stage]->name()));
  }

  void run_forward(int stage, bool recompute) {
    prepare_input(stage);
    const models::Stage& st = *model.stages()[stage];
    const int slot = slot_for_current_use;
    WeightBinding bind(stage_weights(stage), slots[slot].weights);
    NoGradGuard no_grad;
    std::vector<Tensor> out;
    const auto t0 = Clock::now();
    for (size_t c = 0; c < chunks.size(); ++c)
      out.push_back(st.forward(input(stage, c), chunks[c].ctx));
    device.finish_compute();
    (recompute ? stats->recompute_s : stats->compute_s) += seconds_since(t0);
    boundaries[stage].device = std::move(out);
  }

  void run_head(int stage) {
    prepare_input(stage);
    const models::Stage& st = *model.stages()[stage];
    WeightBinding bind(stage_weights(stage), slots[slot_for_current_use].weights);
    const auto t0 = Clock::now();
    dy.assign(chunks.size(), Tensor());
    for (size_t c = 0; c < chunks.size(); ++c) {
      Tensor h = input(stage, c).detach();
      h.set_requires_grad(true);
      Tensor loss = st.forward(h, chunks[c].ctx);
      stats->loss += loss.item();
      backward(loss);
      dy[c] = h.grad();
    }
    device.finish_compute();
    stats->compute_s += seconds_since(t0);
  }

  void run_backward(int stage) {
    prepare_input(stage);
    const models::Stage& st = *model.stages()[stage];
    WeightBinding bind(stage_weights(stage), slots[slot_for_current_use].weights);
    const auto t0 = Clock::now();
    for (size_t c = 0; c < chunks.size(); ++c) {
      Tensor x = input(stage, c);
      if (stage > 0) {
        x = x.detach();
        x.set_requires_grad(true);
      }
      Tensor out = st.forward(x, chunks[c].ctx);
      backward(out, dy[c]);
      dy[c] = stage > 0 ? x.grad() : Tensor();
    }
    device.finish_compute();
    stats->compute_s += seconds_since(t0);
  }

  int slot_for_current_use = 0;
  std::vector<Prefetch> prefetches;  // per stage use (plan_prefetches)

  // An instant on the "prefetch" track: the compute thread issued a read
  // back (tests check the window it falls in). `describe` names it, and
  // runs only while tracing.
  template <typename Describe>
  void trace_issue(Describe&& describe) {
    if (TraceRecorder* t = tracing()) {
      const auto now = TraceRecorder::Clock::now();
      t->span("prefetch", describe(), now, now);
    }
  }

  void run_step(const std::vector<StageUse>& uses) {
    const int head = num_blocks + 1;
    for (size_t u = 0; u < uses.size(); ++u) {
      const StageUse use = uses[u];
      const int next_stage = u + 1 < uses.size() ? uses[u + 1].stage : -1;
      // Offloaded boundaries start coming back: in the windows the schedule
      // assigns, else a disk read two uses ahead of the first use (its
      // latency hides behind two stages' compute) and an upload one ahead.
      for (int b : prefetches[u].disk_reads) {
        trace_issue([&] {
          const bool split = !options.schedule.read_split(b).empty();
          return "read boundary " + std::to_string(b) + (split ? " piece 0" : "");
        });
        read_from_disk(b);
      }
      for (const Prefetch::Piece& p : prefetches[u].disk_read_pieces) {
        trace_issue([&] {
          return "read boundary " + std::to_string(p.boundary) + " piece " +
                 std::to_string(p.piece);
        });
        read_piece(p.boundary, p.piece);
      }
      for (int b : prefetches[u].uploads) {
        trace_issue([&] { return "upload boundary " + std::to_string(b); });
        fetch(b);
      }
      if (use.work == StageWork::Forward) stats->optimizer_s += wait_seconds(updated[use.stage]);
      slot_for_current_use = acquire(use.stage, next_stage);
      TraceSpan span(
          tracing(), "compute",
          std::string(stage_work_name(use.work)) + " " + model.stages()[use.stage]->name());
      switch (use.work) {
        case StageWork::Forward:
          run_forward(use.stage, false);
          // The input has been used; keep it only if the schedule keeps it on the device.
          if (use.stage >= 1 && options.schedule.boundaries[use.stage - 1] != Placement::Gpu) {
            release_device_copy(use.stage - 1);
          }
          if (use.stage < num_blocks) {
            const Placement out = options.schedule.boundaries[use.stage];
            if (out == Placement::Host || out == Placement::Disk) offload(use.stage);
          }
          break;
        case StageWork::HeadStep:
          run_head(use.stage);
          release_device_copy(head - 1);
          copy_out(use.stage);
          break;
        case StageWork::Recompute:
          run_forward(use.stage, true);
          break;
        case StageWork::Backward:
          run_backward(use.stage);
          if (use.stage >= 1) {
            boundaries[use.stage - 1] = Boundary();
          }
          copy_out(use.stage);
          break;
      }
    }
  }

  void wait_updates() {
    for (const auto& t : updated) wait_seconds(t);
    wait_seconds(step_finished);
  }

  // The recorder while the first options.trace_steps steps run, else null.
  TraceRecorder* tracing() const {
    return trace && steps_started <= options.trace_steps ? trace.get() : nullptr;
  }
  void write_trace() {
    if (trace && trace->size() > trace_written) {
      trace->write(options.trace_path);
      trace_written = trace->size();
    }
  }
  std::unique_ptr<TraceRecorder> trace;
  int steps_started = 0;
  size_t trace_written = 0;
};

StreamingExecutor::StreamingExecutor(const models::CausalLM& model, optim::Optimizer& optimizer,
                                     StreamingDevice& device, StreamingOptions options)
    : model_(model) {
  if (options.schedule.boundaries.empty()) {
    options.schedule = Schedule::all_gpu(static_cast<int>(model.config().num_hidden_layers));
  }
  uses_ = plan_stage_uses(options.schedule, static_cast<int>(model.config().num_hidden_layers));
  impl_ = std::make_unique<Impl>(model, optimizer, device, std::move(options));
}

StreamingExecutor::StreamingExecutor(const models::CausalLM& model, optim::Optimizer& optimizer,
                                     std::unique_ptr<StreamingDevice> device,
                                     StreamingOptions options)
    : model_(model), owned_device_(std::move(device)) {
  LT_CHECK(owned_device_ != nullptr, "streaming executor: no device");
  if (options.schedule.boundaries.empty()) {
    options.schedule = Schedule::all_gpu(static_cast<int>(model.config().num_hidden_layers));
  }
  uses_ = plan_stage_uses(options.schedule, static_cast<int>(model.config().num_hidden_layers));
  impl_ = std::make_unique<Impl>(model, optimizer, *owned_device_, std::move(options));
}

StreamingExecutor::~StreamingExecutor() {
  try {
    impl_->drain_copies();
    impl_->wait_updates();
    impl_->write_trace();
  } catch (...) {  // a failed update was reported by the step or sync that met it
  }
}

void StreamingExecutor::sync() {
  impl_->wait_updates();
  impl_->write_trace();
}

StepStats StreamingExecutor::step(const std::vector<data::Batch>& micro_batches,
                                  const StepOptions& options) {
  Impl& m = *impl_;
  const auto start = Clock::now();
  cpu_allocator().reset_peak();
  m.device.memory().reset_peak();
  StepStats stats;
  m.stats = &stats;
  ++m.steps_started;
  m.device.set_trace(m.tracing());
  for (const auto& mb : micro_batches) {
    stats.tokens += mb.tokens;
    stats.target_count += mb.target_count;
  }
  // As the resident executor: each piece's loss is divided by the global
  // target count, so the sum over pieces is the mean over the global batch.
  const double denominator = static_cast<double>(std::max<int64_t>(stats.target_count, 1));
  m.chunks.clear();
  // Contexts are made before the compute scope: the model's RoPE table is
  // host state that outlives the step.
  for (auto& piece : split_rows(micro_batches, m.options.schedule.micro_batch)) {
    models::StageContext ctx = m.model.context(piece.ids.size(1), piece.targets, denominator);
    m.chunks.push_back({piece.ids, std::move(ctx)});
  }
  if (m.chunks.empty()) {  // nothing counted: no gradient, no update (as resident)
    stats.seconds = seconds_since(start);
    return stats;
  }
  try {
    auto scope = m.device.compute_scope();
    m.boundaries.assign(static_cast<size_t>(m.num_blocks) + 1, Impl::Boundary());
    m.disk_last_write = m.disk_write_before_last = Ticket();  // not a failed step's
    m.place_rope();
    m.upload_batch();
    m.downloads.clear();
    m.run_step(uses_);
    m.dy.clear();
    m.boundaries.clear();
    m.invalidate_slots();
  } catch (...) {
    // Leave the executor usable: no copy in flight, no gradient left behind.
    m.drain_copies();
    m.last_download = m.download_before_last = Ticket();
    m.wait_updates();
    m.dy.clear();
    m.boundaries.clear();
    m.invalidate_slots();
    for (const auto& p : m.params) p.set_grad(Tensor());
    m.chunks.clear();
    throw;
  }
  for (const auto& t : m.downloads) stats.exposed_d2h_s += wait_seconds(t);
  m.downloads.clear();
  m.last_download = m.download_before_last = Ticket();
  m.chunks.clear();
  // Stage sums added in the chain's order, whatever order they landed in.
  double squares = 0;
  for (double s : m.stage_squares) squares += s;
  stats.grad_norm = std::sqrt(squares);

  if (!std::isfinite(stats.loss) || !std::isfinite(stats.grad_norm)) {
    stats.skipped = true;
  } else {
    const double lr = options.lr;
    const double scale = optim::clip_scale(stats.grad_norm, options.max_grad_norm);
    for (size_t s = 0; s < m.stages.size(); ++s) {
      const Impl::StageInfo& info = m.stages[s];
      std::vector<bool> with_grad(m.has_grad.begin() + static_cast<int64_t>(info.first),
                                  m.has_grad.begin() + static_cast<int64_t>(info.last));
      m.updated[s] =
          m.optimizer_queue.enqueue([&m, &info, with_grad, lr, scale, s, trace = m.tracing()] {
            TraceSpan span(trace, "optimizer", "update " + m.model.stages()[s]->name());
            for (size_t i = info.first; i < info.last; ++i)
              if (with_grad[i - info.first]) m.params[i].set_grad(m.grad_slabs[i]);
            m.optimizer.update(lr, scale, info.first, info.last);
            for (size_t i = info.first; i < info.last; ++i) m.params[i].set_grad(Tensor());
          });
    }
    m.step_finished = m.optimizer_queue.enqueue([&m] { m.optimizer.finish_step(); });
    if (!m.options.overlap_optimizer) {
      const auto t0 = Clock::now();
      m.wait_updates();
      stats.optimizer_s += seconds_since(t0);
    }
  }
  m.stats = nullptr;
  stats.seconds = seconds_since(start);
  stats.bubbles_s =
      std::max(0.0, stats.seconds - stats.compute_s - stats.recompute_s - stats.exposed_h2d_s -
                        stats.exposed_d2h_s - stats.exposed_disk_s - stats.optimizer_s);
  stats.peak_bytes["host"] = cpu_allocator().stats().peak_bytes;
  stats.peak_bytes[m.device.memory_space()] = m.device.memory().stats().peak_bytes;
  return stats;
}

}  // namespace lt::exec
