#include "plan/segment_minus_node.h"

#include <algorithm>
#include <string>
#include <utility>

#include "masks/mask_util.h"

namespace tilesplash::detail {
namespace {

constexpr std::size_t kSegmentMinusTag = 0x7365676d696e;

}  // namespace

SegmentMinusNode::SegmentMinusNode(Mask segment, Mask band, std::int64_t first, std::int64_t stride)
    : segment_(std::move(segment)), band_(std::move(band)), first_(first), stride_(stride) {}

std::int64_t SegmentMinusNode::band_key(std::int64_t j) const {
  std::int64_t scaled = 0, key = 0;
  if (j < 0 || __builtin_mul_overflow(j, stride_, &scaled) ||
      __builtin_add_overflow(scaled, first_, &key)) {
    return -1;
  }
  return key;
}

bool SegmentMinusNode::keeps(std::int64_t q, std::int64_t j) const {
  if (!segment_.keeps(q, j)) return false;
  const std::int64_t key = band_key(j);
  return key < 0 || !band_.keeps(q, key);
}

TileKind SegmentMinusNode::classify(IndexRange rows, IndexRange cols) const {
  const TileKind segment = segment_.classify(rows, cols);
  if (segment == TileKind::kEmpty) return segment;
  // The band's keys of these segment keys lie in [key(c0), key(c1 - 1)].
  const std::int64_t lo = band_key(std::max<std::int64_t>(cols.begin, 0));
  const std::int64_t hi = band_key(cols.end - 1);
  if (cols.begin >= 0 && lo >= 0 && hi >= 0) {
    const TileKind band = band_.classify(rows, {lo, hi + 1});
    if (band == TileKind::kEmpty) return segment;
    if (band == TileKind::kFull) return TileKind::kEmpty;
  }
  return classify_by_scan(*this, rows, cols);
}

IndexRange SegmentMinusNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  return segment_.kv_hull(rows, kv_len);
}

void SegmentMinusNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n,
                                std::uint8_t* keep) const {
  segment_.eval_row(q, k0, n, keep);
  for (std::int64_t i = 0; i < n; ++i) {
    if (keep[i] == 0) continue;
    const std::int64_t key = band_key(k0 + i);
    if (key >= 0 && band_.keeps(q, key)) keep[i] = 0;
  }
}

void SegmentMinusNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  segment_.check_lengths(q_len, kv_len);
}

std::string SegmentMinusNode::to_string() const {
  return "segment_minus(first=" + std::to_string(first_) + ",stride=" + std::to_string(stride_) +
         ",band=" + band_.to_string() + "):" + segment_.to_string();
}

std::size_t SegmentMinusNode::hash() const {
  std::size_t h = hash_combine(kSegmentMinusTag, segment_.hash());
  h = hash_combine(h, band_.hash());
  h = hash_combine(h, static_cast<std::uint64_t>(first_));
  return hash_combine(h, static_cast<std::uint64_t>(stride_));
}

bool SegmentMinusNode::equals(const MaskNode& other) const {
  const auto& o = static_cast<const SegmentMinusNode&>(other);
  return first_ == o.first_ && stride_ == o.stride_ && segment_ == o.segment_ && band_ == o.band_;
}

}  // namespace tilesplash::detail
