#include "plan/plan_builder.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace tilesplash {
namespace {

// One bitmask tile may not exceed this; larger block sizes are mistakes, and
// refusing them beats an allocation failure halfway through a build.
constexpr std::int64_t kMaxTileBytes = std::int64_t{1} << 30;
// Reserve at most this many tiles up front. The hull bound is exact for band
// masks, but for masks with a loose hull (functions) it can be far too high.
constexpr std::int64_t kMaxReservedTiles = std::int64_t{1} << 23;

struct Geometry {
  std::int64_t q_len;
  std::int64_t kv_len;
  std::int64_t block_q;
  std::int64_t block_kv;
  std::int64_t num_q_blocks;
  std::int64_t num_kv_blocks;
  std::int64_t words_per_row;

  std::int64_t tile_words() const { return block_q * words_per_row; }
  IndexRange rows(std::int64_t q_block) const {
    const std::int64_t begin = q_block * block_q;
    return {begin, begin + std::min(block_q, q_len - begin)};
  }
  IndexRange cols(std::int64_t kv_block) const {
    const std::int64_t begin = kv_block * block_kv;
    return {begin, begin + std::min(block_kv, kv_len - begin)};
  }
};

void require_positive(std::int64_t value, const char* name) {
  if (value < 1) {
    throw std::invalid_argument(std::string("TilePlan: ") + name + " must be >= 1, got " +
                                std::to_string(value));
  }
}

Geometry make_geometry(std::int64_t q_len, std::int64_t kv_len, BlockSizes blocks) {
  require_positive(q_len, "q_len");
  require_positive(kv_len, "kv_len");
  require_positive(blocks.block_q, "block_q");
  require_positive(blocks.block_kv, "block_kv");
  Geometry g{q_len, kv_len, blocks.block_q, blocks.block_kv, 0, 0, 0};
  g.num_q_blocks = (q_len - 1) / blocks.block_q + 1;
  g.num_kv_blocks = (kv_len - 1) / blocks.block_kv + 1;
  g.words_per_row = (blocks.block_kv - 1) / 64 + 1;
  if (g.num_kv_blocks > std::int64_t{std::numeric_limits<std::uint32_t>::max()} + 1) {
    throw std::invalid_argument("TilePlan: kv_len / block_kv gives " +
                                std::to_string(g.num_kv_blocks) +
                                " kv blocks, more than a plan can index (2^32)");
  }
  // The builder evaluates a tile row as one byte per key, and stores a tile's
  // bitmask: both must stay within 1 GiB.
  if (blocks.block_kv > kMaxTileBytes) {
    throw std::invalid_argument(
        "TilePlan: block_kv must be <= 2^30 (a tile row of one byte per "
        "key within 1 GiB), got " +
        std::to_string(blocks.block_kv));
  }
  if (g.words_per_row > kMaxTileBytes / 8 / blocks.block_q) {
    throw std::invalid_argument("TilePlan: block_q x block_kv = " + std::to_string(blocks.block_q) +
                                " x " + std::to_string(blocks.block_kv) +
                                " needs a tile bitmask over 1 GiB; expected block_q * "
                                "ceil(block_kv / 64) <= 2^27");
  }
  return g;
}

// Multiplying a little-endian word of eight 0/1 bytes by this gathers byte i
// into bit 56 + i (checked for all 256 patterns: the products that land in the
// top byte are exactly the wanted ones, and lower ones never carry into it).
constexpr std::uint64_t kGatherBytes = 0x0102040810204080ULL;

void pack_row(const std::uint8_t* bytes, std::int64_t words, std::uint64_t* out) {
  for (std::int64_t w = 0; w < words; ++w) {
    std::uint64_t word = 0;
    for (int group = 0; group < 8; ++group) {
      std::uint64_t eight = 0;
      std::memcpy(&eight, bytes + w * 64 + group * 8, sizeof(eight));
      if constexpr (std::endian::native == std::endian::big) eight = __builtin_bswap64(eight);
      word |= ((eight * kGatherBytes) >> 56) << (group * 8);
    }
    out[w] = word;
  }
}

std::uint64_t hash_words(const std::uint64_t* words, std::int64_t count) {
  std::uint64_t h = 0x243f6a8885a308d3ULL;
  for (std::int64_t i = 0; i < count; ++i) {
    h = (h ^ words[i]) * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 29;
  }
  return h;
}

// Fills one plan's CSR arrays. Works on references to the plan's members,
// handed over by PlanBuilder (the plan's only friend).
class TileWriter {
 public:
  TileWriter(const Mask& mask, const Geometry& geometry, std::vector<std::int64_t>& row_offsets,
             std::vector<PlanTile>& tiles, std::vector<std::uint64_t>& bits, PlanStats& stats)
      : mask_(mask),
        g_(geometry),
        row_offsets_(row_offsets),
        tiles_(tiles),
        bits_(bits),
        stats_(stats),
        row_bytes_(static_cast<std::size_t>(g_.words_per_row * 64), 0),
        tile_(static_cast<std::size_t>(g_.tile_words()), 0) {}

