// Window plans: attention over one rectangle of a larger attention map. A
// rank of a sequence-parallel job holds the queries [q.begin, q.end) of a
// global sequence and, at each step of ring attention, a visiting block of
// keys [kv.begin, kv.end); what it must compute is the global mask restricted
// to that rectangle. window_mask() is that restriction as a Mask in the
// window's own coordinates (local row i, local key j are the global pair
// (q.begin + i, kv.begin + j)): it shifts every question it is asked and
// forwards it to the global mask, so the built-in masks still classify each
// tile in O(1), and its plans and kernel runs are those of any other mask.
// classify_window() says without building a plan whether a window keeps any
// pair, so a ring step with nothing to compute is skipped.
#pragma once

#include <cstdint>

#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash {

// The rectangle q x kv of a q_len x kv_len attention map, in global indices.
struct MaskWindow {
  IndexRange q;
  IndexRange kv;
  std::int64_t q_len = 0;  // the global sequence lengths the mask is defined over
  std::int64_t kv_len = 0;
  friend bool operator==(const MaskWindow&, const MaskWindow&) = default;
};

// Throws std::invalid_argument naming the field unless q_len, kv_len >= 1 and
// 0 <= q.begin <= q.end <= q_len, 0 <= kv.begin <= kv.end <= kv_len. Empty
// ranges are allowed (a shard with no tokens).
void check_window(const MaskWindow& window);

// The global mask seen from the window: keeps(i, j) == global.keeps(q.begin +
// i, kv.begin + j). Its check_lengths() accepts exactly the window's sizes;
// the global mask's own length check (video masks) runs here against q_len
// and kv_len. Equal windows of equal masks compare and hash equal, so their
// plans are cached like any other.
Mask window_mask(const Mask& global, const MaskWindow& window);

// Exact kind of the whole rectangle q x kv of `mask` (global indices):
// kEmpty when no pair is kept, so the step can be skipped. Empty ranges give
// kEmpty. O(1) for the built-in masks (a kv-hull test, then one tile
// classification), except where two partial parts of an OR / AND or of a
// video mask meet: those scan, stopping at the first kept and first dropped
// pair, at worst one pass over the rectangle's pairs.
TileKind classify_window(const Mask& mask, IndexRange q, IndexRange kv);

// TilePlan::build(window_mask(global, window), q.size(), kv.size(), blocks):
// tiles start at the window's corner. Throws std::invalid_argument on an
// invalid window or an empty range (a plan needs lengths >= 1).
TilePlan build_window_plan(const Mask& global, const MaskWindow& window, BlockSizes blocks);

}  // namespace tilesplash
