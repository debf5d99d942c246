// Tile-granular masks: a mask's kept set rounded OUT to whole tiles, so that
// no tile of the kernel that runs it is partial and no per-pair mask is ever
// evaluated (what Sparse VideoGen, Radial Attention and STA run on GPUs: whole
// 128-tiles kept or dropped). Granularity::kToken is the exact mask; kTile
// keeps every pair of every tile in which the exact mask keeps at least one
// pair. The tiles are those of the kernel that runs the mask (the plan's
// block_q x block_kv, anchored at (0, 0) of the map it runs on, so in the run
// order of a permuted head), which is why the rounding depends on the block
// sizes: the same mask rounded to 64-tiles keeps fewer pairs than rounded to
// 128-tiles. round_out() is the plan transformation (every partial tile of a
// TilePlan made full); tile_granular_mask() is the same kept set as a Mask,
// which is what front doors plan, cache and hand to other backends.
#pragma once

#include <cstdint>
#include <string_view>

#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash {

enum class Granularity : std::uint8_t { kToken, kTile };

std::string_view to_string(Granularity granularity);  // "token", "tile"
// Throws std::invalid_argument("granularity: expected 'token' or 'tile', got '...'").
Granularity parse_granularity(std::string_view text);

// The mask over the q_len x kv_len map whose kept pairs are every in-range
// pair (q, k) whose tile, [floor(q / block_q) * block_q, + block_q) x
// [floor(k / block_kv) * block_kv, + block_kv) clipped to the map, holds a
// pair `mask` keeps. Pairs outside the map are never kept, and its
// check_lengths() accepts exactly q_len x kv_len (after `mask`'s own check).
// A plan of it with the same block sizes has full and empty tiles only; with
// other block sizes it is an exact mask like any other (tiles straddling the
// rounded edge are partial). Classifying a range asks `mask` about each tile
// the range overlaps inside its kv hull: O(1) for a tile of the same grid.
// Throws std::invalid_argument on lengths or block sizes < 1.
Mask tile_granular_mask(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                        BlockSizes tiles);

// `mask` itself for kToken, tile_granular_mask() for kTile: the one call
// through which every front door applies a granularity.
Mask mask_at_granularity(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                         BlockSizes tiles, Granularity granularity);

// A run's separate key segment (keys first + j * stride of the run order,
// j < count; Wan's first-frame sink in token-major order, video.h) without
// the pairs `band` keeps at those keys: keeps(q, j) = segment.keeps(q, j) &&
// !band.keeps(q, first + j * stride). A tile-granular run rounds its band and
// its segment out separately, so their kept sets overlap where a rounded band
// tile holds a segment key; this keeps the two disjoint, as their merge
// through the log-sum-exps needs (no key counted twice). Tiles where the two
// meet classify by scanning. Throws std::invalid_argument on first < 0 or
// stride < 1.
Mask segment_minus(const Mask& segment, const Mask& band, std::int64_t first, std::int64_t stride);

// The plan with every partial tile made full, in O(visited tiles) with no
// mask evaluated: the same tiles, no bitmask table, kept_pairs the in-range
// area of the visited tiles. Its mask() is tile_granular_mask(plan.mask(),
// q_len, kv_len, blocks), so keeps() of the rounded plan's mask is true for
// any pair inside a visited tile; it equals TilePlan::build of that mask.
TilePlan round_out(const TilePlan& plan);

}  // namespace tilesplash
