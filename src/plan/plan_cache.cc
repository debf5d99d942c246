// Plans are built outside the lock: a 75k-token plan takes milliseconds, and
// other threads asking for plans that are already cached must not wait on it.
#include "tilesplash/plan_cache.h"

#include <functional>
#include <utility>

namespace tilesplash {
namespace {

std::size_t combine(std::size_t seed, std::size_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

}  // namespace

std::size_t PlanCache::KeyHash::operator()(const Key& key) const noexcept {
  std::size_t h = key.mask.hash();
  for (const std::int64_t value :
       {key.q_len, key.kv_len, key.blocks.block_q, key.blocks.block_kv}) {
    h = combine(h, std::hash<std::int64_t>{}(value));
  }
  return h;
}

PlanCache::PlanCache(std::size_t capacity) : capacity_(capacity) {}

std::shared_ptr<const TilePlan> PlanCache::get(const Mask& mask, std::int64_t q_len,
                                               std::int64_t kv_len, BlockSizes blocks,
                                               double* build_seconds) {
  Key key{mask, q_len, kv_len, blocks};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = entries_.find(key);
    if (found != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, found->second.position);
      ++stats_.hits;
      return found->second.plan;
    }
  }
  auto plan = std::make_shared<const TilePlan>(TilePlan::build(mask, q_len, kv_len, blocks));
  const double seconds = plan->stats().build_seconds;
  if (build_seconds != nullptr) *build_seconds += seconds;
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.misses;
  stats_.build_seconds += seconds;
  const auto found = entries_.find(key);
  if (found != entries_.end()) return found->second.plan;  // another thread stored it first
  lru_.push_front(key);
  entries_.emplace(std::move(key), Entry{plan, lru_.begin()});
  evict_locked();
  stats_.size = static_cast<std::int64_t>(entries_.size());
  return plan;
}

void PlanCache::evict_locked() {
  while (capacity_ > 0 && entries_.size() > capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
}

PlanCacheStats PlanCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PlanCacheStats stats = stats_;
  stats.size = static_cast<std::int64_t>(entries_.size());
  return stats;
}

std::size_t PlanCache::capacity() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capacity_;
}

void PlanCache::set_capacity(std::size_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = capacity;
  evict_locked();
}

void PlanCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  lru_.clear();
}

PlanCache& PlanCache::shared() {
  static PlanCache cache(64);
  return cache;
}

}  // namespace tilesplash
