// The tuner's sampled plans: see sample_plan.h for why a plan with only some
// q-blocks kept times exactly those q-blocks' share of the full run.
#include "tuning/sample_plan.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <typeinfo>

#include "masks/mask_util.h"

namespace tilesplash::tuning {

SampledBlocksNode::SampledBlocksNode(Mask inner, std::int64_t block_q,
                                     const std::vector<std::int64_t>& blocks)
    : inner_(std::move(inner)), block_q_(block_q) {
  if (block_q < 1) {
    throw std::invalid_argument("SampledBlocksNode: block_q must be >= 1, got " +
                                std::to_string(block_q));
  }
  for (const std::int64_t b : blocks) {
    if (b < 0) {
      throw std::invalid_argument("SampledBlocksNode: blocks must be >= 0, got " +
                                  std::to_string(b));
    }
    if (static_cast<std::size_t>(b) >= selected_.size()) {
      selected_.resize(static_cast<std::size_t>(b) + 1, false);
    }
    selected_[static_cast<std::size_t>(b)] = true;
  }
}

bool SampledBlocksNode::selected_row(std::int64_t q) const {
  if (q < 0) return false;
  const std::size_t block = static_cast<std::size_t>(q / block_q_);
  return block < selected_.size() && selected_[block];
}

int SampledBlocksNode::coverage(IndexRange rows) const {
  bool any = false;
  bool all = true;
  const std::int64_t first = std::max<std::int64_t>(rows.begin, 0) / block_q_;
  const std::int64_t last = (rows.end - 1) / block_q_;
  if (rows.begin < 0) all = false;
  for (std::int64_t b = first; b <= last; ++b) {
    const bool on =
        static_cast<std::size_t>(b) < selected_.size() && selected_[static_cast<std::size_t>(b)];
    any = any || on;
    all = all && on;
  }
  return all ? 2 : (any ? 1 : 0);
}

bool SampledBlocksNode::keeps(std::int64_t q, std::int64_t k) const {
  return selected_row(q) && inner_.keeps(q, k);
}

TileKind SampledBlocksNode::classify(IndexRange rows, IndexRange cols) const {
  switch (coverage(rows)) {
    case 0:
      return TileKind::kEmpty;
    case 2:
      return inner_.classify(rows, cols);
    default:  // rows straddle a selected and an unselected block
      return detail::classify_by_scan(*this, rows, cols);
  }
}

IndexRange SampledBlocksNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  if (coverage(rows) == 0) return {};
  return inner_.kv_hull(rows, kv_len);
}

void SampledBlocksNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n,
                                 std::uint8_t* keep) const {
  if (selected_row(q)) {
    inner_.eval_row(q, k0, n, keep);
  } else if (n > 0) {
    std::memset(keep, 0, static_cast<std::size_t>(n));
  }
}

std::string SampledBlocksNode::to_string() const {
  const auto count = std::count(selected_.begin(), selected_.end(), true);
  return "sampled(" + inner_.to_string() + ";block_q=" + std::to_string(block_q_) +
         ";blocks=" + std::to_string(count) + ")";
}

std::size_t SampledBlocksNode::hash() const {
  std::size_t h = detail::hash_combine(inner_.hash(), static_cast<std::uint64_t>(block_q_));
  for (std::size_t b = 0; b < selected_.size(); ++b) {
    if (selected_[b]) h = detail::hash_combine(h, b);
  }
  return h;
}

bool SampledBlocksNode::equals(const MaskNode& other) const {
  const auto& o = static_cast<const SampledBlocksNode&>(other);
  // Trailing unselected blocks do not change the mask.
  const auto trimmed = [](const std::vector<bool>& v) {
    auto end = v.size();
    while (end > 0 && !v[end - 1]) --end;
    return std::vector<bool>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(end));
  };
  return block_q_ == o.block_q_ && inner_ == o.inner_ && trimmed(selected_) == trimmed(o.selected_);
}

std::vector<std::int64_t> visited_pairs_per_block(const TilePlan& plan) {
  std::vector<std::int64_t> work(static_cast<std::size_t>(plan.num_q_blocks()), 0);
  for (std::int64_t qb = 0; qb < plan.num_q_blocks(); ++qb) {
    const std::int64_t rows = plan.q_range(qb).size();
    std::int64_t keys = 0;
    for (const PlanTile& tile : plan.tiles(qb)) keys += plan.kv_range(tile.kv_block).size();
    work[static_cast<std::size_t>(qb)] = rows * keys;
  }
  return work;
}

std::vector<std::int64_t> stratified_blocks(const std::vector<std::int64_t>& work,
                                            std::int64_t count) {
  const std::int64_t n = static_cast<std::int64_t>(work.size());
  std::vector<std::int64_t> order(work.size());
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (count >= n) return order;
  if (count < 1) return {};
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return work[static_cast<std::size_t>(a)] < work[static_cast<std::size_t>(b)];
  });
  std::vector<std::int64_t> picked;
  picked.reserve(static_cast<std::size_t>(count));
  for (std::int64_t j = 0; j < count; ++j) {
    // The middle of stratum j: rank floor((j + 1/2) * n / count).
    picked.push_back(order[static_cast<std::size_t>((2 * j + 1) * n / (2 * count))]);
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

TilePlan sampled_plan(const TilePlan& full, const std::vector<std::int64_t>& blocks) {
  const Mask mask(
      std::make_shared<const SampledBlocksNode>(full.mask(), full.blocks().block_q, blocks));
  return TilePlan::build(mask, full.q_len(), full.kv_len(), full.blocks());
}

}  // namespace tilesplash::tuning
