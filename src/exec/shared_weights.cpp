#include "exec/shared_weights.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "core/storage.h"
#include "exec/weight_binding.h"
#include "optim/shadow.h"

namespace lt::exec {

namespace {

using Clock = std::chrono::steady_clock;

// Each counter on a cache line of its own: ranks bump theirs concurrently.
constexpr size_t kCounterBytes = 64;
constexpr size_t kTensorAlign = 64;
// A mark at the segment's start: local rank 0 writes it last, so a rank
// that finds it knows the weights are complete.
constexpr uint64_t kWritten = 0x6c617a7974726e31;  // "lazytrn1"

size_t aligned(size_t at) {
  return (at + kTensorAlign - 1) / kTensorAlign * kTensorAlign;
}

size_t header_bytes(size_t groups, int local_size) {
  // The mark, then (groups + 1) x local_size counters.
  return aligned(kCounterBytes + (groups + 1) * static_cast<size_t>(local_size) * kCounterBytes);
}

// Offsets of each master, then of each bf16 copy; returns the end.
size_t lay_out(const nn::NamedParameters& params, size_t at, bool bf16_copies,
               std::vector<size_t>& master_at, std::vector<size_t>& copy_at) {
  master_at.clear();
  copy_at.clear();
  for (const auto& [name, p] : params) {
    master_at.push_back(at);
    at = aligned(at + static_cast<size_t>(p.numel()) * 4);
  }
  if (!bf16_copies) return at;
  for (const auto& [name, p] : params) {
    copy_at.push_back(at);
    at = aligned(at + static_cast<size_t>(p.numel()) * 2);
  }
  return at;
}

}  // namespace

size_t SharedWeights::bytes_for(const nn::NamedParameters& params, size_t groups, int local_size,
                                bool bf16_copies) {
  std::vector<size_t> m, c;
  return lay_out(params, header_bytes(groups, local_size), bf16_copies, m, c);
}

SharedWeights::SharedWeights(std::shared_ptr<void> keep, void* memory, size_t bytes,
                             const nn::NamedParameters& params, size_t groups, int local_rank,
                             int local_size, bool bf16_copies, double timeout_s)
    : keep_(std::move(keep)),
      memory_(static_cast<char*>(memory)),
      bytes_(bytes),
      params_(params),
      groups_(groups),
      local_rank_(local_rank),
      local_size_(local_size),
      timeout_s_(timeout_s),
      published_(groups + 1, 0) {
  LT_CHECK(local_rank >= 0 && local_rank < local_size, "shared weights: local rank ", local_rank,
           " of ", local_size);
  const size_t need =
      lay_out(params, header_bytes(groups, local_size), bf16_copies, master_at_, copy_at_);
  LT_CHECK(need <= bytes, "shared weights: the segment has ", bytes, " bytes, the weights need ",
           need);
  for (const auto& [name, p] : params)
    LT_CHECK(p.device().is_cpu() && p.dtype() == DType::F32 && p.is_contiguous(),
             "shared weights: parameter '", name, "' must be a contiguous f32 CPU tensor, got ",
             p.str());
  static_assert(std::atomic<int64_t>::is_always_lock_free,
                "counters in shared memory need lock-free atomics");
}

std::atomic<int64_t>& SharedWeights::counter(size_t group, int rank) const {
  char* at = memory_ + kCounterBytes +
             (group * static_cast<size_t>(local_size_) + static_cast<size_t>(rank)) * kCounterBytes;
  return *reinterpret_cast<std::atomic<int64_t>*>(at);
}

void SharedWeights::write_weights() {
  LT_CHECK(local_rank_ == 0, "shared weights: only local rank 0 writes them, not ", local_rank_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    std::memcpy(memory_ + master_at_[i], p.data<float>(), static_cast<size_t>(p.numel()) * 4);
    if (!copy_at_.empty()) optim::fill_bf16_shadow(p, bf16_copy(i));
  }
  reinterpret_cast<std::atomic<uint64_t>*>(memory_)->store(kWritten, std::memory_order_release);
}

void SharedWeights::adopt() {
  LT_CHECK(reinterpret_cast<std::atomic<uint64_t>*>(memory_)->load(std::memory_order_acquire) ==
               kWritten,
           "shared weights: local rank 0 has not written the weights yet");
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    auto storage =
        std::make_shared<Storage>(memory_ + master_at_[i], static_cast<size_t>(p.numel()) * 4,
                                  Device::cpu(), [keep = keep_] {});
    point_at(p, Tensor::from_storage(std::move(storage), 0, p.shape(), p.strides(), DType::F32));
  }
}

Tensor SharedWeights::bf16_copy(size_t i) const {
  if (copy_at_.empty()) return Tensor();
  const Tensor& p = params_.at(i).second;
  auto storage = std::make_shared<Storage>(
      memory_ + copy_at_[i], static_cast<size_t>(p.numel()) * 2, Device::cpu(), [keep = keep_] {});
  return Tensor::from_storage(std::move(storage), 0, p.shape(), p.strides(), DType::BF16);
}

int64_t SharedWeights::weight_bytes() const {
  int64_t n = 0;
  for (const auto& [name, p] : params_) n += p.numel() * 4;
  return n;
}

void SharedWeights::publish(size_t group) {
  LT_CHECK(group <= groups_, "shared weights: group ", group, " of ", groups_);
  ++published_[group];
  counter(group, local_rank_).store(published_[group], std::memory_order_release);
}

void SharedWeights::wait_for(size_t group, const std::string& what) {
  LT_CHECK(group <= groups_, "shared weights: group ", group, " of ", groups_);
  const int64_t target = published_[group];
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s_);
  for (int polls = 0;; ++polls) {
    std::vector<int> behind;
    for (int r = 0; r < local_size_; ++r)
      if (counter(group, r).load(std::memory_order_acquire) < target) behind.push_back(r);
    if (behind.empty()) return;
    if (Clock::now() > deadline) {
      std::string who;
      for (int r : behind) who += (who.empty() ? "" : ", ") + std::to_string(r);
      fail("waited dist.timeout_s = ", timeout_s_, " s for local rank",
           behind.size() > 1 ? "s " : " ", who, " of this host to finish ", what,
           " (their update number ", target,
           "; the weights are shared by the host's ranks: dist.share_weights)");
    }
    // Spin briefly (the ranks finish an update within microseconds of each
    // other), then sleep, leaving the cores to the ranks waited for.
    if (polls < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void SharedWeights::barrier(const std::string& what) {
  publish(groups_);
  wait_for(groups_, what);
}

}  // namespace lt::exec
