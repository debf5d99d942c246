// Dense, causal, local, chunked-causal and key-range masks: the families whose
// tiles are classified exactly from index ranges.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "masks/mask_util.h"
#include "masks/nodes.h"

namespace tilesplash::detail {
namespace {

// Distinct per family so that, say, causal(3) and chunked(3) hash apart.
constexpr std::size_t kDenseTag = 0x64656e7365;
constexpr std::size_t kCausalTag = 0x63617573616c;
constexpr std::size_t kLocalTag = 0x6c6f63616c;
constexpr std::size_t kChunkedTag = 0x6368756e6b;
constexpr std::size_t kKeyRangeTag = 0x6b657973;

Wide band_lo(std::optional<std::int64_t> left, std::int64_t offset) {
  return left ? Wide{offset} - *left : -kNoBound;
}

Wide band_hi(std::optional<std::int64_t> right, std::int64_t offset) {
  return right ? Wide{offset} + *right : kNoBound;
}

IndexRange clip_hull(Wide begin, Wide end, std::int64_t kv_len) {
  begin = std::max<Wide>(begin, 0);
  end = std::min<Wide>(end, kv_len);
  if (end <= begin) return {};
  return {static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end)};
}

}  // namespace

void DenseNode::eval_row(std::int64_t, std::int64_t, std::int64_t n, std::uint8_t* keep) const {
  if (n > 0) std::memset(keep, 1, static_cast<std::size_t>(n));
}

std::size_t DenseNode::hash() const { return hash_combine(kDenseTag, 0); }

bool BandNode::keeps(std::int64_t q, std::int64_t k) const {
  const Wide delta = Wide{k} - q;
  return delta >= lo_ && delta <= hi_;
}

TileKind BandNode::classify(IndexRange rows, IndexRange cols) const {
  // The tile's differences k - q are exactly the integers in [dmin, dmax].
  const Wide dmin = Wide{cols.begin} - (rows.end - 1);
  const Wide dmax = Wide{cols.end - 1} - rows.begin;
  if (dmax < lo_ || dmin > hi_) return TileKind::kEmpty;
  if (dmin >= lo_ && dmax <= hi_) return TileKind::kFull;
  return TileKind::kPartial;
}

IndexRange BandNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  if (rows.empty()) return {};
  return clip_hull(rows.begin + lo_, rows.end + hi_, kv_len);
}

void BandNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const {
  fill_keys(keep, k0, n, q + lo_, q + hi_);
}

CausalNode::CausalNode(std::int64_t offset) : BandNode(-kNoBound, offset), offset_(offset) {}

std::string CausalNode::to_string() const {
  return offset_ == 0 ? "causal" : "causal:offset=" + std::to_string(offset_);
}

std::size_t CausalNode::hash() const {
  return hash_combine(kCausalTag, static_cast<std::uint64_t>(offset_));
}

bool CausalNode::equals(const MaskNode& other) const {
  return offset_ == static_cast<const CausalNode&>(other).offset_;
}

LocalNode::LocalNode(std::optional<std::int64_t> left, std::optional<std::int64_t> right,
                     std::int64_t offset)
    : BandNode(band_lo(left, offset), band_hi(right, offset)),
      left_(left),
      right_(right),
      offset_(offset) {
  if (left && *left < 0) {
    throw std::invalid_argument("Mask::local: left must be >= 0, got " + std::to_string(*left));
  }
  if (right && *right < 0) {
    throw std::invalid_argument("Mask::local: right must be >= 0, got " + std::to_string(*right));
  }
}

std::string LocalNode::to_string() const {
  std::string params;
  const auto add = [&params](const char* key, std::int64_t value) {
    params += params.empty() ? ":" : ",";
    params += key;
    params += '=';
    params += std::to_string(value);
  };
  if (left_) add("left", *left_);
  if (right_) add("right", *right_);
  if (offset_ != 0) add("offset", offset_);
  return "local" + params;
}

std::size_t LocalNode::hash() const {
  std::size_t h = kLocalTag;
  h = hash_combine(h, left_ ? static_cast<std::uint64_t>(*left_) : ~0ULL);
  h = hash_combine(h, right_ ? static_cast<std::uint64_t>(*right_) : ~0ULL);
  return hash_combine(h, static_cast<std::uint64_t>(offset_));
}

