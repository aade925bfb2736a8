#include "dist/nccl_sum.h"

#include "core/error.h"

#if defined(LT_WITH_CUDA) && defined(LT_HAVE_NCCL)
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

#include "core/cuda/check.cuh"
#include "core/pinned_pool.h"
#include "core/stream.h"

namespace lt::dist {

namespace {

using Clock = std::chrono::steady_clock;

static_assert(NCCL_UNIQUE_ID_BYTES == kNcclIdBytes);

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return ncclFloat32;
    case DType::BF16:
      return ncclBfloat16;
    default:
      fail("data parallel over NCCL sums f32 or bf16 tensors, got ", dtype_name(dtype));
  }
}

class NcclSum final : public exec::CrossRankSum {
 public:
  NcclSum(const World& world, int device_index, const NcclId& id, double timeout_s)
      : world_(world), device_(Device::cuda(device_index)), timeout_s_(timeout_s) {
    LT_CUDA_CHECK(cudaSetDevice(device_index));
    ncclUniqueId unique{};
    std::memcpy(unique.internal, id.data(), kNcclIdBytes);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    check(ncclCommInitRankConfig(&comm_, world.size, unique, world.rank, &config),
          "ncclCommInitRankConfig");
    wait_for_comm("ncclCommInitRankConfig");
    LT_CUDA_CHECK(cudaMalloc(&scratch_, kScratchDoubles * sizeof(double)));
  }
  ~NcclSum() override {
    // Returns at once; the stream goes when its work is done (or aborted
    // with the communicator below). Errors ignored: a destructor cannot report.
    for (InFlight& f : in_flight_) cudaEventDestroy(f.done);
    if (comm_stream_) cudaStreamDestroy(comm_stream_);
    if (scratch_) cudaFree(scratch_);
    if (!comm_) return;
    // A non-blocking communicator finishes its work before it is destroyed;
    // bounded, and a destructor cannot report: a stuck one is aborted.
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    ncclResult_t state = ncclCommFinalize(comm_);
    while (state == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      ncclCommGetAsyncError(comm_, &state);
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(comm_);
    } else {
      ncclCommAbort(comm_);
    }
  }
  int rank() const override { return world_.rank; }
  int world_size() const override { return world_.size; }

  void sum(std::span<double> values) override {
    cudaStream_t stream = current();
    after_comm_stream(stream);
    for (size_t done = 0; done < values.size(); done += kScratchDoubles) {
      const size_t n = std::min(kScratchDoubles, values.size() - done);
      LT_CUDA_CHECK(cudaMemcpyAsync(scratch_, values.data() + done, n * sizeof(double),
                                    cudaMemcpyHostToDevice, stream));
      check(ncclAllReduce(scratch_, scratch_, n, ncclFloat64, ncclSum, comm_, stream),
            "ncclAllReduce");
      wait_for_comm("ncclAllReduce");  // enqueued before the copy back is
      LT_CUDA_CHECK(cudaMemcpyAsync(values.data() + done, scratch_, n * sizeof(double),
                                    cudaMemcpyDeviceToHost, stream));
      wait_for_stream(stream, "ncclAllReduce (loss and counts)");
    }
  }

  void sum(const std::vector<Tensor>& tensors) override {
    cudaStream_t stream = current();
    after_comm_stream(stream);
    all_reduce(tensors, stream);
    wait_for_stream(stream, "ncclAllReduce (gradients)");
  }

