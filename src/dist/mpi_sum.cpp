// The CPU's collectives over MPI (dist/mpi.h: make_mpi_sum), each one
// bounded by dist.timeout_s, naming the ranks it waited for
// (dist/mpi_waits.h, Note [Naming the rank that does not come]).
#include "dist/mpi.h"

#ifdef LT_HAVE_MPI
#include <algorithm>
#include <numeric>
#include <vector>

#include "dist/mpi_waits.h"

namespace lt::dist {

namespace {

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
    bounded_wait(requests, sequence, "the sum of losses, counts and flags", timeout_s_);
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
    bounded_wait(
        requests, in_flight_.front().sequence, in_flight_.front().what, timeout_s_,
        count == 1 ? std::span<const int>(in_flight_.front().among) : std::span<const int>());
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

  // Note [Gathers among a host's peers]: a communicator of the peers
  // (MPI_Comm_split, colored by the first peer; blocking, so a bounded
  // barrier of every rank comes first, as for the host split), kept only
  // when its members are exactly `peers` on every rank.
  bool join_peers(const std::vector<int>& peers) override {
    LT_CHECK(!peers.empty() && std::is_sorted(peers.begin(), peers.end()) &&
                 std::binary_search(peers.begin(), peers.end(), rank_),
             "dist.share_weights: rank ", rank_, "'s peers must be ascending and hold it");
    bounded_collective(
        "the meeting of the ranks before they find their peers on other hosts", timeout_s_,
        [](MPI_Request* r) { check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, r), "MPI_Ibarrier"); });
    MPI_Comm comm = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(MPI_COMM_WORLD, peers.front(), rank_, &comm), "MPI_Comm_split");
    int size = 0;
    check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    int agree = size == static_cast<int>(peers.size()) ? 1 : 0;
    if (agree) {
      MPI_Group world_group = MPI_GROUP_NULL, peer_group = MPI_GROUP_NULL;
      check_mpi(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group");
      check_mpi(MPI_Comm_group(comm, &peer_group), "MPI_Comm_group");
      std::vector<int> local(peers.size()), world(peers.size());
      std::iota(local.begin(), local.end(), 0);
      check_mpi(
          MPI_Group_translate_ranks(peer_group, size, local.data(), world_group, world.data()),
          "MPI_Group_translate_ranks");
      MPI_Group_free(&peer_group);
      MPI_Group_free(&world_group);
      agree = world == peers ? 1 : 0;
    }
    int all_agree = 0;
    bounded_collective("whether every rank's peers agree", timeout_s_, [&](MPI_Request* r) {
      check_mpi(MPI_Iallreduce(&agree, &all_agree, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, r),
                "MPI_Iallreduce");
    });
    if (!all_agree) return false;  // `comm` is left to MPI_Finalize: freeing it is collective
    peer_comm_ = comm;
    peers_.clear();
    for (int p : peers)
      if (p != rank_) peers_.push_back(p);
    peer_count_ = static_cast<int>(peers.size());
    return true;
  }

  void start_peer_all_gather(const Tensor& blocks) override {
    LT_CHECK(peer_comm_ != MPI_COMM_NULL, "dist.zero 1: a gather among peers before join_peers");
    const int64_t block = blocks.numel() / peer_count_;
    check_blocks(blocks, block, peer_count_);
    InFlight& f =
        start_collective({blocks}, "the weights' all-gather among the hosts (dist.zero 1)");
    f.among = peers_;
    check_mpi(
        MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, blocks.data<float>(),
                       static_cast<int>(block), MPI_FLOAT, peer_comm_, &f.requests.emplace_back()),
        "MPI_Iallgather");
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
    bool unpack = true;      // a sum: copy `packed` back into the tensors
    std::vector<int> among;  // the ranks it waits for (empty: every other)
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
  void check_shards(const Tensor& flat, int64_t shard) const { check_blocks(flat, shard, size_); }
  static void check_blocks(const Tensor& flat, int64_t shard, int count) {
    check_cpu_f32(flat);
    LT_CHECK(flat.numel() == shard * count, "dist.zero 1: a flat buffer of ", flat.numel(),
             " elements is not ", count, " shards of ", shard);
    LT_CHECK(shard <= kMaxElementsPerCall, "dist.zero 1: a shard of ", shard,
             " elements is more than one MPI call moves (", kMaxElementsPerCall, ")");
  }
  double timeout_s_;
  int rank_ = 0, size_ = 1;
  std::vector<InFlight> in_flight_;
  MPI_Comm peer_comm_ = MPI_COMM_NULL;  // join_peers; left to MPI_Finalize
  std::vector<int> peers_;              // its other members
  int peer_count_ = 0;
};

}  // namespace

std::unique_ptr<exec::CrossRankSum> make_mpi_sum(double timeout_s) {
  return std::make_unique<MpiSum>(timeout_s);
}

}  // namespace lt::dist

#endif  // LT_HAVE_MPI
