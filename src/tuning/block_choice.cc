// The tile choice of callers that give no (or only some) block sizes: the
// cached choose_blocks() per shape, and the check of the sizes they did give.
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "tilesplash/attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/tuning.h"

namespace tilesplash {
namespace {

struct ChoiceKey {
  Mask mask;
  std::int64_t q_len, kv_len, head_dim;
  DType dtype;
  int threads;
  Precision precision;
  std::string isa;  // set_isa() may change the target within a process
  friend bool operator==(const ChoiceKey&, const ChoiceKey&) = default;
};

struct ChoiceKeyHash {
  std::size_t operator()(const ChoiceKey& key) const noexcept {
    std::size_t h = key.mask.hash();
    for (const std::int64_t value :
         {key.q_len, key.kv_len, key.head_dim, static_cast<std::int64_t>(key.dtype),
          static_cast<std::int64_t>(key.threads), static_cast<std::int64_t>(key.precision),
          static_cast<std::int64_t>(std::hash<std::string>{}(key.isa))}) {
      h ^= std::hash<std::int64_t>{}(value) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    }
    return h;
  }
};

}  // namespace

void check_block_sizes(std::optional<std::int64_t> block_q, std::optional<std::int64_t> block_kv) {
  if (block_q && !kernel_limits::valid_block_q(*block_q)) {
    throw std::invalid_argument("block_q: must be in [1, " +
                                std::to_string(kernel_limits::kMaxBlockQ) + "], got " +
                                std::to_string(*block_q));
  }
  if (block_kv && !kernel_limits::valid_block_kv(*block_kv)) {
    throw std::invalid_argument(
        "block_kv: must be a multiple of " + std::to_string(kernel_limits::kBlockKvMultiple) +
        " in [" + std::to_string(kernel_limits::kBlockKvMultiple) + ", " +
        std::to_string(kernel_limits::kMaxBlockKv) + "], got " + std::to_string(*block_kv));
  }
}

BlockChoice cached_block_choice(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                                std::int64_t head_dim, DType dtype, int threads,
                                Precision precision) {
  static std::mutex mutex;
  static std::unordered_map<ChoiceKey, BlockChoice, ChoiceKeyHash> choices;
  ChoiceKey key{mask, q_len, kv_len, head_dim, dtype, threads, precision, active_isa()};
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto found = choices.find(key);
    if (found != choices.end()) return found->second;
  }
  BlockChoice choice = choose_blocks(mask, q_len, kv_len, head_dim, dtype, threads, precision);
  std::lock_guard<std::mutex> lock(mutex);
  return choices.emplace(std::move(key), std::move(choice)).first->second;
}

}  // namespace tilesplash