  // Note [Collectives on the communication stream]
  // A collective started (start_sum: a gradient bucket or a stage's
  // gradients; start_reduce_scatter: a stage's gradients under ZeRO-1;
  // start_all_gather: a stage's masters) runs on a communication stream of its own after the
  // compute stream's work so far (an event), so the compute stream goes on
  // meanwhile. Each one is an entry of `in_flight_`, in the order started,
  // holding the tensors NCCL reads or writes until a wait has seen its
  // event (so the caching allocator cannot hand their memory to the
  // compute stream while NCCL still uses it); wait_for_oldest_sums(k)
  // waits for the k-th entry's event, which the stream reaches after the
  // earlier ones, leaving later ones running. The collectives that the
  // host waits for at once run on the compute stream, behind whatever the
  // communication stream was given before them (after_comm_stream): one
  // communicator's collectives then run in the order they were issued, the
  // same on every rank, never two at once.
  void start_sum(const std::vector<Tensor>& tensors) override {
    cudaStream_t stream = comm_stream();
    all_reduce(tensors, stream);
    push_in_flight(tensors, "ncclAllReduce (a gradient bucket)");
  }
  // A host `flat` (ZeroOptimizer's f32 buffer) goes through device memory:
  // this rank's shard is uploaded, gathered in place, and the whole
  // downloaded, all queued on the communication stream. Both copies go
  // through pinned buffers: a copy from or into pageable memory may hold
  // this thread until the stream's earlier work is done. The wait copies
  // the landing buffer into `flat`; until then `flat` is not read or
  // written here.
  void start_all_gather(const Tensor& flat) override {
    const int64_t shard = flat.numel() / world_.size;
    check_shards(flat, shard);
    cudaStream_t stream = comm_stream();
    const bool host = flat.device().is_cpu();
    const Tensor buffer = host ? Tensor::empty(flat.shape(), flat.dtype(), device_) : flat;
    char* base = static_cast<char*>(buffer.data_ptr());
    const size_t bytes = static_cast<size_t>(shard) * dtype_size(flat.dtype());
    const size_t mine = static_cast<size_t>(world_.rank) * bytes;
    Tensor upload;
    if (host) {
      upload = Tensor::empty({shard}, flat.dtype(), pinned_host_pool());
      std::memcpy(upload.data_ptr(), static_cast<const char*>(flat.data_ptr()) + mine, bytes);
      LT_CUDA_CHECK(
          cudaMemcpyAsync(base + mine, upload.data_ptr(), bytes, cudaMemcpyHostToDevice, stream));
    }
    check(ncclAllGather(base + mine, base, static_cast<size_t>(shard), nccl_type(flat.dtype()),
                        comm_, stream),
          "ncclAllGather");
    wait_for_comm("ncclAllGather");
    Tensor landing;
    if (host) {
      landing = Tensor::empty(flat.shape(), flat.dtype(), pinned_host_pool());
      LT_CUDA_CHECK(cudaMemcpyAsync(landing.data_ptr(), base, bytes * world_.size,
                                    cudaMemcpyDeviceToHost, stream));
    }
    InFlight& f = push_in_flight({buffer, upload}, "ncclAllGather (dist.zero 1)");
    if (host) {
      f.landing = landing;
      f.host = flat;
    }
  }
  void wait_for_sums() override { wait_for_oldest_sums(in_flight_.size()); }
  void wait_for_oldest_sums(size_t count) override {
    count = std::min(count, in_flight_.size());
    if (count == 0) return;
    wait_for_event(in_flight_[count - 1].done, in_flight_[count - 1].what);
    for (size_t k = 0; k < count; ++k) {
      InFlight& f = in_flight_.front();
      if (f.host.defined()) f.host.copy_(f.landing);
      LT_CUDA_CHECK(cudaEventDestroy(f.done));
      in_flight_.pop_front();
    }
  }

