// Window masks and plans (plan_window.h) over WindowNode.
#include "tilesplash/plan_window.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "plan/window_node.h"

namespace tilesplash {
namespace {

void check_range(IndexRange range, std::int64_t len, const char* name, const char* len_name) {
  if (range.begin < 0 || range.begin > range.end || range.end > len) {
    throw std::invalid_argument(std::string("window: ") + name +
                                " must satisfy 0 <= begin <= end <= " + len_name + " (" +
                                std::to_string(len) + "), got [" + std::to_string(range.begin) +
                                ", " + std::to_string(range.end) + ")");
  }
}

}  // namespace

void check_window(const MaskWindow& window) {
  for (const auto& [len, name] : {std::pair{window.q_len, "q_len"}, {window.kv_len, "kv_len"}}) {
    if (len < 1) {
      throw std::invalid_argument(std::string("window: ") + name + " must be >= 1, got " +
                                  std::to_string(len));
    }
  }
  check_range(window.q, window.q_len, "q", "q_len");
  check_range(window.kv, window.kv_len, "kv", "kv_len");
}

Mask window_mask(const Mask& global, const MaskWindow& window) {
  check_window(window);
  try {
    global.check_lengths(window.q_len, window.kv_len);
  } catch (const std::invalid_argument& error) {
    throw std::invalid_argument("window of a " + std::to_string(window.q_len) + " x " +
                                std::to_string(window.kv_len) + " map: " + error.what());
  }
  return Mask(std::make_shared<detail::WindowNode>(global, window));
}

TileKind classify_window(const Mask& mask, IndexRange q, IndexRange kv) {
  if (q.empty() || kv.empty()) return TileKind::kEmpty;
  // The hull settles most empty windows (a band far from the block) without
  // asking the mask about the whole rectangle.
  const IndexRange hull = mask.kv_hull(q, kv.end);
  if (hull.empty() || hull.end <= kv.begin) return TileKind::kEmpty;
  return mask.classify(q, kv);
}

TilePlan build_window_plan(const Mask& global, const MaskWindow& window, BlockSizes blocks) {
  const Mask local = window_mask(global, window);
  return TilePlan::build(local, window.q.size(), window.kv.size(), blocks);
}

}  // namespace tilesplash
