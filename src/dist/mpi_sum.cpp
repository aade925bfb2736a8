// The CPU's collectives over MPI (dist/mpi.h: make_mpi_sum), each one
// bounded by dist.timeout_s.
//
// Note [Naming the rank that does not come]
// An MPI collective cannot be given a timeout, nor asked who is missing.
// So every collective here is non-blocking (MPI_Iallreduce, ...), and its
// wait polls until done or until dist.timeout_s has passed. To name the
// culprit, each rank, as it starts its k-th collective, also sends every
// other rank an "arrival notice" k (8 bytes, point to point, on a
// communicator of its own). A rank that gives up names the ranks whose
// latest notice is below k: those that are hung, stopped, or slower than
// the timeout. A rank can also stop inside a collective it has reached:
// so while a rank waits it repeats its notice about once a second (a
// heartbeat), and when every rank has reached the collective, the one that
// gives up names those it has not heard from for half the timeout. (A rank
// that dies is also noticed by mpirun, which then ends the job naming it,
// usually sooner.) The cost is 2 (N - 1) small messages per collective, and
// a step has a handful of collectives.
//
// After an error this process calls MPI_Abort (cli/ranks.cpp) and makes no
// other MPI call: buffers of collectives still in flight are left
// allocated rather than freed under MPI's feet.
#include "dist/mpi.h"

#ifdef LT_HAVE_MPI
#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

#include "dist/mpi_check.h"

namespace lt::dist {

namespace {

using Clock = std::chrono::steady_clock;

class ArrivalNotices {
 public:
  ArrivalNotices(int rank, int size) : rank_(rank) {
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
    latest_.assign(static_cast<size_t>(size), 0);
    last_heard_.assign(static_cast<size_t>(size), Clock::now());
    inbox_.assign(static_cast<size_t>(size), 0);
    receives_.assign(static_cast<size_t>(size), MPI_REQUEST_NULL);
    for (int p = 0; p < size; ++p)
      if (p != rank_) post_receive(p);
  }
  ~ArrivalNotices() {
    for (MPI_Request& r : receives_) {
      if (r == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);  // a cancelled receive completes locally
    }
    drop_sent();
    // Sends a stopped peer never took may still read their buffers.
    if (!sends_.empty()) new std::deque<Send>(std::move(sends_));
  }
  ArrivalNotices(const ArrivalNotices&) = delete;
  ArrivalNotices& operator=(const ArrivalNotices&) = delete;

  void announce(int64_t sequence) {
    poll();
    drop_sent();
    for (int p = 0; p < static_cast<int>(latest_.size()); ++p) {
      if (p == rank_) continue;
      Send& s = sends_.emplace_back();  // a deque: earlier buffers stay put
      s.value = sequence;
      check_mpi(MPI_Isend(&s.value, 1, MPI_INT64_T, p, kTag, comm_, &s.request), "MPI_Isend");
    }
  }
  // The ranks that have not announced collective `sequence` yet.
  std::vector<int> missing(int64_t sequence) {
    poll();
    std::vector<int> out;
    for (int p = 0; p < static_cast<int>(latest_.size()); ++p)
      if (p != rank_ && latest_[static_cast<size_t>(p)] < sequence) out.push_back(p);
    return out;
  }
  // The ranks not heard from (a notice or a heartbeat) for `seconds`.
  std::vector<int> silent_for(double seconds) {
    poll();
    std::vector<int> out;
    const auto since = Clock::now() - std::chrono::duration<double>(seconds);
    for (int p = 0; p < static_cast<int>(latest_.size()); ++p)
      if (p != rank_ && last_heard_[static_cast<size_t>(p)] < since) out.push_back(p);
    return out;
  }

 private:
  static constexpr int kTag = 21;
  struct Send {
    int64_t value = 0;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  void post_receive(int p) {
    check_mpi(MPI_Irecv(&inbox_[static_cast<size_t>(p)], 1, MPI_INT64_T, p, kTag, comm_,
                        &receives_[static_cast<size_t>(p)]),
              "MPI_Irecv");
  }
  void poll() {
    for (int p = 0; p < static_cast<int>(receives_.size()); ++p) {
      const size_t i = static_cast<size_t>(p);
      if (p == rank_) continue;
      int arrived = 1;
      while (arrived) {
        check_mpi(MPI_Test(&receives_[i], &arrived, MPI_STATUS_IGNORE), "MPI_Test");
        if (!arrived) break;
        latest_[i] = inbox_[i];  // a pair's messages arrive in the order sent
        last_heard_[i] = Clock::now();
        post_receive(p);
      }
    }
  }
  void drop_sent() {
    while (!sends_.empty()) {
      int done = 0;
      check_mpi(MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (!done) return;
      sends_.pop_front();
    }
  }

  int rank_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // left to MPI_Finalize: freeing it is collective
  std::vector<int64_t> latest_, inbox_;
  std::vector<Clock::time_point> last_heard_;
  std::vector<MPI_Request> receives_;
  std::deque<Send> sends_;
};

void check_cpu_f32(const Tensor& t) {
  LT_CHECK(t.device().is_cpu() && t.dtype() == DType::F32 && t.is_contiguous(),
           "data parallel over MPI sums contiguous f32 tensors on the CPU, got ", t.str(),
           " (a GPU run uses NCCL; train.dtype on the CPU must be f32)");
}

class MpiSum final : public exec::CrossRankSum {
 public:
  explicit MpiSum(double timeout_s) : timeout_s_(timeout_s) {
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    arrivals_.emplace(rank_, size_);
  }
  ~MpiSum() override {
    if (!in_flight_.empty()) new std::vector<InFlight>(std::move(in_flight_));
  }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }

