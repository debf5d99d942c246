// Plans keyed by (mask, lengths, block sizes), built on first use and shared.
// A plan depends on nothing else, so one built for a layer serves every head,
// layer and denoising step that asks for the same key: a model calling
// attention once per layer per step builds each distinct plan once. Plans are
// handed out as shared pointers, so evicting one while a caller still runs it
// is safe. All members are thread-safe; two threads missing on the same key
// at once may both build it, and the first stored wins.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash {

struct PlanCacheStats {
  std::int64_t hits = 0;
  std::int64_t misses = 0;  // plans built
  std::int64_t size = 0;    // plans held now
  double build_seconds = 0.0;
};

class PlanCache {
 public:
  // capacity: plans kept, least recently used evicted first; 0 keeps all.
  explicit PlanCache(std::size_t capacity = 0);
  PlanCache(const PlanCache&) = delete;
  PlanCache& operator=(const PlanCache&) = delete;

  // The cached plan, or a new one (TilePlan::build's errors propagate). When
  // it is built here its build time is added to *build_seconds.
  std::shared_ptr<const TilePlan> get(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                                      BlockSizes blocks, double* build_seconds = nullptr);

  PlanCacheStats stats() const;
  std::size_t capacity() const;
  void set_capacity(std::size_t capacity);  // evicts down to the new capacity
  void clear();

  // The process-wide cache the bindings use (capacity 64).
  static PlanCache& shared();

 private:
  struct Key {
    Mask mask;
    std::int64_t q_len;
    std::int64_t kv_len;
    BlockSizes blocks;
    friend bool operator==(const Key&, const Key&) = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& key) const noexcept;
  };
  using Lru = std::list<Key>;  // most recently used first
  struct Entry {
    std::shared_ptr<const TilePlan> plan;
    Lru::iterator position;
  };

  void evict_locked();

  mutable std::mutex mutex_;
  std::size_t capacity_;
  Lru lru_;
  std::unordered_map<Key, Entry, KeyHash> entries_;
  PlanCacheStats stats_;
};

}  // namespace tilesplash
