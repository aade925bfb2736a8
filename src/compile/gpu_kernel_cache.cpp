#include "compile/gpu_kernel_cache.h"

#include <chrono>
#include <cstdio>
#include <optional>

#include "compile/cache_entry.h"
#include "compile/cubin.h"
#include "compile/gpu_kernel.h"
#include "core/error.h"

namespace lt::compile {
namespace {

// A cubin entry's bytes: "<form> <threads per block> <elements per
// thread>\n" then the cubin.
std::string serialize(const GpuBinary& binary) {
  return std::string(gpu_launch_form_name(binary.form)) + " " +
         std::to_string(binary.threads_per_block) + " " +
         std::to_string(binary.elements_per_thread) + "\n" + binary.cubin;
}

std::optional<GpuBinary> deserialize(const std::string& bytes) {
  const size_t newline = bytes.find('\n');
  if (newline == std::string::npos) return std::nullopt;
  char form[32] = {};
  int threads = 0, elements = 0;
  if (std::sscanf(bytes.substr(0, newline).c_str(), "%31s %d %d", form, &threads, &elements) != 3 ||
      elements < 1 || elements > 16) {
    return std::nullopt;
  }
  GpuBinary binary;
  if (std::string(form) == gpu_launch_form_name(GpuLaunchForm::Elementwise)) {
    binary.form = GpuLaunchForm::Elementwise;
  } else if (std::string(form) == gpu_launch_form_name(GpuLaunchForm::RowPerBlock)) {
    binary.form = GpuLaunchForm::RowPerBlock;
  } else if (std::string(form) == gpu_launch_form_name(GpuLaunchForm::ColSums)) {
    binary.form = GpuLaunchForm::ColSums;
  } else {
    return std::nullopt;
  }
  if (threads != kGpuThreadsPerBlock) return std::nullopt;
  binary.threads_per_block = threads;
  binary.elements_per_thread = elements;
  binary.cubin = bytes.substr(newline + 1);
  // An ELF file: what cuModuleLoadData takes as a cubin.
  if (binary.cubin.size() < 4 || binary.cubin.compare(0, 4,
                                                      "\x7f"
                                                      "ELF") != 0) {
    return std::nullopt;
  }
  return binary;
}

}  // namespace

PtxTarget training_gpu_target() {
  PtxTarget target;
  target.forms.elements_per_thread = 8;
  target.forms.packed = true;
  target.forms.col_sum_rows = 2;
  return target;
}

GpuKernelCache::GpuKernelCache(std::string folder, PtxTarget target)
    : folder_(std::move(folder)), target_(std::move(target)) {}

GpuKernelCache::~GpuKernelCache() = default;

std::string GpuKernelCache::disk_key(const KernelGraph& graph) const {
  std::string key = graph.key() + " | " + target_.chip + " " + target_.features + " " + kGpuAbi;
  const GpuForms forms = gpu_forms_for(graph, target_.forms);
  if (forms.elements_per_thread > 1) {
    key += (forms.packed ? " p" : " x") + std::to_string(forms.elements_per_thread);
  }
  if (forms.col_sum_rows != 1) key += " r" + std::to_string(forms.col_sum_rows);
  return key;
}

std::filesystem::path GpuKernelCache::entry_path(const KernelGraph& graph) const {
  return cache_entry_path(folder_, disk_key(graph), ".cubin");
}

std::shared_ptr<const GpuBinary> GpuKernelCache::from_disk_or_compile(const KernelGraph& graph) {
  std::filesystem::path path;
  bool damaged = false;
  if (!folder_.empty()) {
    path = entry_path(graph);
    if (std::optional<std::string> bytes = read_cache_entry(path, disk_key(graph), damaged)) {
      std::optional<GpuBinary> binary = deserialize(*bytes);
      if (binary && binary->form == gpu_launch_form(graph)) {
        binary->col_sum_buffers = gpu_col_sum_buffers(graph);
        ++stats_.loaded_from_disk;
        return std::make_shared<const GpuBinary>(std::move(*binary));
      }
      damaged = true;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  GpuBinary binary;
  try {
    const PtxKernel ptx = compile_ptx(graph, target_);
    binary.form = ptx.form;
    binary.threads_per_block = ptx.threads_per_block;
    binary.elements_per_thread = ptx.elements_per_thread;
    binary.cubin = assemble_cubin(ptx.ptx, target_.chip);
    binary.col_sum_buffers = gpu_col_sum_buffers(graph);
  } catch (const Error& e) {
    if (folder_.empty()) throw;
    fail("compile: GPU kernel ", graph.key(), " for ", target_.chip, " is ",
         damaged ? "damaged" : "not", " in the kernel cache (", path.string(),
         ") and cannot be compiled here: ", e.what(),
         "\n(a build with MLIR fills the folder; docs/compiler.md, \"Kernels for a machine "
         "without MLIR\")");
  }
  stats_.compile_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ++stats_.compiled;
  if (damaged) ++stats_.rebuilt;
  if (!folder_.empty()) write_cache_entry(path, disk_key(graph), serialize(binary));
  return std::make_shared<const GpuBinary>(std::move(binary));
}

std::shared_ptr<const GpuBinary> GpuKernelCache::binary(const KernelGraph& graph) {
  const std::string key = graph.key();
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = binaries_.find(key); it != binaries_.end()) {
    ++stats_.memory_hits;
    return it->second;
  }
  std::shared_ptr<const GpuBinary> binary = from_disk_or_compile(graph);
  binaries_.emplace(key, binary);
  return binary;
}

std::shared_ptr<const GpuKernel> GpuKernelCache::get(const KernelGraph& graph, int device) {
  std::shared_ptr<const GpuBinary> cubin = binary(graph);
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = loaded_.try_emplace({graph.key(), device});
  if (inserted) {
    try {
      it->second = std::make_shared<const GpuKernel>(std::move(cubin), device, target_.chip);
    } catch (...) {
      loaded_.erase(it);
      throw;
    }
  }
  return it->second;
}

KernelCacheStats GpuKernelCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace lt::compile
