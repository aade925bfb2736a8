// Bounded waits for MPI's collectives (dist/mpi_waits.h).
//
// Note [Naming the rank that does not come]
// An MPI collective cannot be given a timeout, nor asked who is missing.
// So every collective this program runs is non-blocking (MPI_Iallreduce,
// MPI_Ibcast, MPI_Ibarrier, ...), and its wait polls until done or until
// dist.timeout_s has passed. To name the culprit, each rank, as it starts
// its k-th collective, also sends every other rank an "arrival notice" k
// (8 bytes, point to point on MPI_COMM_WORLD under a tag of its own, which
// nothing else sends on; collectives never match point-to-point messages).
// A rank that gives up names the ranks whose latest notice is below k:
// those that are hung, stopped, or slower than the timeout. A rank can
// also stop inside a collective it has reached: so while a rank waits it
// repeats its notice about once a second (a heartbeat), and when every
// rank has reached the collective, the one that gives up names those it
// has not heard from for half the timeout. (A rank that dies is also
// noticed by mpirun, which then ends the job naming it, usually sooner.)
// The cost is 2 (N - 1) small messages per collective, and a step has a
// handful of collectives.
//
// A collective of the ranks of one host (dist/mpi.cpp) is counted on every
// rank all the same (every rank runs its own host's), and its wait names
// only ranks of that host: those of another host may lag behind it
// without holding it up.
//
// After an error this process calls MPI_Abort (cli/ranks.cpp) and makes no
// other MPI call: buffers of collectives still in flight are left
// allocated rather than freed under MPI's feet.
#include "dist/mpi_waits.h"

#ifdef LT_HAVE_MPI
#include <algorithm>
#include <chrono>
#include <deque>
#include <thread>
#include <vector>

namespace lt::dist {

namespace {

using Clock = std::chrono::steady_clock;

class ArrivalNotices {
 public:
  ArrivalNotices() {
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    int size = 1;
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    latest_.assign(static_cast<size_t>(size), 0);
    last_heard_.assign(static_cast<size_t>(size), Clock::now());
    inbox_.assign(static_cast<size_t>(size), 0);
    receives_.assign(static_cast<size_t>(size), MPI_REQUEST_NULL);
    for (int p = 0; p < size; ++p)
      if (p != rank_) post_receive(p);
  }
  ArrivalNotices(const ArrivalNotices&) = delete;
  ArrivalNotices& operator=(const ArrivalNotices&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(latest_.size()); }

  void announce(int64_t sequence) {
    poll();
    drop_sent();
    for (int p = 0; p < size(); ++p) {
      if (p == rank_) continue;
      Send& s = sends_.emplace_back();  // a deque: earlier buffers stay put
      s.value = sequence;
      check_mpi(MPI_Isend(&s.value, 1, MPI_INT64_T, p, kTag, MPI_COMM_WORLD, &s.request),
                "MPI_Isend");
    }
  }
  // The ranks of `among` that have not announced collective `sequence` yet.
  std::vector<int> missing(int64_t sequence, std::span<const int> among) {
    poll();
    std::vector<int> out;
    for (int p : among)
      if (latest_[static_cast<size_t>(p)] < sequence) out.push_back(p);
    return out;
  }
  // The ranks of `among` not heard from (a notice or a heartbeat) for
  // `seconds`.
  std::vector<int> silent_for(double seconds, std::span<const int> among) {
    poll();
    std::vector<int> out;
    const auto since = Clock::now() - std::chrono::duration<double>(seconds);
    for (int p : among)
      if (last_heard_[static_cast<size_t>(p)] < since) out.push_back(p);
    return out;
  }
  // Before MPI_Finalize. Sends a stopped peer never took may still read
  // their buffers: those are left allocated.
  void close() {
    for (MPI_Request& r : receives_) {
      if (r == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);  // a cancelled receive completes locally
    }
    drop_sent();
    if (!sends_.empty()) new std::deque<Send>(std::move(sends_));
  }

