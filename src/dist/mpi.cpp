#include "dist/mpi.h"

#include "core/error.h"

#ifdef LT_HAVE_MPI
// MPI's C API only: the deprecated C++ bindings need their own library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

namespace lt::dist {

namespace {

void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail("MPI error in ", call, ": ", std::string(text, static_cast<size_t>(length)));
}

// MPI counts are ints: larger buffers go in pieces of this many elements.
constexpr int64_t kMaxElementsPerCall = INT_MAX / 2;

template <typename T>
void allreduce_in_place(T* data, int64_t n, MPI_Datatype type, MPI_Op op = MPI_SUM) {
  for (int64_t done = 0; done < n; done += kMaxElementsPerCall) {
    const int count = static_cast<int>(std::min(kMaxElementsPerCall, n - done));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, data + done, count, type, op, MPI_COMM_WORLD),
              "MPI_Allreduce");
  }
}

class MpiSum final : public exec::CrossRankSum {
 public:
  MpiSum() {
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  }
  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  void sum(std::span<double> values) override {
    allreduce_in_place(values.data(), static_cast<int64_t>(values.size()), MPI_DOUBLE);
  }
  void sum(const std::vector<Tensor>& tensors) override {
    for (const Tensor& t : tensors) {
      LT_CHECK(t.device().is_cpu() && t.dtype() == DType::F32 && t.is_contiguous(),
               "data parallel over MPI sums contiguous f32 tensors on the CPU, got ", t.str(),
               " (a GPU run uses NCCL; train.dtype on the CPU must be f32)");
      allreduce_in_place(t.data<float>(), t.numel(), MPI_FLOAT);
    }
  }

 private:
  int rank_ = 0, size_ = 1;
};

extern "C" void finalize_mpi_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

bool mpi_built_in() {
  return true;
}

void mpi_start(int rank, int size) {
  int provided = 0;
  check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  std::atexit(finalize_mpi_at_exit);
  int mpi_rank = 0, mpi_size = 1;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &mpi_size), "MPI_Comm_size");
  LT_CHECK(mpi_rank == rank && mpi_size == size, "MPI says rank ", mpi_rank, " of ", mpi_size,
           ", the launcher's environment rank ", rank, " of ", size,
           " (is this lazytrain linked with another MPI than the mpirun that started it?)");
}

std::unique_ptr<exec::CrossRankSum> make_mpi_sum() {
  return std::make_unique<MpiSum>();
}

void mpi_broadcast(std::span<char> bytes) {
  check_mpi(MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, MPI_COMM_WORLD),
            "MPI_Bcast");
}

bool mpi_any(bool flag) {
  int value = flag ? 1 : 0;
  allreduce_in_place(&value, 1, MPI_INT, MPI_MAX);
  return value != 0;
}

void mpi_abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
}

}  // namespace lt::dist

#else  // no MPI in this build

namespace lt::dist {

namespace {
[[noreturn]] void no_mpi() {
  fail(
      "this lazytrain was built without MPI, which a run of several processes on the CPU needs: "
      "install libopenmpi-dev (scripts/install-deps.sh) and rebuild");
}
}  // namespace

bool mpi_built_in() {
  return false;
}
void mpi_start(int, int) {
  no_mpi();
}
std::unique_ptr<exec::CrossRankSum> make_mpi_sum() {
  no_mpi();
}
void mpi_broadcast(std::span<char>) {
  no_mpi();
}
bool mpi_any(bool) {
  no_mpi();
}
void mpi_abort(int) {}

}  // namespace lt::dist

#endif
