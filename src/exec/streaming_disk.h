#pragma once
// The streaming executor's disk engine (Placement::Disk): boundary
// activations the schedule puts on disk are written to one scratch
// io::DiskOffloadFile after forward and read back before backward, on a
// worker thread of their own, so neither the compute thread nor the copy
// engines wait on the disk except through tickets.
//
// The path of a boundary placed on disk: device -> host buffer (download
// engine) -> file (disk engine, which then lets go of the host buffer) ...
// file -> fresh host buffer (disk engine) -> device (upload engine, after
// the read's ticket). Each (boundary, chunk) keeps its file region from step
// to step, so the file does not grow with the number of steps.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "exec/trace.h"
#include "exec/work_queue.h"
#include "io/disk_offload.h"

namespace lt::exec {

// Bytes [begin, end) of one host tensor.
struct ByteRange {
  int64_t begin = 0, end = 0;
  bool operator==(const ByteRange&) const = default;
};

// A read split into pieces (Schedule::read_splits): per piece, per chunk,
// the bytes of the chunk it reads. The chunks are laid end to end, each
// padded to io::kDiskAlignment as in the file; piece k ends at the running
// sum of fractions 0..k of that length, rounded to the alignment (the last
// at the end), so every piece starts on an aligned offset of each chunk's
// region. A piece may be empty (a fraction below one aligned block).
std::vector<std::vector<ByteRange>> split_read(const std::vector<int64_t>& chunk_bytes,
                                               const std::vector<double>& fractions);

struct DiskSpillOptions {
  std::string directory;  // where the scratch file is created
  io::DiskOffloadFile::Options file;
  // Test hook: the disk engine sleeps up to this many microseconds before
  // each request (results must not change).
  int64_t max_delay_us = 0;
  uint64_t delay_seed = 3;
};

// A fresh scratch file name in `directory` (created if missing):
// <prefix><pid>_<counter>.bin. `what` completes the error for an empty
// directory ("exec.disk_path: <what> on disk, but no directory was given").
std::string new_scratch_path(const std::string& directory, const std::string& prefix,
                             const std::string& what);

// Removes the scratch files in `directory` that a killed run left (no live
// DiskSpill holds them); returns how many.
int remove_stale_scratch_files(const std::string& directory);

class DiskSpill {
 public:
  explicit DiskSpill(DiskSpillOptions options);
  ~DiskSpill();  // finishes what is queued, then removes the file
  DiskSpill(const DiskSpill&) = delete;
  DiskSpill& operator=(const DiskSpill&) = delete;

  // Writes `host` (contiguous host tensors, one per chunk) as boundary
  // `boundary` once `after` (their download) has completed. The task keeps
  // the tensors alive until written; the caller may drop its references.
  Ticket write(int boundary, std::vector<Tensor> host, Ticket after, TraceRecorder* trace);
  // Reads boundary `boundary` back into `host` (tensors of the written
  // shapes, allocated by the caller) once `after` (its write) has completed.
  Ticket read(int boundary, std::vector<Tensor> host, Ticket after, TraceRecorder* trace);
  // Reads piece `piece` of boundary `boundary`: bytes `ranges[c]` of chunk
  // c (split_read) into the same bytes of `host[c]`, once `after` has
  // completed.
  Ticket read_piece(int boundary, int piece, std::vector<Tensor> host,
                    std::vector<ByteRange> ranges, Ticket after, TraceRecorder* trace);

  const std::string& path() const { return path_; }
  io::DiskOffloadFile::Backend backend() const;
  // Bytes of file allocated so far; read it only with no request queued.
  int64_t file_bytes() const;

 private:
  io::DiskRegion region(int boundary, size_t chunk, int64_t bytes);  // disk thread only

  std::string path_;
  std::unique_ptr<io::DiskOffloadFile> file_;
  std::map<std::pair<int, size_t>, io::DiskRegion> regions_;  // (boundary, chunk)
  WorkQueue queue_{"disk"};  // last: stops first, while the file still exists
};

}  // namespace lt::exec
