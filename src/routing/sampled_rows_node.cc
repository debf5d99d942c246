// Row-by-row classification of the router's stacked sample block.
#include "routing/sampled_rows_node.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "masks/mask_util.h"

namespace tilesplash::detail {
namespace {

constexpr std::size_t kSampledTag = 0x73616d706c6564;

}  // namespace

SampledRowsNode::SampledRowsNode(std::vector<Mask> sections, std::vector<std::int64_t> rows)
    : sections_(std::move(sections)), rows_(std::move(rows)) {
  if (sections_.empty() || rows_.empty()) {
    throw std::invalid_argument("sampled rows mask: needs at least one section and one row");
  }
}

const Mask& SampledRowsNode::section(std::int64_t i) const {
  return sections_[static_cast<std::size_t>(i) / rows_.size()];
}

std::int64_t SampledRowsNode::row(std::int64_t i) const {
  return rows_[static_cast<std::size_t>(i) % rows_.size()];
}

bool SampledRowsNode::keeps(std::int64_t i, std::int64_t k) const {
  if (i < 0 || i >= block_rows()) return false;
  return section(i).keeps(row(i), k);
}

TileKind SampledRowsNode::classify(IndexRange rows, IndexRange cols) const {
  // Rows outside the block keep nothing: only the block's own rows are visited.
  const std::int64_t first = std::max<std::int64_t>(rows.begin, 0);
  const std::int64_t last = std::min(rows.end, block_rows());
  bool any_full = false;
  bool any_empty = first > rows.begin || last < rows.end;
  for (std::int64_t i = first; i < last; ++i) {
    const std::int64_t q = row(i);
    const TileKind kind = section(i).classify({q, q + 1}, cols);
    if (kind == TileKind::kPartial) return TileKind::kPartial;
    any_full = any_full || kind == TileKind::kFull;
    any_empty = any_empty || kind == TileKind::kEmpty;
    if (any_full && any_empty) return TileKind::kPartial;
  }
  return any_full ? TileKind::kFull : TileKind::kEmpty;
}

IndexRange SampledRowsNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  IndexRange hull{};
  for (std::int64_t i = std::max<std::int64_t>(rows.begin, 0); i < std::min(rows.end, block_rows());
       ++i) {
    const std::int64_t q = row(i);
    const IndexRange part = section(i).kv_hull({q, q + 1}, kv_len);
    if (part.empty()) continue;
    hull = hull.empty()
               ? part
               : IndexRange{std::min(hull.begin, part.begin), std::max(hull.end, part.end)};
  }
  return hull;
}

void SampledRowsNode::eval_row(std::int64_t i, std::int64_t k0, std::int64_t n,
                               std::uint8_t* keep) const {
  if (i < 0 || i >= block_rows()) {
    std::memset(keep, 0, static_cast<std::size_t>(n));
    return;
  }
  section(i).eval_row(row(i), k0, n, keep);
}

bool SampledRowsNode::is_analytic() const {
  return std::all_of(sections_.begin(), sections_.end(),
                     [](const Mask& mask) { return mask.is_analytic(); });
}

std::string SampledRowsNode::to_string() const {
  std::string text = "sampled_rows:rows=" + std::to_string(rows_.size()) + ",sections=";
  for (std::size_t s = 0; s < sections_.size(); ++s) {
    text += (s == 0 ? "[" : ";[") + sections_[s].to_string() + "]";
  }
  return text;
}

std::size_t SampledRowsNode::hash() const {
  std::size_t h = kSampledTag;
  for (const Mask& mask : sections_) h = hash_combine(h, mask.hash());
  for (const std::int64_t q : rows_) h = hash_combine(h, static_cast<std::uint64_t>(q));
  return h;
}

bool SampledRowsNode::equals(const MaskNode& other) const {
  const auto& o = static_cast<const SampledRowsNode&>(other);
  return rows_ == o.rows_ && sections_ == o.sections_;
}

}  // namespace tilesplash::detail
