// The tuning cache on disk and choose_blocks(), the library's answer when a
// caller gives no block sizes. A tuned choice is only worth anything if it is
// still true, so the file is versioned twice (format and library version: a
// new kernel makes old timings stale), every entry is range-checked before
// use, and anything doubtful is ignored with one warning rather than trusted.
// Writes go through io::AtomicFile, so a reader never sees half a file, under
// an flock so that concurrent writers never lose each other's entries.
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "io/json_cache.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/tuning.h"

namespace tilesplash {
namespace {

bool valid_blocks(const BlockSizes& b) {
  return kernel_limits::valid_block_q(b.block_q) && kernel_limits::valid_block_kv(b.block_kv);
}

}  // namespace

void TuningCache::check_writable() const { io::JsonCache(path_).check_writable(); }

std::filesystem::path TuningCache::default_path() { return io::default_cache_path(); }

TuningCache::TuningCache(std::filesystem::path path) : path_(std::move(path)) {
  if (path_.empty()) throw std::invalid_argument("TuningCache: path must not be empty");
}

std::optional<BlockSizes> TuningCache::lookup(const TuneKey& key) const {
  const std::optional<TunedChoice> choice = lookup_choice(key);
  if (!choice) return std::nullopt;
  return choice->blocks;
}

std::optional<TunedChoice> TuningCache::lookup_choice(const TuneKey& key) const {
  const std::string name = key.to_string();
  const std::optional<nlohmann::json> found = io::JsonCache(path_).entry(name);
  if (!found) return std::nullopt;
  const nlohmann::json& entry = *found;
  if (entry.is_object() && entry.contains("block_q") && entry.contains("block_kv") &&
      entry["block_q"].is_number_integer() && entry["block_kv"].is_number_integer()) {
    TunedChoice choice;
    choice.blocks = {entry["block_q"].get<std::int64_t>(), entry["block_kv"].get<std::int64_t>()};
    // Entries written before the kernel had variants ran the default one.
    std::optional<KernelVariant> variant = KernelVariant{};
    if (entry.contains("variant")) {
      variant = entry["variant"].is_string()
                    ? parse_kernel_variant(entry["variant"].get<std::string>())
                    : std::nullopt;
    }
    if (valid_blocks(choice.blocks) && variant) {
      choice.variant = *variant;
      return choice;
    }
  }
  io::warn_once("tuning cache " + path_.string() + ": invalid entry for " + name +
                " (expected block_q " + kernel_limits::block_q_rule() + ", block_kv " +
                kernel_limits::block_kv_rule() + " and a kernel variant such as " +
                to_string(KernelVariant{}) + "); ignored");
  return std::nullopt;
}

void TuningCache::store(const TuneKey& key, BlockSizes blocks, double seconds,
                        const KernelVariant& variant) const {
  if (!valid_blocks(blocks)) {
    throw std::invalid_argument(
        "TuningCache::store: blocks must have block_q " + kernel_limits::block_q_rule() +
        " and block_kv " + kernel_limits::block_kv_rule() + ", got " +
        std::to_string(blocks.block_q) + " x " + std::to_string(blocks.block_kv));
  }
  nlohmann::json entry;
  entry["block_q"] = blocks.block_q;
  entry["block_kv"] = blocks.block_kv;
  entry["variant"] = to_string(variant);
  entry["seconds"] = seconds;
  io::JsonCache(path_).put(key.to_string(), std::move(entry));
}

BlockChoice choose_blocks(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                          std::int64_t head_dim, DType dtype, int threads, Precision precision) {
  BlockChoice choice;
  choice.key = make_tune_key(mask, q_len, kv_len, head_dim, dtype, threads, precision);
  if (const std::optional<TunedChoice> cached = TuningCache().lookup_choice(choice.key)) {
    choice.blocks = cached->blocks;
    choice.variant = cached->variant;
    choice.from_cache = true;
  } else {
    choice.blocks = heuristic_blocks(q_len, kv_len, head_dim, dtype);
  }
  return choice;
}

}  // namespace tilesplash
