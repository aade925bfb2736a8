// The streaming executor's data movement outside the weights: boundary
// activations between the device, host memory and disk (as the Schedule
// places them), and each step's token ids, targets and RoPE table to the
// device. The state is StreamingExecutor::Impl (exec/streaming_impl.h).
#include <algorithm>
#include <string>
#include <utility>

#include "exec/streaming_impl.h"

namespace lt::exec {

namespace {

// An instant on the "prefetch" track: the compute thread issued a read back
// (tests check the window it falls in). `describe` names it, and runs only
// while tracing.
template <typename Describe>
void trace_issue(TraceRecorder* trace, Describe&& describe) {
  if (trace) {
    const auto now = TraceRecorder::Clock::now();
    trace->span("prefetch", describe(), now, now);
  }
}

}  // namespace

// Each engine runs in queue order, so an empty task queued now completes
// once everything queued before it has: nothing in flight may outlive the
// step's state or the trace recorder its tasks write to.
void StreamingExecutor::Impl::drain_copies() {
  wait_seconds(device.upload({}, Ticket(), "drain"));
  wait_seconds(device.download({}, {}, "drain"));
}

// Offloaded boundaries start coming back: in the windows the schedule
// assigns, else a disk read two uses ahead of the first use (its latency
// hides behind two stages' compute) and an upload one ahead.
void StreamingExecutor::Impl::issue_prefetches(size_t u) {
  for (int b : plan.prefetches[u].disk_reads) {
    trace_issue(tracing(), [&] {
      const bool split = !options.schedule.read_split(b).empty();
      return "read boundary " + std::to_string(b) + (split ? " piece 0" : "");
    });
    read_from_disk(b);
  }
  for (const Prefetch::Piece& p : plan.prefetches[u].disk_read_pieces) {
    trace_issue(tracing(), [&] {
      return "read boundary " + std::to_string(p.boundary) + " piece " + std::to_string(p.piece);
    });
    read_piece(p.boundary, p.piece);
  }
  for (int b : plan.prefetches[u].uploads) {
    trace_issue(tracing(), [&] { return "upload boundary " + std::to_string(b); });
    fetch(b);
  }
}

// Starts bringing an offloaded boundary back to the device.
void StreamingExecutor::Impl::fetch(int b) {
  Boundary& bd = boundaries[b];
  if (!bd.device.empty()) return;
  if (bd.host.empty() && !bd.disk_shapes.empty()) read_from_disk(b);
  if (bd.host.empty()) return;
  // plan_prefetches issues every piece before the upload; this is only
  // for a fetch outside that walk (prepare_input's).
  while (bd.pieces_issued < bd.pieces.size()) read_piece(b, static_cast<int>(bd.pieces_issued));
  std::vector<Shape> shapes;
  for (const auto& h : bd.host) shapes.push_back(h.shape());
  bd.device = boundary_memory(shapes, bd.host.front().dtype());
  if (bd.device.empty()) {
    for (const auto& h : bd.host) bd.device.push_back(device.empty(h.shape(), h.dtype()));
  }
  CopyList copies;
  for (size_t c = 0; c < bd.host.size(); ++c) copies.emplace_back(bd.device[c], bd.host[c]);
  bd.fetched = device.upload(std::move(copies), bd.offloaded, "boundary " + std::to_string(b));
}

// Note [One allocation per boundary]
// A boundary's chunks live in views of one device allocation for the whole
// batch (when they are alike but for their sequence counts: the usual
// fixed seq_len). Kept as separate tensors, each chunk's output would take
// a piece of a block the chunk's transients had just freed and outlive them
// there: on the 14B at batch 256 (32 chunks of 8, 49 boundaries kept on the
// GPU) the holes between them grew to 35 GiB, none large enough for the
// next chunk's 216 MiB FFN activation, and step 0 ran out of memory 9 GB
// under its planned peak (bench/RESULTS.md, session 18). The forward
// copies each chunk's output in (~1 ms of a 1.6 s stage there). The
// output and its copy coexist only at the block's end, after its FFN
// activations are freed, below the working set's peak, so the budget
// (memory_budget.h) needs no more: the 14B's GPU peak measured 140.17 GB
// against 140.70 GB planned. A boundary fetched back from host memory or
// disk is uploaded into such views.
std::vector<Tensor> StreamingExecutor::Impl::boundary_memory(const std::vector<Shape>& shapes,
                                                             DType dtype) {
  const auto like_the_first = [&](const Shape& s) {
    return !s.empty() && s.size() == shapes.front().size() &&
           std::equal(s.begin() + 1, s.end(), shapes.front().begin() + 1);
  };
  std::vector<Tensor> views;
  if (shapes.size() < 2 || !std::all_of(shapes.begin(), shapes.end(), like_the_first)) {
    return views;
  }
  Shape whole_shape = shapes.front();
  whole_shape[0] = 0;
  for (const Shape& s : shapes) whole_shape[0] += s[0];
  const Tensor whole = device.empty(whole_shape, dtype);
  int64_t row = 0;
  for (const Shape& s : shapes) {
    views.push_back(whole.slice(0, row, row + s[0]));
    row += s[0];
  }
  return views;
}

void StreamingExecutor::Impl::offload(int b) {
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
void StreamingExecutor::Impl::write_to_disk(int b) {
  Boundary& bd = boundaries[b];
  stats->exposed_disk_s += exposed_wait(disk_write_before_last);
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
void StreamingExecutor::Impl::read_from_disk(int b) {
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

void StreamingExecutor::Impl::read_piece(int b, int piece) {
  Boundary& bd = boundaries[b];
  LT_CHECK(piece == static_cast<int>(bd.pieces_issued) && bd.pieces_issued < bd.pieces.size(),
           "streaming executor: boundary ", b, " read piece ", piece, " out of order (",
           bd.pieces_issued, " of ", bd.pieces.size(), " issued)");
  bd.read_back = disk->read_piece(b, piece, bd.host, bd.pieces[static_cast<size_t>(piece)],
                                  bd.read_back, tracing());
  bd.offloaded = bd.read_back;
  ++bd.pieces_issued;
}

// At most two downloads in flight: device memory a copy still holds is
// freed in a bounded time, so the device peak does not depend on how far
// the download engine lags.
Ticket StreamingExecutor::Impl::download(CopyList copies, std::function<void()> then,
                                         std::string label) {
  stats->exposed_d2h_s += exposed_wait(download_before_last);
  download_before_last = last_download;
  last_download = device.download(std::move(copies), std::move(then), std::move(label));
  return last_download;
}

// The token ids (embed's input) and targets (the head's) go to the device
// once per step, ahead of the first weights.
void StreamingExecutor::Impl::upload_batch() {
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

// The model's RoPE table is in host memory (the masters' device); a GPU
// device computes with a copy of it in its memory, made on the compute
// stream (inside the compute scope) when the host table changes.
void StreamingExecutor::Impl::place_rope() {
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

// Makes the input boundary of `stage` ready on the device (bringing an
// offloaded one back), before the stage's compute is timed.
void StreamingExecutor::Impl::prepare_input(int stage) {
  if (batch_uploaded.valid()) {
    stats->exposed_h2d_s += exposed_wait(batch_uploaded);
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
    stats->exposed_disk_s += exposed_wait(bd.read_back);
    bd.read_back = Ticket();
  }
  if (bd.fetched.valid()) {
    stats->exposed_h2d_s += exposed_wait(bd.fetched);
    bd.fetched = Ticket();
  }
}

// Frees a boundary's device copy now: an offload still copying it out is
// waited for first (it holds the memory too), so the device's peak does
// not depend on how far the download engine lags.
void StreamingExecutor::Impl::release_device_copy(int b) {
  if (b < 0) return;
  Boundary& bd = boundaries[b];
  if (bd.downloaded.valid()) stats->exposed_d2h_s += exposed_wait(bd.downloaded);
  bd.downloaded = Ticket();
  bd.device.clear();
}

}  // namespace lt::exec
