#include "exec/streaming_disk.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "core/error.h"

namespace lt::exec {

namespace {

// Several executors (tests, or two runs sharing out.dir) may spill into one
// directory at once: the file name carries the process and a counter.
std::string scratch_path(const std::string& directory) {
  static std::atomic<int> counter{0};
  LT_CHECK(!directory.empty(),
           "exec.disk_path: a schedule places boundaries on disk, but no directory was given");
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  LT_CHECK(!ec, "exec.disk_path: cannot create directory '", directory, "': ", ec.message());
  return (std::filesystem::path(directory) /
          ("lazytrain_activations_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) +
           ".bin"))
      .string();
}

}  // namespace

DiskSpill::DiskSpill(DiskSpillOptions options)
    : path_(scratch_path(options.directory)),
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
  return queue_.enqueue([this, boundary, host = std::move(host), after = std::move(after), trace] {
    if (after.valid()) after.get();
    TraceSpan span(trace, "disk", "read boundary " + std::to_string(boundary));
    for (size_t c = 0; c < host.size(); ++c) {
      auto it = regions_.find({boundary, c});
      LT_CHECK(it != regions_.end() && it->second.bytes >= static_cast<int64_t>(host[c].nbytes()),
               "disk spill: boundary ", boundary, " chunk ", c,
               " is read back but was not written (a bug in the stage plan)");
      file_->read({it->second.offset, static_cast<int64_t>(host[c].nbytes())}, host[c].data_ptr());
    }
  });
}

}  // namespace lt::exec
