#pragma once
// Several safetensors files written together, their tensors' bytes made on
// demand, one group at a time: for a checkpoint whose tensors are not all
// in host memory (exec.state_placement disk keeps some stages' masters and
// optimizer states in a scratch file). Each group (a stage) is brought
// into host memory once, its tensors written where they go in whichever
// file holds them, and let go before the next; so host memory holds one
// group beyond what it held, whatever the files' order.
//
// The files are byte for byte what write_safetensors writes for the same
// tensors in the same order (the header first, then every tensor at its
// offset), and each is atomic as write_safetensors' is: a temporary file,
// fsync'd and renamed into place only when every file is complete.
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace lt::io {

struct StagedTensor {
  TensorSpec spec;
  // The group that must be loaded while `bytes` runs; -1: none (the tensor
  // is in host memory already).
  int group = -1;
  // The tensor's bytes: spec's dtype and shape, on the CPU (any strides).
  std::function<Tensor()> bytes;
};

struct StagedFile {
  std::filesystem::path path;
  std::vector<StagedTensor> tensors;  // in file order
  std::map<std::string, std::string> metadata;
};

// Writes `files`: first the tensors of no group, then, for each group g in
// increasing order that some tensor names, load(g), its tensors, unload(g).
void write_staged_safetensors(const std::vector<StagedFile>& files,
                              const std::function<void(int)>& load,
                              const std::function<void(int)>& unload);

}  // namespace lt::io