  // ZeRO-1 (exec/cross_rank_sum.h), on the current stream, the host
  // waiting (bounded). Device tensors are reduced where they are (a
  // stage's gradients, before the download: each rank then copies only
  // its shard to the host); host tensors (ZeroOptimizer's f32 buffers:
  // the masters' all-gather) go through device memory.
  void reduce_scatter(const Tensor& flat, const Tensor& shard) override {
    check_reduce_scatter(flat, shard);
    cudaStream_t stream = current();
    after_comm_stream(stream);
    const Tensor in = on_device(flat);
    const Tensor out =
        shard.device().is_cpu() ? Tensor::empty(shard.shape(), shard.dtype(), device_) : shard;
    check(ncclReduceScatter(in.data_ptr(), out.data_ptr(), static_cast<size_t>(shard.numel()),
                            nccl_type(flat.dtype()), ncclSum, comm_, stream),
          "ncclReduceScatter");
    wait_for_comm("ncclReduceScatter");
    wait_for_stream(stream, "ncclReduceScatter (dist.zero 1)");
    if (shard.device().is_cpu()) shard.copy_(out);
  }
  void all_gather(const Tensor& flat) override {
    start_all_gather(flat);
    wait_for_sums();
  }
  // A stage's gradients on the device (the streaming executor, as each
  // stage's backward ends): on the communication stream, `flat` and
  // `shard` held until the wait. Host buffers are reduced at once (an
  // entry all the same, so that every start is one).
  void start_reduce_scatter(const Tensor& flat, const Tensor& shard) override {
    if (flat.device().is_cpu() || shard.device().is_cpu()) {
      reduce_scatter(flat, shard);
      comm_stream();
      push_in_flight({}, "ncclReduceScatter (dist.zero 1)");
      return;
    }
    check_reduce_scatter(flat, shard);
    cudaStream_t stream = comm_stream();
    check(ncclReduceScatter(flat.data_ptr(), shard.data_ptr(), static_cast<size_t>(shard.numel()),
                            nccl_type(flat.dtype()), ncclSum, comm_, stream),
          "ncclReduceScatter");
    wait_for_comm("ncclReduceScatter");
    push_in_flight({flat, shard}, "ncclReduceScatter (dist.zero 1)");
  }

 private:
  static constexpr size_t kScratchDoubles = 1024;

