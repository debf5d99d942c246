// The Mask value type and the parts of MaskNode every family shares.
#include "tilesplash/mask.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <typeinfo>
#include <utility>
#include <vector>

#include "masks/mask_util.h"
#include "masks/nodes.h"
#include "tilesplash/mask_node.h"

namespace tilesplash {
namespace detail {

IndexRange MaskNode::kv_hull(IndexRange, std::int64_t kv_len) const { return {0, kv_len}; }

void MaskNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const {
  for (std::int64_t i = 0; i < n; ++i) keep[i] = keeps(q, k0 + i) ? 1 : 0;
}

TileKind classify_by_scan(const MaskNode& node, IndexRange rows, IndexRange cols) {
  // Rows are scanned in stack-sized chunks; the answer is known as soon as
  // one kept and one dropped pair have been seen.
  constexpr std::int64_t kChunk = 512;
  std::uint8_t keep[kChunk];
  bool any_kept = false;
  bool any_dropped = false;
  // Counted from the tile's first key, unsigned: cols.end - cols.begin and
  // k + kChunk may pass INT64_MAX for tiles at the ends of the index range.
  const std::uint64_t width =
      static_cast<std::uint64_t>(cols.end) - static_cast<std::uint64_t>(cols.begin);
  for (std::int64_t q = rows.begin; q < rows.end; ++q) {
    for (std::uint64_t done = 0; done < width; done += kChunk) {
      const auto n = static_cast<std::int64_t>(std::min<std::uint64_t>(kChunk, width - done));
      const auto k = static_cast<std::int64_t>(static_cast<std::uint64_t>(cols.begin) + done);
      node.eval_row(q, k, n, keep);
      unsigned kept = 0;
      for (std::int64_t i = 0; i < n; ++i) kept += keep[i] != 0;
      any_kept |= kept != 0;
      any_dropped |= kept != static_cast<unsigned>(n);
      if (any_kept && any_dropped) return TileKind::kPartial;
    }
  }
  return any_kept ? TileKind::kFull : TileKind::kEmpty;
}

bool nodes_equal(const MaskNode& a, const MaskNode& b) {
  return &a == &b || (typeid(a) == typeid(b) && a.equals(b));
}

}  // namespace detail

namespace {

using detail::NodePtr;

// Keeps OR / AND trees flat: (a | b) | c and a | (b | c) become one OR of
// three, so equal expressions compare equal and print one way.
template <typename Combine>
Mask combine(const NodePtr& a, const NodePtr& b) {
  std::vector<NodePtr> children;
  for (const NodePtr& side : {a, b}) {
    if (const auto* same = dynamic_cast<const Combine*>(side.get())) {
      children.insert(children.end(), same->children().begin(), same->children().end());
    } else {
      children.push_back(side);
    }
  }
  return Mask(std::make_shared<Combine>(std::move(children)));
}

}  // namespace

char to_char(TileKind kind) {
  switch (kind) {
    case TileKind::kEmpty:
      return 'E';
    case TileKind::kPartial:
      return 'P';
    case TileKind::kFull:
      return 'F';
  }
  return '?';
}

Mask::Mask(std::shared_ptr<const detail::MaskNode> node) : node_(std::move(node)) {
  if (!node_) throw std::invalid_argument("Mask: node must not be null");
}

Mask Mask::dense() { return Mask(std::make_shared<detail::DenseNode>()); }

Mask Mask::causal(std::int64_t offset) {
  return Mask(std::make_shared<detail::CausalNode>(offset));
}

Mask Mask::local(std::optional<std::int64_t> left, std::optional<std::int64_t> right,
                 std::int64_t offset) {
  return Mask(std::make_shared<detail::LocalNode>(left, right, offset));
}

Mask Mask::chunked_causal(std::int64_t chunk) {
  return Mask(std::make_shared<detail::ChunkedCausalNode>(chunk));
}

Mask Mask::key_range(std::int64_t begin, std::int64_t end) {
  return Mask(std::make_shared<detail::KeyRangeNode>(begin, end));
}

Mask Mask::random(double density, std::uint64_t seed) {
  return Mask(std::make_shared<detail::RandomNode>(density, seed));
}

Mask Mask::function(std::function<bool(std::int64_t q, std::int64_t k)> keep, std::string name) {
  return Mask(std::make_shared<detail::FunctionNode>(std::move(keep), std::move(name)));
}

Mask Mask::operator|(const Mask& other) const {
  return combine<detail::OrNode>(node_, other.node_);
}

Mask Mask::operator&(const Mask& other) const {
  return combine<detail::AndNode>(node_, other.node_);
}

bool Mask::keeps(std::int64_t q, std::int64_t k) const { return node_->keeps(q, k); }

TileKind Mask::classify(IndexRange rows, IndexRange cols) const {
  if (rows.empty() || cols.empty()) return TileKind::kEmpty;
  return node_->classify(rows, cols);
}

IndexRange Mask::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  if (rows.empty() || kv_len <= 0) return {};
  const IndexRange hull = node_->kv_hull(rows, kv_len);
  // Nodes written elsewhere may not clip; the planner relies on it.
  const IndexRange clipped{std::max<std::int64_t>(hull.begin, 0), std::min(hull.end, kv_len)};
  return clipped.empty() ? IndexRange{} : clipped;
}

void Mask::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const {
  if (n <= 0) return;
  // Keys k0 .. k0 + n - 1 must be int64 indices, as every range's are.
  if (k0 > std::numeric_limits<std::int64_t>::max() - n) {
    throw std::invalid_argument("Mask::eval_row: keys [" + std::to_string(k0) + ", " +
                                std::to_string(k0) + " + " + std::to_string(n) +
                                ") pass the int64 range; expected k0 + n <= 2^63 - 1");
  }
  node_->eval_row(q, k0, n, keep);
}

bool Mask::is_analytic() const { return node_->is_analytic(); }

void Mask::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  node_->check_lengths(q_len, kv_len);
}

std::string Mask::to_string() const { return node_->to_string(); }

std::size_t Mask::hash() const { return node_->hash(); }

bool operator==(const Mask& a, const Mask& b) { return detail::nodes_equal(*a.node_, *b.node_); }

}  // namespace tilesplash
