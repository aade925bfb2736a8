#include "exec/stage_state_file.h"

#include <bit>
#include <cstring>

#include "core/error.h"
#include "core/thread_pool.h"
#include "exec/streaming_disk.h"

namespace lt::exec {

namespace {

constexpr const char* kStatePrefix = "lazytrain_states_";

int64_t padded(int64_t bytes) {
  return (bytes + io::kDiskAlignment - 1) / io::kDiskAlignment * io::kDiskAlignment;
}

// The blocks' checksums, on the thread pool: one thread sums 3-10 GB/s,
// and the states thread that calls this is what a disk stage's update
// waits for (the 14B checks 56 GB a step).
std::vector<uint64_t> checksums_of(const Tensor& t) {
  const auto* p = static_cast<const char*>(t.data_ptr());
  const auto n = static_cast<int64_t>(t.nbytes());
  constexpr int64_t kBlock = StageStateFile::kChecksumBlock;
  std::vector<uint64_t> out(static_cast<size_t>((n + kBlock - 1) / kBlock));
  constexpr int64_t kBlocksPerTask = 32;  // 2 MiB
  parallel_for(0, static_cast<int64_t>(out.size()), kBlocksPerTask, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      out[static_cast<size_t>(b)] =
          block_checksum(p + b * kBlock, std::min(kBlock, n - b * kBlock));
  });
  return out;
}

// Runs one transfer of the file; an I/O error (its message names the file
// and the operation) also says which stage and state it was moving.
template <typename Fn>
void naming_the_state(const std::string& stage_name, const std::string& label, Fn&& transfer) {
  try {
    transfer();
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (stage '" + stage_name + "', state '" + label + "')");
  }
}

void check_host(const std::string& path, const std::string& stage_name, const std::string& label,
                const Tensor& t) {
  LT_CHECK(t.defined() && t.device().is_cpu() && t.is_contiguous(), path, ": stage '", stage_name,
           "': state '", label, "' is not a contiguous host tensor");
}

}  // namespace

uint64_t block_checksum(const void* data, int64_t bytes) {
  // Four independent lanes, so the multiplies of neighbouring words overlap
  // in the pipeline instead of waiting on one chain.
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {0x243F6A8885A308D3ull, 0x13198A2E03707344ull, 0xA4093822299F31D0ull,
                      0x082EFA98EC4E6C89ull};
  int64_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int k = 0; k < 4; ++k) {
      uint64_t word;
      std::memcpy(&word, p + i + 8 * k, 8);
      lane[k] = std::rotl((lane[k] ^ word) * kMul, 29);
    }
  }
  uint64_t h = static_cast<uint64_t>(bytes);
  for (uint64_t l : lane) h = std::rotl((h ^ l) * kMul, 29);
  for (; i < bytes; ++i) h = std::rotl((h ^ p[i]) * kMul, 29);
  return h ^ (h >> 31);
}

StageStateFile::StageStateFile(Options options)
    : file_(std::make_unique<io::DiskOffloadFile>(
          new_scratch_path(options.directory, kStatePrefix,
                           "exec.state_placement puts the master weights and optimizer states"),
          options.file)) {}

StageStateFile::~StageStateFile() = default;

bool StageStateFile::has(int stage) const {
  return stage >= 0 && static_cast<size_t>(stage) < stages_.size() &&
         !stages_[static_cast<size_t>(stage)].tensors.empty();
}

void StageStateFile::write(int stage, const std::string& stage_name,
                           const std::vector<std::string>& labels,
                           const std::vector<Tensor>& tensors) {
  LT_CHECK(stage >= 0 && labels.size() == tensors.size(), path(), ": stage '", stage_name,
           "': ", tensors.size(), " states with ", labels.size(), " names");
  if (static_cast<size_t>(stage) >= stages_.size()) stages_.resize(static_cast<size_t>(stage) + 1);
  StageRegion& r = stages_[static_cast<size_t>(stage)];
  if (r.tensors.empty()) {  // first write: one region for the whole stage
    int64_t total = 0;
    for (const Tensor& t : tensors) total += padded(static_cast<int64_t>(t.nbytes()));
    const io::DiskRegion whole = file_->allocate(total);
    int64_t at = whole.offset;
    for (const Tensor& t : tensors) {
      r.tensors.push_back({at, static_cast<int64_t>(t.nbytes())});
      at += padded(static_cast<int64_t>(t.nbytes()));
    }
    r.checksums.resize(tensors.size());
  }
  LT_CHECK(r.tensors.size() == tensors.size(), path(), ": stage '", stage_name, "' wrote ",
           r.tensors.size(), " states before, now ", tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    check_host(path(), stage_name, labels[k], tensors[k]);
    LT_CHECK(static_cast<int64_t>(tensors[k].nbytes()) == r.tensors[k].bytes, path(), ": stage '",
             stage_name, "': state '", labels[k], "' has ", tensors[k].nbytes(),
             " bytes, its region ", r.tensors[k].bytes);
    r.checksums[k] = checksums_of(tensors[k]);
    naming_the_state(stage_name, labels[k],
                     [&] { file_->write(r.tensors[k], tensors[k].data_ptr()); });
  }
}

void StageStateFile::read(int stage, const std::string& stage_name,
                          const std::vector<std::string>& labels,
                          const std::vector<Tensor>& tensors) {
  LT_CHECK(has(stage), path(), ": stage '", stage_name,
           "' is read back but was never written (a bug in the executor)");
  const StageRegion& r = stages_[static_cast<size_t>(stage)];
  LT_CHECK(r.tensors.size() == tensors.size() && labels.size() == tensors.size(), path(),
           ": stage '", stage_name, "' holds ", r.tensors.size(), " states, ", tensors.size(),
           " are read");
  for (size_t k = 0; k < tensors.size(); ++k) {
    check_host(path(), stage_name, labels[k], tensors[k]);
    LT_CHECK(static_cast<int64_t>(tensors[k].nbytes()) == r.tensors[k].bytes, path(), ": stage '",
             stage_name, "': state '", labels[k], "' is read into ", tensors[k].nbytes(),
             " bytes, it has ", r.tensors[k].bytes);
    naming_the_state(stage_name, labels[k],
                     [&] { file_->read(r.tensors[k], tensors[k].data_ptr()); });
    const std::vector<uint64_t> sums = checksums_of(tensors[k]);
    for (size_t b = 0; b < sums.size(); ++b) {
      LT_CHECK(sums[b] == r.checksums[k][b], path(), ": read of stage '", stage_name, "': state '",
               labels[k], "' fails its checksum in bytes [",
               static_cast<int64_t>(b) * kChecksumBlock, ", ",
               std::min(static_cast<int64_t>(b + 1) * kChecksumBlock, r.tensors[k].bytes),
               ") at file offset ", r.tensors[k].offset + static_cast<int64_t>(b) * kChecksumBlock,
               " (the file was changed or the disk returned bad data)");
    }
  }
}

int64_t StageStateFile::file_offset(int stage, size_t tensor, int64_t byte) const {
  LT_CHECK(has(stage) && tensor < stages_[static_cast<size_t>(stage)].tensors.size(), path(),
           ": no state ", tensor, " of stage ", stage);
  return stages_[static_cast<size_t>(stage)].tensors[tensor].offset + byte;
}

int remove_stale_state_files(const std::string& directory) {
  return io::remove_unlocked_files(directory, kStatePrefix);
}

}  // namespace lt::exec
