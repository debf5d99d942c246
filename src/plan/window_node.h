// The mask node behind window_mask() (plan_window.h): a global mask seen
// through an offset window. Every question is shifted into global indices and
// forwarded, so the wrapped node's O(1) tile classification carries over.
#pragma once

#include <cstdint>
#include <string>

#include "tilesplash/mask_node.h"
#include "tilesplash/plan_window.h"

namespace tilesplash::detail {

class WindowNode final : public MaskNode {
 public:
  // The window must pass check_window(); the caller checks the global mask's lengths.
  WindowNode(Mask global, const MaskWindow& window);

  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  bool is_analytic() const override { return global_.is_analytic(); }
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;

  const Mask& global() const { return global_; }
  const MaskWindow& window() const { return window_; }

 private:
  // Local indices plus the window's start (>= 0). Global indices past
  // INT64_MAX do not exist: ranges are clipped there and keeps() is false,
  // so a local index near INT64_MAX never wraps into the map's start.
  IndexRange to_global_rows(IndexRange rows) const { return shifted(rows, window_.q.begin); }
  IndexRange to_global_cols(IndexRange cols) const { return shifted(cols, window_.kv.begin); }
  static IndexRange shifted(IndexRange range, std::int64_t by);

  Mask global_;
  MaskWindow window_;
};

}  // namespace tilesplash::detail