 private:
  static constexpr int kTag = 21;
  struct Send {
    int64_t value = 0;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  void post_receive(int p) {
    check_mpi(MPI_Irecv(&inbox_[static_cast<size_t>(p)], 1, MPI_INT64_T, p, kTag, MPI_COMM_WORLD,
                        &receives_[static_cast<size_t>(p)]),
              "MPI_Irecv");
  }
  void poll() {
    for (int p = 0; p < size(); ++p) {
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

  int rank_ = 0;
  std::vector<int64_t> latest_, inbox_;
  std::vector<Clock::time_point> last_heard_;
  std::vector<MPI_Request> receives_;
  std::deque<Send> sends_;
};

// Only the main thread calls MPI (MPI_THREAD_FUNNELED), so no lock.
ArrivalNotices* notices = nullptr;
int64_t started = 0;  // collectives begun, the same count on every rank

ArrivalNotices& the_notices() {
  if (!notices) notices = new ArrivalNotices();  // closed, never freed: see close()
  return *notices;
}

std::string list(const std::vector<int>& ranks) {
  std::string out;
  for (int p : ranks) out += (out.empty() ? "" : ", ") + std::to_string(p);
  return out;
}

[[noreturn]] void fail_waiting(int64_t sequence, const std::string& what, double timeout_s,
                               std::span<const int> among) {
  ArrivalNotices& n = the_notices();
  const std::vector<int> missing = n.missing(sequence, among);
  if (missing.empty()) {
    const std::vector<int> silent = n.silent_for(timeout_s / 2, among);
    if (silent.empty())
      fail("waited dist.timeout_s = ", timeout_s, " s for ", what, " (collective ", sequence,
           "): every rank reached it and is alive, but it did not complete");
    fail("waited dist.timeout_s = ", timeout_s, " s for ", what, " (collective ", sequence,
         "): rank", silent.size() > 1 ? "s " : " ", list(silent),
         " reached it but went silent inside it (stopped or hung) for over ", timeout_s / 2, " s");
  }
  fail("waited dist.timeout_s = ", timeout_s, " s for ", what, " (collective ", sequence, "): rank",
       missing.size() > 1 ? "s " : " ", list(missing), missing.size() > 1 ? " have" : " has",
       " not reached it (hung, stopped, or slower than the timeout)");
}

// Polls of a wait before it starts to sleep between them (~tens of µs).
constexpr int kSpinPolls = 2000;
// How often a waiting rank repeats its notice (a quarter of the timeout
// when that is shorter).
constexpr double kHeartbeatS = 1.0;

}  // namespace

int64_t begin_collective() {
  the_notices().announce(++started);
  return started;
}

// Spinning first keeps a step's many short waits fast; then the rank
// sleeps between polls, leaving the cores to the ranks it waits for.
void bounded_wait(std::span<MPI_Request> requests, int64_t sequence, const std::string& what,
                  double timeout_s, std::span<const int> among) {
  ArrivalNotices& n = the_notices();
  std::vector<int> others;
  if (among.empty()) {
    for (int p = 0; p < n.size(); ++p)
      if (p != n.rank()) others.push_back(p);
    among = others;
  }
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  const auto beat = std::chrono::duration<double>(std::min(kHeartbeatS, timeout_s / 4));
  auto next_beat = start + beat;
  for (int polls = 0;; ++polls) {
    int done = 0;
    check_mpi(
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
        "MPI_Testall");
    if (done) return;
    const auto now = Clock::now();
    if (now > deadline) fail_waiting(sequence, what, timeout_s, among);
    if (now > next_beat) {
      n.announce(sequence);  // the same notice again: still alive, still here
      next_beat = now + beat;
    }
    if (polls < kSpinPolls) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void close_collective_waits() {
  if (notices) notices->close();
}

}  // namespace lt::dist

#endif  // LT_HAVE_MPI