  void sum(std::span<double> values) override {
    const int64_t sequence = begin_collective();
    std::vector<MPI_Request> requests;
    for (int64_t done = 0; done < static_cast<int64_t>(values.size());
         done += kMaxElementsPerCall) {
      const int count = piece(static_cast<int64_t>(values.size()), done);
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, values.data() + done, count, MPI_DOUBLE, MPI_SUM,
                               MPI_COMM_WORLD, &requests.emplace_back()),
                "MPI_Iallreduce");
    }
    bounded_wait(requests, sequence, "the sum of losses, counts and flags");
  }

  void sum(const std::vector<Tensor>& tensors) override {
    start_sum(tensors);
    wait_for_sums();
  }

  // One tensor is summed in place; several are packed into one buffer
  // first, so that a bucket is one collective.
  void start_sum(const std::vector<Tensor>& tensors) override {
    if (tensors.empty()) return;
    InFlight f;
    f.tensors = tensors;
    f.sequence = begin_collective();
    float* data = nullptr;
    int64_t n = 0;
    for (const Tensor& t : tensors) {
      check_cpu_f32(t);
      n += t.numel();
    }
    if (tensors.size() == 1) {
      data = tensors[0].data<float>();
    } else {
      f.packed.resize(static_cast<size_t>(n));
      int64_t at = 0;
      for (const Tensor& t : tensors) {
        std::copy_n(t.data<float>(), t.numel(), f.packed.data() + at);
        at += t.numel();
      }
      data = f.packed.data();
    }
    for (int64_t done = 0; done < n; done += kMaxElementsPerCall) {
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data + done, piece(n, done), MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD, &f.requests.emplace_back()),
                "MPI_Iallreduce");
    }
    in_flight_.push_back(std::move(f));
  }

  void wait_for_sums() override { wait_for_oldest_sums(in_flight_.size()); }

  void wait_for_oldest_sums(size_t count) override {
    count = std::min(count, in_flight_.size());
    if (count == 0) return;
    std::vector<MPI_Request> requests;
    for (size_t k = 0; k < count; ++k)
      requests.insert(requests.end(), in_flight_[k].requests.begin(), in_flight_[k].requests.end());
    bounded_wait(requests, in_flight_.front().sequence, in_flight_.front().what);
    for (size_t k = 0; k < count; ++k) {
      InFlight& f = in_flight_[k];
      if (!f.unpack || f.packed.empty()) continue;
      int64_t at = 0;
      for (const Tensor& t : f.tensors) {
        std::copy_n(f.packed.data() + at, t.numel(), t.data<float>());
        at += t.numel();
      }
    }
    in_flight_.erase(in_flight_.begin(), in_flight_.begin() + static_cast<int64_t>(count));
  }

  void reduce_scatter(const Tensor& flat, const Tensor& shard) override {
    start_reduce_scatter(flat, shard);
    wait_for_sums();
  }

  void all_gather(const Tensor& flat) override {
    start_all_gather(flat);
    wait_for_sums();
  }

  void start_reduce_scatter(const Tensor& flat, const Tensor& shard) override {
    check_shards(flat, shard.numel());
    check_cpu_f32(shard);
    InFlight& f = start_collective({flat, shard}, "the gradient reduce-scatter (dist.zero 1)");
    check_mpi(MPI_Ireduce_scatter_block(flat.data<float>(), shard.data<float>(),
                                        static_cast<int>(shard.numel()), MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD, &f.requests.emplace_back()),
              "MPI_Ireduce_scatter_block");
  }

  void start_all_gather(const Tensor& flat) override {
    const int64_t shard = flat.numel() / size_;
    check_shards(flat, shard);
    InFlight& f = start_collective({flat}, "the weights' all-gather (dist.zero 1)");
    check_mpi(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, flat.data<float>(),
                             static_cast<int>(shard), MPI_FLOAT, MPI_COMM_WORLD,
                             &f.requests.emplace_back()),
              "MPI_Iallgather");
  }

 private:
  struct InFlight {
    std::vector<Tensor> tensors;
    std::vector<float> packed;  // empty: the one tensor is summed in place
    std::vector<MPI_Request> requests;
    int64_t sequence = 0;
    const char* what = "the gradient all-reduce";
    bool unpack = true;  // a sum: copy `packed` back into the tensors
  };
  // A reduce-scatter or all-gather in flight, holding `tensors` until the wait.
  InFlight& start_collective(std::vector<Tensor> tensors, const char* what) {
    InFlight& f = in_flight_.emplace_back();
    f.tensors = std::move(tensors);
    f.sequence = begin_collective();
    f.what = what;
    f.unpack = false;
    return f;
  }

  static int piece(int64_t n, int64_t done) {
    return static_cast<int>(std::min(kMaxElementsPerCall, n - done));
  }
  void check_shards(const Tensor& flat, int64_t shard) const {
    check_cpu_f32(flat);
    LT_CHECK(flat.numel() == shard * size_, "dist.zero 1: a flat buffer of ", flat.numel(),
             " elements is not ", size_, " shards of ", shard);
    LT_CHECK(shard <= kMaxElementsPerCall, "dist.zero 1: a shard of ", shard,
             " elements is more than one MPI call moves (", kMaxElementsPerCall, ")");
  }
  int64_t begin_collective() {
    ++sequence_;
    arrivals_->announce(sequence_);
    return sequence_;
  }
  // Polls `requests` until all are done or dist.timeout_s has passed.
  // Spinning first keeps a step's many short waits fast; then the rank
  // sleeps between polls, leaving the cores to the ranks it waits for.
  void bounded_wait(std::vector<MPI_Request>& requests, int64_t sequence, const char* what) {
    const auto start = Clock::now();
    const auto deadline = start + std::chrono::duration<double>(timeout_s_);
    const auto beat = std::chrono::duration<double>(std::min(kHeartbeatS, timeout_s_ / 4));
    auto next_beat = start + beat;
    for (int polls = 0;; ++polls) {
      int done = 0;
      check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                            MPI_STATUSES_IGNORE),
                "MPI_Testall");
      if (done) return;
      const auto now = Clock::now();
      if (now > deadline) fail_waiting(sequence, what);
      if (now > next_beat) {
        arrivals_->announce(sequence);  // the same notice again: still alive, still here
        next_beat = now + beat;
      }
      if (polls < kSpinPolls) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }
  [[noreturn]] void fail_waiting(int64_t sequence, const char* what) {
    const std::vector<int> missing = arrivals_->missing(sequence);
    std::string who;
    for (int p : missing) who += (who.empty() ? "" : ", ") + std::to_string(p);
    if (missing.empty()) {
      const std::vector<int> silent = arrivals_->silent_for(timeout_s_ / 2);
      for (int p : silent) who += (who.empty() ? "" : ", ") + std::to_string(p);
      if (silent.empty())
        fail("waited dist.timeout_s = ", timeout_s_, " s for ", what, " (collective ", sequence,
             "): every rank reached it and is alive, but it did not complete");
      fail("waited dist.timeout_s = ", timeout_s_, " s for ", what, " (collective ", sequence,
           "): rank", silent.size() > 1 ? "s " : " ", who,
           " reached it but went silent inside it (stopped or hung) for over ", timeout_s_ / 2,
           " s");
    }
    fail("waited dist.timeout_s = ", timeout_s_, " s for ", what, " (collective ", sequence,
         "): rank", missing.size() > 1 ? "s " : " ", who, missing.size() > 1 ? " have" : " has",
         " not reached it (hung, stopped, or slower than the timeout)");
  }

  // Polls of a wait before it starts to sleep between them (~tens of µs).
  static constexpr int kSpinPolls = 2000;
  // How often a waiting rank repeats its notice (a quarter of the timeout
  // when that is shorter).
  static constexpr double kHeartbeatS = 1.0;
  double timeout_s_;
  int rank_ = 0, size_ = 1;
  int64_t sequence_ = 0;  // collectives started, the same count on every rank
  std::optional<ArrivalNotices> arrivals_;
  std::vector<InFlight> in_flight_;
};

}  // namespace

std::unique_ptr<exec::CrossRankSum> make_mpi_sum(double timeout_s) {
  return std::make_unique<MpiSum>(timeout_s);
}

}  // namespace lt::dist

#endif  // LT_HAVE_MPI
