#pragma once
// A cache of pre-token -> ids. Natural text repeats its words, so most
// pre-tokens skip BPE entirely. Keys and ids live in two flat arrays and the
// table stores offsets, so an insert allocates nothing in the common case;
// when the cache fills it is cleared (cheap, and no eviction bookkeeping).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace lt::data {

class WordCache {
 public:
  // Words longer than this are not cached: they are rare, and one of them
  // could evict many common words' worth of space.
  static constexpr size_t kMaxWordBytes = 256;

  WordCache() { clear(); }

  // Appends the cached ids of `word` and returns true, or returns false.
  bool lookup(std::string_view word, std::vector<uint32_t>& ids) const {
    uint64_t h = hash(word);
    for (size_t slot = h & kMask;; slot = (slot + 1) & kMask) {
      const Slot& s = slots_[slot];
      if (s.ids_length == 0) return false;
      if (s.hash == h && s.key_length == word.size() &&
          std::memcmp(keys_.data() + s.key_offset, word.data(), word.size()) == 0) {
        ids.insert(ids.end(), ids_.begin() + s.ids_offset,
                   ids_.begin() + s.ids_offset + s.ids_length);
        return true;
      }
    }
  }

  // `ids` must not be empty (an empty slot is marked by ids_length == 0).
  void insert(std::string_view word, const uint32_t* ids, size_t count) {
    if (word.size() > kMaxWordBytes || count == 0) return;
    if (size_ >= kMaxEntries || keys_.size() + word.size() > kMaxKeyBytes) clear();
    uint64_t h = hash(word);
    size_t slot = h & kMask;
    while (slots_[slot].ids_length != 0) slot = (slot + 1) & kMask;
    slots_[slot] = {h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(word.size()),
                    static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(count)};
    keys_.append(word);
    ids_.insert(ids_.end(), ids, ids + count);
    ++size_;
  }

  void clear() {
    slots_.assign(kSlots, Slot{});
    keys_.clear();
    ids_.clear();
    size_ = 0;
  }

 private:
  // 2^17 slots at most half full: 64k distinct words, ~3 MB of slots; enough
  // for the working vocabulary of a large corpus.
  static constexpr size_t kSlots = size_t{1} << 17;
  static constexpr size_t kMask = kSlots - 1;
  static constexpr size_t kMaxEntries = kSlots / 2;
  static constexpr size_t kMaxKeyBytes = size_t{16} << 20;

  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t key_length = 0;
    uint32_t ids_offset = 0;
    uint32_t ids_length = 0;
  };

  static uint64_t hash(std::string_view word) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ word.size();
    size_t pos = 0;
    for (; pos + 8 <= word.size(); pos += 8) {
      uint64_t chunk;
      std::memcpy(&chunk, word.data() + pos, 8);
      h = (h ^ chunk) * 0xBF58476D1CE4E5B9ull;
      h ^= h >> 31;
    }
    uint64_t tail = 0;
    if (pos < word.size()) std::memcpy(&tail, word.data() + pos, word.size() - pos);
    h = (h ^ tail) * 0x94D049BB133111EBull;
    return h ^ (h >> 29);
  }

  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<uint32_t> ids_;
  size_t size_ = 0;
};

}  // namespace lt::data
