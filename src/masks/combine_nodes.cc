// OR and AND of masks. Tile kinds come from the children's kinds whenever
// those decide the answer; only ambiguous mixes (two partial children) scan.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "masks/mask_util.h"
#include "masks/nodes.h"

namespace tilesplash::detail {
namespace {

constexpr std::size_t kOrTag = 0x6f72;
constexpr std::size_t kAndTag = 0x616e64;
// Children are evaluated in chunks this long so the scratch row stays on the
// stack whatever the tile width.
constexpr std::int64_t kChunk = 256;

template <typename Combine>
void eval_combined(const std::vector<NodePtr>& children, std::int64_t q, std::int64_t k0,
                   std::int64_t n, std::uint8_t* keep, Combine combine) {
  children.front()->eval_row(q, k0, n, keep);
  std::uint8_t scratch[kChunk];
  for (std::size_t c = 1; c < children.size(); ++c) {
    for (std::int64_t start = 0; start < n; start += kChunk) {
      const std::int64_t len = std::min(kChunk, n - start);
      children[c]->eval_row(q, k0 + start, len, scratch);
      std::uint8_t* out = keep + start;
      for (std::int64_t i = 0; i < len; ++i) out[i] = combine(out[i], scratch[i]);
    }
  }
}

thread_local std::uint64_t children_built = 0;

}  // namespace

std::uint64_t combine_children_built() { return children_built; }

CombineNode::CombineNode(std::vector<NodePtr> children, bool is_and)
    : children_(std::move(children)) {
  if (children_.empty()) throw std::invalid_argument("mask: OR / AND needs at least one child");
  for (const NodePtr& child : children_) {
    if (!child) throw std::invalid_argument("mask: OR / AND child is null");
    const auto* combined = dynamic_cast<const CombineNode*>(child.get());
    terms_ += combined != nullptr ? combined->terms_ : 1;
    if (combined == nullptr) continue;
    const bool bracketed = is_and && typeid(*child) == typeid(OrNode);
    nesting_ = std::max(nesting_, combined->nesting_ + (bracketed ? 1 : 0));
  }
  if (nesting_ > kMaxMaskNesting) {
    throw std::invalid_argument(
        "mask: ORs inside ANDs nest " + std::to_string(nesting_) + " deep, more than " +
        std::to_string(kMaxMaskNesting) +
        " (the parentheses of its SPEC); build wide ORs and ANDs in one step (any_of, all_of) "
        "instead of alternating | and &");
  }
  if (terms_ > kMaxMaskTerms) {
    throw std::invalid_argument("mask: " + std::to_string(terms_) + " terms, more than " +
                                std::to_string(kMaxMaskTerms) +
                                " (every term is evaluated on every pair of a partial tile)");
  }
  children_built += children_.size();
}

bool CombineNode::is_analytic() const {
  return std::all_of(children_.begin(), children_.end(),
                     [](const NodePtr& child) { return child->is_analytic(); });
}

void CombineNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  for (const NodePtr& child : children_) child->check_lengths(q_len, kv_len);
}

bool CombineNode::equals(const MaskNode& other) const {
  const auto& o = static_cast<const CombineNode&>(other);
  if (children_.size() != o.children_.size()) return false;
  for (std::size_t i = 0; i < children_.size(); ++i) {
    if (!nodes_equal(*children_[i], *o.children_[i])) return false;
  }
  return true;
}

std::size_t CombineNode::hash_with(std::size_t tag) const {
  std::size_t h = tag;
  for (const NodePtr& child : children_) h = hash_combine(h, child->hash());
  return h;
}

std::string CombineNode::join(char op, bool parenthesise_or) const {
  std::string text;
  for (const NodePtr& child_ptr : children_) {
    const MaskNode& child = *child_ptr;
    if (!text.empty()) text += op;
    // '&' binds tighter than '|', so an OR inside an AND needs brackets.
    const bool brackets = parenthesise_or && typeid(child) == typeid(OrNode);
    if (brackets) text += '(';
    text += child.to_string();
    if (brackets) text += ')';
  }
  return text;
}

bool OrNode::keeps(std::int64_t q, std::int64_t k) const {
  return std::any_of(children().begin(), children().end(),
                     [=](const NodePtr& child) { return child->keeps(q, k); });
}

TileKind OrNode::classify(IndexRange rows, IndexRange cols) const {
  int partial = 0;
  for (const NodePtr& child : children()) {
    const TileKind kind = child->classify(rows, cols);
    if (kind == TileKind::kFull) return TileKind::kFull;
    if (kind == TileKind::kPartial) ++partial;
  }
  if (partial == 0) return TileKind::kEmpty;
  if (partial == 1) return TileKind::kPartial;
  // Two partial children may still cover the tile between them.
  return classify_by_scan(*this, rows, cols);
}

IndexRange OrNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  IndexRange hull{};
  for (const NodePtr& child : children()) {
    const IndexRange part = child->kv_hull(rows, kv_len);
    if (part.empty()) continue;
    hull = hull.empty()
               ? part
               : IndexRange{std::min(hull.begin, part.begin), std::max(hull.end, part.end)};
  }
  return hull;
}

void OrNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const {
  eval_combined(children(), q, k0, n, keep,
                [](std::uint8_t a, std::uint8_t b) { return static_cast<std::uint8_t>(a | b); });
}

std::string OrNode::to_string() const { return join('|', false); }

std::size_t OrNode::hash() const { return hash_with(kOrTag); }

bool AndNode::keeps(std::int64_t q, std::int64_t k) const {
  return std::all_of(children().begin(), children().end(),
                     [=](const NodePtr& child) { return child->keeps(q, k); });
}

TileKind AndNode::classify(IndexRange rows, IndexRange cols) const {
  int partial = 0;
  for (const NodePtr& child : children()) {
    const TileKind kind = child->classify(rows, cols);
    if (kind == TileKind::kEmpty) return TileKind::kEmpty;
    if (kind == TileKind::kPartial) ++partial;
  }
  if (partial == 0) return TileKind::kFull;
  // Full children leave the one partial child's pattern unchanged.
  if (partial == 1) return TileKind::kPartial;
  // Two partial children may have no kept pair in common.
  return classify_by_scan(*this, rows, cols);
}

IndexRange AndNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  IndexRange hull{0, kv_len};
  for (const NodePtr& child : children()) {
    const IndexRange part = child->kv_hull(rows, kv_len);
    hull = {std::max(hull.begin, part.begin), std::min(hull.end, part.end)};
    if (hull.empty()) return {};
  }
  return hull;
}

void AndNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const {
  eval_combined(children(), q, k0, n, keep,
                [](std::uint8_t a, std::uint8_t b) { return static_cast<std::uint8_t>(a & b); });
}

std::string AndNode::to_string() const { return join('&', true); }

std::size_t AndNode::hash() const { return hash_with(kAndTag); }

}  // namespace tilesplash::detail
