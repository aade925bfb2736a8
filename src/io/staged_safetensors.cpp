#include "io/staged_safetensors.h"

#include <memory>
#include <set>

#include "io/atomic_file.h"

namespace lt::io {

void write_staged_safetensors(const std::vector<StagedFile>& files,
                              const std::function<void(int)>& load,
                              const std::function<void(int)>& unload) {
  // Per file: its writer, with the header in place, and each tensor's
  // offset in the file.
  std::vector<std::unique_ptr<AtomicFileWriter>> writers;
  std::vector<std::vector<uint64_t>> offsets(files.size());
  std::set<int> groups;
  for (size_t f = 0; f < files.size(); ++f) {
    std::vector<TensorSpec> specs;
    for (const StagedTensor& t : files[f].tensors) {
      specs.push_back(t.spec);
      if (t.group >= 0) groups.insert(t.group);
    }
    const std::string header = make_safetensors_header(specs, files[f].metadata);
    writers.push_back(std::make_unique<AtomicFileWriter>(files[f].path));
    writers.back()->write(safetensors_length_prefix(header));
    writers.back()->write(header);
    uint64_t offset = 8 + header.size();
    for (const TensorSpec& s : specs) {
      offsets[f].push_back(offset);
      offset += s.nbytes();
    }
  }
  auto write_group = [&](int group) {
    for (size_t f = 0; f < files.size(); ++f) {
      for (size_t k = 0; k < files[f].tensors.size(); ++k) {
        const StagedTensor& t = files[f].tensors[k];
        if (t.group != group || t.spec.nbytes() == 0) continue;
        const Tensor c = t.bytes().detach().contiguous().to(Device::cpu());
        LT_CHECK(c.dtype() == t.spec.dtype && c.shape() == t.spec.shape, "writing '",
                 files[f].path.string(), "': tensor '", t.spec.name, "' came as ", c.str(),
                 ", its header says ", dtype_name(t.spec.dtype), " ", shape_str(t.spec.shape));
        writers[f]->write_at(offsets[f][k], c.data_ptr(), c.nbytes());
      }
    }
  };
  write_group(-1);
  for (int g : groups) {
    load(g);
    write_group(g);
    unload(g);
  }
  for (auto& w : writers) w->commit();
}

}  // namespace lt::io
