#include "exec/streaming_disk.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>

#include "core/error.h"

namespace lt::exec {

namespace {

constexpr const char* kScratchPrefix = "lazytrain_activations_";

}  // namespace

// Several executors (tests, or two runs sharing out.dir) may spill into one
// directory at once: the file name carries the process and a counter.
std::string new_scratch_path(const std::string& directory, const std::string& prefix,
                             const std::string& what) {
  static std::atomic<int> counter{0};
  LT_CHECK(!directory.empty(), "exec.disk_path: ", what, " on disk, but no directory was given");
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  LT_CHECK(!ec, "exec.disk_path: cannot create directory '", directory, "': ", ec.message());
  return (std::filesystem::path(directory) /
          (prefix + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".bin"))
      .string();
}

int remove_stale_scratch_files(const std::string& directory) {
  return io::remove_unlocked_files(directory, kScratchPrefix);
}

DiskSpill::DiskSpill(DiskSpillOptions options)
    : path_(new_scratch_path(options.directory, kScratchPrefix, "a schedule places boundaries")),
      file_(std::make_unique<io::DiskOffloadFile>(path_, options.file)) {
  if (options.max_delay_us > 0) queue_.inject_delays(options.max_delay_us, options.delay_seed);
}

DiskSpill::~DiskSpill() = default;  // queue_ drains first (declared last)

io::DiskOffloadFile::Backend DiskSpill::backend() const {
  return file_->backend();
}

int64_t DiskSpill::file_bytes() const {
  return file_->size_bytes();
}

io::DiskRegion DiskSpill::region(int boundary, size_t chunk, int64_t bytes) {
  auto it = regions_.find({boundary, chunk});
  // A region too small for this step's chunk is abandoned for a new one
  // (the file is append-only); equal shapes every step reuse it.
  if (it == regions_.end() || it->second.bytes < bytes) {
    it = regions_.insert_or_assign({boundary, chunk}, file_->allocate(bytes)).first;
  }
  return {it->second.offset, bytes};
}

Ticket DiskSpill::write(int boundary, std::vector<Tensor> host, Ticket after,
                        TraceRecorder* trace) {
  return queue_.enqueue([this, boundary, host = std::move(host), after = std::move(after), trace] {
    if (after.valid()) after.get();
    TraceSpan span(trace, "disk", "write boundary " + std::to_string(boundary));
    for (size_t c = 0; c < host.size(); ++c) {
      LT_CHECK(host[c].device().is_cpu() && host[c].is_contiguous(), "disk spill: boundary ",
               boundary, " chunk ", c, " is not a contiguous host tensor: ", host[c].str());
      file_->write(region(boundary, c, static_cast<int64_t>(host[c].nbytes())), host[c].data_ptr());
    }
  });
}

Ticket DiskSpill::read(int boundary, std::vector<Tensor> host, Ticket after, TraceRecorder* trace) {
  std::vector<ByteRange> whole;
  for (const Tensor& h : host) whole.push_back({0, static_cast<int64_t>(h.nbytes())});
  return read_piece(boundary, -1, std::move(host), std::move(whole), std::move(after), trace);
}

Ticket DiskSpill::read_piece(int boundary, int piece, std::vector<Tensor> host,
                             std::vector<ByteRange> ranges, Ticket after, TraceRecorder* trace) {
  LT_CHECK(ranges.size() == host.size(), "disk spill: boundary ", boundary, " piece ", piece,
           " has ", ranges.size(), " byte ranges for ", host.size(), " chunks");
  return queue_.enqueue([this, boundary, piece, host = std::move(host), ranges = std::move(ranges),
                         after = std::move(after), trace] {
    if (after.valid()) after.get();
    TraceSpan span(trace, "disk",
                   "read boundary " + std::to_string(boundary) +
                       (piece >= 0 ? " piece " + std::to_string(piece) : std::string()));
    for (size_t c = 0; c < host.size(); ++c) {
      const ByteRange r = ranges[c];
      if (r.end <= r.begin) continue;
      auto it = regions_.find({boundary, c});
      LT_CHECK(it != regions_.end() && it->second.bytes >= static_cast<int64_t>(host[c].nbytes()),
               "disk spill: boundary ", boundary, " chunk ", c,
               " is read back but was not written (a bug in the stage plan)");
      LT_CHECK(r.begin % io::kDiskAlignment == 0 && r.begin >= 0 &&
                   r.end <= static_cast<int64_t>(host[c].nbytes()),
               "disk spill: boundary ", boundary, " chunk ", c, " piece ", piece, ": bytes [",
               r.begin, ", ", r.end, ") are not an aligned range of its ", host[c].nbytes());
      file_->read({it->second.offset + r.begin, r.end - r.begin},
                  static_cast<char*>(host[c].data_ptr()) + r.begin);
    }
  });
}

std::vector<std::vector<ByteRange>> split_read(const std::vector<int64_t>& chunk_bytes,
                                               const std::vector<double>& fractions) {
  constexpr int64_t kAlign = io::kDiskAlignment;
  std::vector<int64_t> starts;  // of each chunk, in the padded layout
  int64_t total = 0;
  for (int64_t n : chunk_bytes) {
    starts.push_back(total);
    total += (n + kAlign - 1) / kAlign * kAlign;
  }
  const int64_t blocks = total / kAlign;
  std::vector<std::vector<ByteRange>> pieces;
  int64_t cut = 0;
  double sum = 0;
  for (size_t k = 0; k < fractions.size(); ++k) {
    sum += fractions[k];
    const int64_t end =
        k + 1 == fractions.size()
            ? total
            : std::clamp<int64_t>(std::llround(sum * static_cast<double>(blocks)) * kAlign, cut,
                                  total);
    std::vector<ByteRange>& ranges = pieces.emplace_back();
    for (size_t c = 0; c < chunk_bytes.size(); ++c) {
      const int64_t begin = std::max(cut, starts[c]) - starts[c];
      const int64_t stop = std::min(end - starts[c], chunk_bytes[c]);
      ranges.push_back(begin < stop ? ByteRange{begin, stop} : ByteRange{});
    }
    cut = end;
  }
  return pieces;
}

}  // namespace lt::exec
