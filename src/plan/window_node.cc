#include "plan/window_node.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "masks/mask_util.h"

namespace tilesplash::detail {
namespace {

constexpr std::size_t kWindowTag = 0x77696e646f77;

std::string range_text(IndexRange range) {
  return std::to_string(range.begin) + ":" + std::to_string(range.end);
}

}  // namespace

WindowNode::WindowNode(Mask global, const MaskWindow& window)
    : global_(std::move(global)), window_(window) {}

IndexRange WindowNode::shifted(IndexRange range, std::int64_t by) {
  constexpr Wide kMax = std::numeric_limits<std::int64_t>::max();
  return {static_cast<std::int64_t>(std::min<Wide>(Wide{range.begin} + by, kMax)),
          static_cast<std::int64_t>(std::min<Wide>(Wide{range.end} + by, kMax))};
}

bool WindowNode::keeps(std::int64_t q, std::int64_t k) const {
  std::int64_t global_q = 0, global_k = 0;
  if (__builtin_add_overflow(q, window_.q.begin, &global_q) ||
      __builtin_add_overflow(k, window_.kv.begin, &global_k)) {
    return false;
  }
  return global_.keeps(global_q, global_k);
}

TileKind WindowNode::classify(IndexRange rows, IndexRange cols) const {
  const IndexRange global_rows = to_global_rows(rows), global_cols = to_global_cols(cols);
  if (global_rows.empty() || global_cols.empty()) return TileKind::kEmpty;
  return global_.classify(global_rows, global_cols);
}

IndexRange WindowNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  // The global hull is clipped to [0, kv.begin + kv_len); what lies left of
  // the window's first key is cut off when shifting back.
  const IndexRange hull = global_.kv_hull(to_global_rows(rows), to_global_cols({0, kv_len}).end);
  const IndexRange local{std::max<std::int64_t>(hull.begin - window_.kv.begin, 0),
                         std::min(hull.end - window_.kv.begin, kv_len)};
  return local.empty() ? IndexRange{} : local;
}

void WindowNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n,
                          std::uint8_t* keep) const {
  // A row or keys past INT64_MAX keep nothing.
  std::int64_t global_q = 0;
  if (__builtin_add_overflow(q, window_.q.begin, &global_q)) {
    std::memset(keep, 0, static_cast<std::size_t>(n));
    return;
  }
  const IndexRange keys = to_global_cols({k0, k0 + n});
  global_.eval_row(global_q, keys.begin, keys.size(), keep);
  std::memset(keep + keys.size(), 0, static_cast<std::size_t>(n - keys.size()));
}

void WindowNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  if (q_len == window_.q.size() && kv_len == window_.kv.size()) return;
  throw std::invalid_argument("mask " + to_string() + ": the window covers " +
                              std::to_string(window_.q.size()) + " query rows and " +
                              std::to_string(window_.kv.size()) + " keys; got q_len " +
                              std::to_string(q_len) + ", kv_len " + std::to_string(kv_len));
}

std::string WindowNode::to_string() const {
  return "window(q=" + range_text(window_.q) + ",kv=" + range_text(window_.kv) +
         ",of=" + std::to_string(window_.q_len) + "x" + std::to_string(window_.kv_len) +
         "):" + global_.to_string();
}

std::size_t WindowNode::hash() const {
  std::size_t h = hash_combine(kWindowTag, global_.hash());
  for (const std::int64_t value : {window_.q.begin, window_.q.end, window_.kv.begin, window_.kv.end,
                                   window_.q_len, window_.kv_len}) {
    h = hash_combine(h, static_cast<std::uint64_t>(value));
  }
  return h;
}

bool WindowNode::equals(const MaskNode& other) const {
  const auto& o = static_cast<const WindowNode&>(other);
  return window_ == o.window_ && global_ == o.global_;
}

}  // namespace tilesplash::detail
