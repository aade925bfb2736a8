#pragma once
// StageStateFile: the scratch file that holds, with exec.state_placement
// disk, each stage's f32 masters and optimizer states (issue 26). See Note
// [Stage states on disk] in exec/streaming_states.cpp for how the streaming
// executor uses it.
//
// - Each stage has one region of the file, allocated on its first write and
//   reused by every later write (the shapes do not change): its tensors laid
//   end to end, each starting on an io::kDiskAlignment boundary.
// - write() records a checksum per kChecksumBlock bytes of each tensor, in
//   host memory (8 bytes per 64 KiB); read() checks them, so a byte the disk
//   (or anyone) changed is an error naming the file, the stage and the
//   tensor, never a silently wrong weight.
// - I/O goes through io::DiskOffloadFile: O_DIRECT with io_uring, or worker
//   threads doing pread/pwrite; its errors (a full disk included) name the
//   file and the operation. The file is removed on destruction.
// One thread at a time uses a StageStateFile.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "io/disk_offload.h"

namespace lt::exec {

// A cheap checksum of `bytes` bytes (64-bit words mixed by multiply and
// rotate in four lanes; not cryptographic: it catches flipped bits and torn
// blocks).
uint64_t block_checksum(const void* data, int64_t bytes);

class StageStateFile {
 public:
  static constexpr int64_t kChecksumBlock = int64_t{1} << 16;
  struct Options {
    std::string directory;  // where the scratch file is created (exec.disk_path)
    io::DiskOffloadFile::Options file;
  };
  explicit StageStateFile(Options options);
  ~StageStateFile();
  StageStateFile(const StageStateFile&) = delete;
  StageStateFile& operator=(const StageStateFile&) = delete;

  // Stores `tensors` (contiguous host tensors) as stage `stage`'s states;
  // `stage_name` and `labels` (one per tensor) name them in errors. The
  // count and sizes must be those of the stage's first write.
  void write(int stage, const std::string& stage_name, const std::vector<std::string>& labels,
             const std::vector<Tensor>& tensors);
  // Reads stage `stage`'s states into `tensors` (the written sizes) and
  // checks every block's checksum.
  void read(int stage, const std::string& stage_name, const std::vector<std::string>& labels,
            const std::vector<Tensor>& tensors);

  bool has(int stage) const;
  // Where byte `byte` of tensor `tensor` of stage `stage` lies in the file
  // (for tests that change it).
  int64_t file_offset(int stage, size_t tensor, int64_t byte) const;
  const std::string& path() const { return file_->path(); }
  io::DiskOffloadFile::Backend backend() const { return file_->backend(); }
  int64_t file_bytes() const { return file_->size_bytes(); }

 private:
  struct StageRegion {
    std::vector<io::DiskRegion> tensors;
    std::vector<std::vector<uint64_t>> checksums;  // per tensor, per block
  };
  std::unique_ptr<io::DiskOffloadFile> file_;
  std::vector<StageRegion> stages_;  // by stage index; empty regions not written yet
};

// Removes the state scratch files in `directory` that a killed run left;
// returns how many.
int remove_stale_state_files(const std::string& directory);

}  // namespace lt::exec