  struct InFlight {
    std::vector<Tensor> held;  // what NCCL reads or writes until `done`
    cudaEvent_t done = nullptr;
    const char* what = "";
    Tensor landing, host;  // a host all-gather: `landing` is copied into `host`
  };
  // Made on first use; it starts after the compute stream's work so far.
  cudaStream_t comm_stream() {
    if (!comm_stream_)
      LT_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
    cudaEvent_t ready = nullptr;
    LT_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    LT_CUDA_CHECK(cudaEventRecord(ready, current()));
    LT_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, ready, 0));
    LT_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait is done
    return comm_stream_;
  }
  // `stream` (the compute stream) waits for what the communication stream
  // was given so far (Note [Collectives on the communication stream]).
  void after_comm_stream(cudaStream_t stream) {
    if (in_flight_.empty()) return;
    LT_CUDA_CHECK(cudaStreamWaitEvent(stream, in_flight_.back().done, 0));
  }
  InFlight& push_in_flight(std::vector<Tensor> held, const char* what) {
    InFlight& f = in_flight_.emplace_back();
    f.held = std::move(held);
    f.what = what;
    LT_CUDA_CHECK(cudaEventCreateWithFlags(&f.done, cudaEventDisableTiming));
    LT_CUDA_CHECK(cudaEventRecord(f.done, comm_stream_));
    return f;
  }

  // One group: NCCL fuses the tensors' all-reduces into few launches.
  void all_reduce(const std::vector<Tensor>& tensors, cudaStream_t stream) {
    check(ncclGroupStart(), "ncclGroupStart");
    for (const Tensor& t : tensors) {
      LT_CHECK(t.device() == device_ && t.is_contiguous(), "data parallel over NCCL on ",
               device_.str(), " sums contiguous tensors there, got ", t.str());
      check(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                          nccl_type(t.dtype()), ncclSum, comm_, stream),
            "ncclAllReduce");
    }
    check(ncclGroupEnd(), "ncclGroupEnd");
    wait_for_comm("ncclGroupEnd");  // enqueued before anything is queued behind it
  }

  void check_reduce_scatter(const Tensor& flat, const Tensor& shard) const {
    check_shards(flat, shard.numel());
    LT_CHECK(flat.dtype() == shard.dtype(), "ncclReduceScatter: ", flat.str(), " into ",
             shard.str());
  }
  void check_shards(const Tensor& flat, int64_t shard) const {
    LT_CHECK(flat.is_contiguous() && flat.numel() == shard * world_.size,
             "dist.zero 1: a flat buffer of ", flat.numel(), " elements is not ", world_.size,
             " shards of ", shard, " (", flat.str(), ")");
    LT_CHECK(flat.device().is_cpu() || flat.device() == device_, "dist.zero 1 over NCCL on ",
             device_.str(), ": ", flat.str(), " is on another device");
  }
  // `t` itself on this rank's GPU, else a device copy of it (the current
  // stream; copied back by the caller).
  Tensor on_device(const Tensor& t) const {
    return t.device().is_cpu() ? t.contiguous().to(device_) : t;
  }
  cudaStream_t current() const {
    return static_cast<cudaStream_t>(current_stream(device_).handle());
  }
  [[noreturn]] void abort_and_fail(const std::string& what) {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    fail("rank ", world_.rank, " of ", world_.size, ": ", what);
  }
  void check(ncclResult_t r, const char* call) {
    if (r == ncclSuccess || r == ncclInProgress) return;
    abort_and_fail(std::string(call) + " failed: " + ncclGetErrorString(r) + " (" +
                   ncclGetLastError(comm_) + ")");
  }
  // Polls until the non-blocking communicator is ready: after an init, and
  // after a call that returned ncclInProgress, whose work is only on the
  // stream once this returns (so nothing may be queued behind it before).
  void wait_for_comm(const char* call) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    while (true) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) check(state, call);
      if (Clock::now() > deadline)
        abort_and_fail(std::string(call) + " did not complete within dist.timeout_s = " +
                       std::to_string(timeout_s_) + " s: another rank is missing or stuck");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  // Polls the stream (or the event) and the communicator's asynchronous
  // error.
  void wait_for_stream(cudaStream_t stream, const char* what) {
    wait_until([stream] { return cudaStreamQuery(stream); }, what);
  }
  void wait_for_event(cudaEvent_t event, const char* what) {
    wait_until([event] { return cudaEventQuery(event); }, what);
  }
  template <class Query>
  void wait_until(Query query, const char* what) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    while (true) {
      const cudaError_t done = query();
      if (done == cudaSuccess) return;
      if (done != cudaErrorNotReady) LT_CUDA_CHECK(done);
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) check(state, what);
      if (Clock::now() > deadline)
        abort_and_fail(std::string(what) + " did not finish within dist.timeout_s = " +
                       std::to_string(timeout_s_) + " s: another rank died or hangs");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  World world_;
  Device device_;
  double timeout_s_;
  ncclComm_t comm_ = nullptr;
  double* scratch_ = nullptr;           // device buffer for the host doubles' sum
  cudaStream_t comm_stream_ = nullptr;  // collectives started, made on first use
  std::deque<InFlight> in_flight_;      // started, not yet waited for, oldest first
};

}  // namespace

bool nccl_built_in() {
  return true;
}

NcclId make_nccl_id() {
  ncclUniqueId unique{};
  const ncclResult_t r = ncclGetUniqueId(&unique);
  LT_CHECK(r == ncclSuccess, "ncclGetUniqueId: ", ncclGetErrorString(r));
  NcclId id{};
  std::memcpy(id.data(), unique.internal, kNcclIdBytes);
  return id;
}

std::unique_ptr<exec::CrossRankSum> make_nccl_sum(const World& world, int device_index,
                                                  const NcclId& id, double timeout_s) {
  return std::make_unique<NcclSum>(world, device_index, id, timeout_s);
}

}  // namespace lt::dist

#else  // no NCCL in this build

namespace lt::dist {

namespace {
[[noreturn]] void no_nccl() {
  fail(
      "data parallel on GPUs needs NCCL: build with LT_CUDA=ON where nccl.h is found "
      "(/usr/local/cuda)");
}
}  // namespace

bool nccl_built_in() {
  return false;
}
NcclId make_nccl_id() {
  no_nccl();
}
std::unique_ptr<exec::CrossRankSum> make_nccl_sum(const World&, int, const NcclId&, double) {
  no_nccl();
}

}  // namespace lt::dist

#endif
