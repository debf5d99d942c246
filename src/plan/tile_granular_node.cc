#include "plan/tile_granular_node.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "masks/mask_util.h"

namespace tilesplash::detail {
namespace {

constexpr std::size_t kTileGranularTag = 0x74696c6573;

IndexRange clip(IndexRange range, std::int64_t length) {
  return {std::max<std::int64_t>(range.begin, 0), std::min(range.end, length)};
}

}  // namespace

TileGranularNode::TileGranularNode(Mask inner, std::int64_t q_len, std::int64_t kv_len,
                                   BlockSizes tiles)
    : inner_(std::move(inner)), q_len_(q_len), kv_len_(kv_len), tiles_(tiles) {}

IndexRange TileGranularNode::tile_rows(std::int64_t q_tile) const {
  const std::int64_t begin = q_tile * tiles_.block_q;
  return {begin, begin + std::min(tiles_.block_q, q_len_ - begin)};
}

IndexRange TileGranularNode::tile_cols(std::int64_t kv_tile) const {
  const std::int64_t begin = kv_tile * tiles_.block_kv;
  return {begin, begin + std::min(tiles_.block_kv, kv_len_ - begin)};
}

bool TileGranularNode::tile_kept(std::int64_t q_tile, std::int64_t kv_tile) const {
  return inner_.classify(tile_rows(q_tile), tile_cols(kv_tile)) != TileKind::kEmpty;
}

bool TileGranularNode::keeps(std::int64_t q, std::int64_t k) const {
  if (q < 0 || q >= q_len_ || k < 0 || k >= kv_len_) return false;
  return tile_kept(q / tiles_.block_q, k / tiles_.block_kv);
}

TileKind TileGranularNode::classify(IndexRange rows, IndexRange cols) const {
  const IndexRange in_rows = clip(rows, q_len_), in_cols = clip(cols, kv_len_);
  if (in_rows.empty() || in_cols.empty()) return TileKind::kEmpty;
  // Pairs outside the map are dropped ones.
  bool dropped = in_rows.size() != rows.size() || in_cols.size() != cols.size();
  bool kept = false;
  const std::int64_t first_kv = in_cols.begin / tiles_.block_kv;
  const std::int64_t last_kv = (in_cols.end - 1) / tiles_.block_kv;
  for (std::int64_t qt = in_rows.begin / tiles_.block_q;
       qt <= (in_rows.end - 1) / tiles_.block_q && !(kept && dropped); ++qt) {
    // Tiles outside the inner mask's kv hull keep nothing: not asked about.
    const IndexRange hull = inner_.kv_hull(tile_rows(qt), kv_len_);
    std::int64_t lo = last_kv + 1, hi = last_kv;
    if (!hull.empty()) {
      lo = std::max(first_kv, hull.begin / tiles_.block_kv);
      hi = std::min(last_kv, (hull.end - 1) / tiles_.block_kv);
    }
    if (lo > first_kv || hi < last_kv) dropped = true;
    for (std::int64_t kt = lo; kt <= hi && !(kept && dropped); ++kt) {
      (tile_kept(qt, kt) ? kept : dropped) = true;
    }
  }
  if (!kept) return TileKind::kEmpty;
  return dropped ? TileKind::kPartial : TileKind::kFull;
}

IndexRange TileGranularNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  const IndexRange in_rows = clip(rows, q_len_);
  if (in_rows.empty()) return {};
  const IndexRange tile_span{tile_rows(in_rows.begin / tiles_.block_q).begin,
                             tile_rows((in_rows.end - 1) / tiles_.block_q).end};
  const IndexRange hull = inner_.kv_hull(tile_span, kv_len_);
  if (hull.empty()) return {};
  const IndexRange out{tile_cols(hull.begin / tiles_.block_kv).begin,
                       std::min(tile_cols((hull.end - 1) / tiles_.block_kv).end, kv_len)};
  return out.empty() ? IndexRange{} : out;
}

void TileGranularNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n,
                                std::uint8_t* keep) const {
  std::memset(keep, 0, static_cast<std::size_t>(n));
  if (q < 0 || q >= q_len_) return;
  const IndexRange keys = clip({k0, k0 + n}, kv_len_);
  const std::int64_t qt = q / tiles_.block_q;
  for (std::int64_t k = keys.begin; k < keys.end;) {
    const IndexRange tile = tile_cols(k / tiles_.block_kv);
    const std::int64_t end = std::min(tile.end, keys.end);
    if (tile_kept(qt, k / tiles_.block_kv)) {
      std::memset(keep + (k - k0), 1, static_cast<std::size_t>(end - k));
    }
    k = end;
  }
}

void TileGranularNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  if (q_len == q_len_ && kv_len == kv_len_) return;
  throw std::invalid_argument("mask " + to_string() + ": rounded to the tiles of a " +
                              std::to_string(q_len_) + " x " + std::to_string(kv_len_) +
                              " map; got q_len " + std::to_string(q_len) + ", kv_len " +
                              std::to_string(kv_len));
}

std::string TileGranularNode::to_string() const {
  return "tiles(block_q=" + std::to_string(tiles_.block_q) +
         ",block_kv=" + std::to_string(tiles_.block_kv) + ",of=" + std::to_string(q_len_) + "x" +
         std::to_string(kv_len_) + "):" + inner_.to_string();
}

std::size_t TileGranularNode::hash() const {
  std::size_t h = hash_combine(kTileGranularTag, inner_.hash());
  for (const std::int64_t value : {q_len_, kv_len_, tiles_.block_q, tiles_.block_kv}) {
    h = hash_combine(h, static_cast<std::uint64_t>(value));
  }
  return h;
}

bool TileGranularNode::equals(const MaskNode& other) const {
  const auto& o = static_cast<const TileGranularNode&>(other);
  return q_len_ == o.q_len_ && kv_len_ == o.kv_len_ && tiles_ == o.tiles_ && inner_ == o.inner_;
}

}  // namespace tilesplash::detail
