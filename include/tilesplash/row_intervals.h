// A plan as each query row's kept keys written as a few intervals: the form
// a GPU mask function evaluates from per-row loads instead of per-pair table
// gathers. FlexAttention's Triton template loads whatever a mask_mod indexes
// by (query, key) as a [BLOCK_M, BLOCK_N] tile per pipeline stage; indexed by
// the query alone it loads [BLOCK_M] values, so a band, a causal or local
// mask, a first-frame sink and text rows and columns (a handful of intervals
// per row) cost almost nothing beyond the dense tile and leave the kernel's
// shared memory to Q, K and V (python/tilesplash/_flex/masks.py). Masks
// whose rows break into more pieces (svg2 clusters in the original order,
// random) keep the bitmask table.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tilesplash/plan.h"

namespace tilesplash {

struct RowIntervals {
  std::int64_t q_len = 0;
  std::int64_t count = 0;  // intervals per row (max_intervals asked for)
  // Row q keeps key k iff starts[i * q_len + q] <= k < ends[i * q_len + q] for
  // some i < count; rows with fewer intervals repeat the empty [0, 0).
  // Ascending and disjoint (touching intervals are merged) within a row.
  std::vector<std::int32_t> starts;
  std::vector<std::int32_t> ends;
};

// The exact kept set of every in-range pair of `plan`, read off its tiles
// (full tiles whole, partial tiles' runs of set bits). nullopt when some row
// needs more than max_intervals intervals, or a length exceeds int32.
// Throws std::invalid_argument when max_intervals < 1. O(rows x visited
// segments): consecutive full tiles of a q-block are one segment.
std::optional<RowIntervals> row_intervals(const TilePlan& plan, std::int64_t max_intervals);

}  // namespace tilesplash
