#include "dist/nccl_sum.h"

#include "core/error.h"

#if defined(LT_WITH_CUDA) && defined(LT_HAVE_NCCL)
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/cuda/check.cuh"
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
    all_reduce(tensors, stream);
    wait_for_stream(stream, "ncclAllReduce (gradients)");
  }

  // A gradient bucket: its all-reduce runs on a communication stream of its
  // own after the compute stream's work so far (an event), so the backward
  // goes on meanwhile. The tensors are held until wait_for_sums() has seen
  // the communication stream finish, so the caching allocator cannot hand
  // their memory to the compute stream while NCCL still reads it.
  void start_sum(const std::vector<Tensor>& tensors) override {
    if (!comm_stream_)
      LT_CUDA_CHECK(cudaStreamCreateWithFlags(&comm_stream_, cudaStreamNonBlocking));
    cudaEvent_t ready = nullptr;
    LT_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    LT_CUDA_CHECK(cudaEventRecord(ready, current()));
    LT_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, ready, 0));
    LT_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait is done
    all_reduce(tensors, comm_stream_);
    in_flight_.insert(in_flight_.end(), tensors.begin(), tensors.end());
  }
  // The host waits for the communication stream (bounded, as every wait),
  // so work the compute stream queues after this sees the sums.
  void wait_for_sums() override {
    if (in_flight_.empty()) return;
    wait_for_stream(comm_stream_, "ncclAllReduce (gradient buckets)");
    in_flight_.clear();
  }

  // ZeRO-1 (exec/cross_rank_sum.h), on the current stream, the host
  // waiting (bounded). Device tensors are reduced where they are (a
  // stage's gradients, before the download: each rank then copies only
  // its shard to the host); host tensors (ZeroOptimizer's f32 buffers:
  // the masters' all-gather) go through device memory.
  void reduce_scatter(const Tensor& flat, const Tensor& shard) override {
    check_shards(flat, shard.numel());
    LT_CHECK(flat.dtype() == shard.dtype(), "ncclReduceScatter: ", flat.str(), " into ",
             shard.str());
    cudaStream_t stream = current();
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
    const int64_t shard = flat.numel() / world_.size;
    check_shards(flat, shard);
    cudaStream_t stream = current();
    const Tensor buffer = on_device(flat);
    char* base = static_cast<char*>(buffer.data_ptr());
    const size_t bytes = static_cast<size_t>(shard) * dtype_size(flat.dtype());
    // In place: this rank's shard already sits at its place in `buffer`.
    check(ncclAllGather(base + static_cast<size_t>(world_.rank) * bytes, base,
                        static_cast<size_t>(shard), nccl_type(flat.dtype()), comm_, stream),
          "ncclAllGather");
    wait_for_comm("ncclAllGather");
    wait_for_stream(stream, "ncclAllGather (dist.zero 1)");
    if (flat.device().is_cpu()) flat.copy_(buffer);
  }

 private:
  static constexpr size_t kScratchDoubles = 1024;

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
  // Polls the stream and the communicator's asynchronous error.
  void wait_for_stream(cudaStream_t stream, const char* what) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s_);
    while (true) {
      const cudaError_t done = cudaStreamQuery(stream);
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
  cudaStream_t comm_stream_ = nullptr;  // gradient buckets (start_sum), made on first use
  std::vector<Tensor> in_flight_;       // buckets started, not yet waited for
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