  void run() {
    std::vector<IndexRange> hulls(static_cast<std::size_t>(g_.num_q_blocks));
    std::int64_t bound = 0;
    for (std::int64_t qb = 0; qb < g_.num_q_blocks; ++qb) {
      const IndexRange keys = mask_.kv_hull(g_.rows(qb), g_.kv_len);
      IndexRange blocks{};
      if (!keys.empty()) blocks = {keys.begin / g_.block_kv, (keys.end - 1) / g_.block_kv + 1};
      hulls[static_cast<std::size_t>(qb)] = blocks;
      bound += blocks.size();
    }
    tiles_.reserve(static_cast<std::size_t>(std::min(bound, kMaxReservedTiles)));
    row_offsets_.reserve(static_cast<std::size_t>(g_.num_q_blocks + 1));
    row_offsets_.push_back(0);
    for (std::int64_t qb = 0; qb < g_.num_q_blocks; ++qb) {
      const IndexRange rows = g_.rows(qb);
      const IndexRange blocks = hulls[static_cast<std::size_t>(qb)];
      for (std::int64_t kb = blocks.begin; kb < blocks.end; ++kb) visit(rows, kb);
      row_offsets_.push_back(static_cast<std::int64_t>(tiles_.size()));
    }
    shrink(tiles_);
    shrink(bits_);
    const std::int64_t visited = stats_.full + stats_.partial;
    const __int128 total = static_cast<__int128>(g_.num_q_blocks) * g_.num_kv_blocks;
    stats_.empty = static_cast<std::int64_t>(
        std::min<__int128>(total - visited, std::numeric_limits<std::int64_t>::max()));
    stats_.distinct_partial = static_cast<std::int64_t>(bits_.size()) / g_.tile_words();
    stats_.density = static_cast<double>(stats_.kept_pairs) /
                     (static_cast<double>(g_.q_len) * static_cast<double>(g_.kv_len));
  }

 private:
  void visit(IndexRange rows, std::int64_t kv_block) {
    const IndexRange cols = g_.cols(kv_block);
    const TileKind kind = mask_.classify(rows, cols);
    if (kind == TileKind::kEmpty) return;
    PlanTile tile;
    tile.kv_block = static_cast<std::uint32_t>(kv_block);
    if (kind == TileKind::kFull) {
      ++stats_.full;
      stats_.kept_pairs += rows.size() * cols.size();
    } else {
      ++stats_.partial;
      stats_.kept_pairs += fill_tile(rows, cols);
      tile.partial_id = intern();
    }
    tiles_.push_back(tile);
  }

  // Bit-packs the tile into tile_ and returns its kept-pair count.
  std::int64_t fill_tile(IndexRange rows, IndexRange cols) {
    const std::int64_t width = cols.size();
    // A ragged last kv block must not see bytes left over from wider tiles.
    std::memset(row_bytes_.data() + width, 0, row_bytes_.size() - static_cast<std::size_t>(width));
    std::fill(tile_.begin(), tile_.end(), 0);
    std::int64_t kept = 0;
    for (std::int64_t r = 0; r < rows.size(); ++r) {
      mask_.eval_row(rows.begin + r, cols.begin, width, row_bytes_.data());
      std::uint64_t* words = tile_.data() + r * g_.words_per_row;
      pack_row(row_bytes_.data(), g_.words_per_row, words);
      for (std::int64_t w = 0; w < g_.words_per_row; ++w) kept += std::popcount(words[w]);
    }
    return kept;
  }

  // The id of the tile in tile_, storing it if no identical tile is stored.
  std::int32_t intern() {
    const std::int64_t words = g_.tile_words();
    const std::uint64_t h = hash_words(tile_.data(), words);
    const auto [first, last] = index_.equal_range(h);
    for (auto it = first; it != last; ++it) {
      const std::uint64_t* stored = bits_.data() + static_cast<std::int64_t>(it->second) * words;
      if (std::memcmp(stored, tile_.data(), static_cast<std::size_t>(words) * 8) == 0) {
        return it->second;
      }
    }
    const std::int64_t id = static_cast<std::int64_t>(bits_.size()) / words;
    if (id > std::numeric_limits<std::int32_t>::max()) {
      throw std::length_error("TilePlan: more than 2^31 distinct partial tiles");
    }
    bits_.insert(bits_.end(), tile_.begin(), tile_.end());
    index_.emplace(h, static_cast<std::int32_t>(id));
    return static_cast<std::int32_t>(id);
  }

  template <typename T>
  static void shrink(std::vector<T>& v) {
    if (v.capacity() - v.size() > v.size() / 8) v.shrink_to_fit();
  }

  const Mask& mask_;
  const Geometry& g_;
  std::vector<std::int64_t>& row_offsets_;
  std::vector<PlanTile>& tiles_;
  std::vector<std::uint64_t>& bits_;
  PlanStats& stats_;
  std::vector<std::uint8_t> row_bytes_;  // one row of eval_row output, 64-byte padded
  std::vector<std::uint64_t> tile_;      // the tile being packed
  std::unordered_multimap<std::uint64_t, std::int32_t> index_;  // content hash -> id
};

}  // namespace

TilePlan PlanBuilder::build(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                            BlockSizes blocks) {
  const auto start = std::chrono::steady_clock::now();
  const Geometry g = make_geometry(q_len, kv_len, blocks);
  mask.check_lengths(q_len, kv_len);
  TilePlan plan(mask);
  plan.q_len_ = q_len;
  plan.kv_len_ = kv_len;
  plan.blocks_ = blocks;
  plan.num_kv_blocks_ = g.num_kv_blocks;
  plan.words_per_row_ = g.words_per_row;
  TileWriter(mask, g, plan.row_offsets_, plan.tiles_, plan.partial_bits_, plan.stats_).run();
  const auto bytes = [](const auto& v) {
    return static_cast<std::int64_t>(v.capacity() * sizeof(v[0]));
  };
  plan.stats_.plan_bytes = static_cast<std::int64_t>(sizeof(TilePlan)) + bytes(plan.row_offsets_) +
                           bytes(plan.tiles_) + bytes(plan.partial_bits_);
  plan.stats_.build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

}  // namespace tilesplash