bool LocalNode::equals(const MaskNode& other) const {
  const auto& o = static_cast<const LocalNode&>(other);
  return left_ == o.left_ && right_ == o.right_ && offset_ == o.offset_;
}

ChunkedCausalNode::ChunkedCausalNode(std::int64_t chunk) : chunk_(chunk) {
  if (chunk < 1) {
    throw std::invalid_argument("Mask::chunked_causal: chunk must be >= 1, got " +
                                std::to_string(chunk));
  }
}

Wide ChunkedCausalNode::chunk_start(std::int64_t q) const {
  return Wide{floor_div(q, chunk_)} * chunk_;
}

bool ChunkedCausalNode::keeps(std::int64_t q, std::int64_t k) const {
  return k <= q && k >= chunk_start(q);
}

TileKind ChunkedCausalNode::classify(IndexRange rows, IndexRange cols) const {
  const std::int64_t q_last = rows.end - 1;
  const std::int64_t k_last = cols.end - 1;
  // Row q keeps [chunk_start(q), q]; both ends grow with q. Every row covers
  // the columns iff the first row reaches past them and the last row's chunk
  // starts before them.
  if (k_last <= rows.begin && chunk_start(q_last) <= cols.begin) return TileKind::kFull;
  // Some row keeps a column iff the first row with q >= k0 (the earliest
  // chunk start among rows that reach the tile) starts its chunk in time.
  const std::int64_t q_first = std::max(rows.begin, cols.begin);
  if (q_first <= q_last && chunk_start(q_first) <= k_last) return TileKind::kPartial;
  return TileKind::kEmpty;
}

IndexRange ChunkedCausalNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  if (rows.empty()) return {};
  return clip_hull(chunk_start(rows.begin), rows.end, kv_len);
}

void ChunkedCausalNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n,
                                 std::uint8_t* keep) const {
  fill_keys(keep, k0, n, chunk_start(q), q);
}

std::string ChunkedCausalNode::to_string() const {
  return "chunked:size=" + std::to_string(chunk_);
}

std::size_t ChunkedCausalNode::hash() const {
  return hash_combine(kChunkedTag, static_cast<std::uint64_t>(chunk_));
}

bool ChunkedCausalNode::equals(const MaskNode& other) const {
  return chunk_ == static_cast<const ChunkedCausalNode&>(other).chunk_;
}

KeyRangeNode::KeyRangeNode(std::int64_t begin, std::int64_t end) : begin_(begin), end_(end) {
  if (begin < 0 || end < begin) {
    throw std::invalid_argument("Mask::key_range: needs 0 <= begin <= end, got begin " +
                                std::to_string(begin) + ", end " + std::to_string(end));
  }
}

TileKind KeyRangeNode::classify(IndexRange, IndexRange cols) const {
  if (begin_ == end_ || cols.end <= begin_ || cols.begin >= end_) return TileKind::kEmpty;
  if (cols.begin >= begin_ && cols.end <= end_) return TileKind::kFull;
  return TileKind::kPartial;
}

IndexRange KeyRangeNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  if (rows.empty()) return {};
  return clip_hull(begin_, end_, kv_len);
}

void KeyRangeNode::eval_row(std::int64_t, std::int64_t k0, std::int64_t n,
                            std::uint8_t* keep) const {
  fill_interval(keep, n, begin_ - k0, end_ - 1 - k0);
}

std::string KeyRangeNode::to_string() const {
  return "keys:begin=" + std::to_string(begin_) + ",end=" + std::to_string(end_);
}

std::size_t KeyRangeNode::hash() const {
  return hash_combine(hash_combine(kKeyRangeTag, static_cast<std::uint64_t>(begin_)),
                      static_cast<std::uint64_t>(end_));
}

bool KeyRangeNode::equals(const MaskNode& other) const {
  const auto& o = static_cast<const KeyRangeNode&>(other);
  return begin_ == o.begin_ && end_ == o.end_;
}

}  // namespace tilesplash::detail
