// Sliding Tile Attention (Zhang et al., "Fast Video Generation with Sliding
// Tile Attention", ICML 2025) as a tilesplash mask: 3-D windows over tiles of
// the latent video, so that every tile of the plan is full or empty.
//
// The F x H x W latent tokens are cut into tiles of tt x th x tw (default
// 6 x 8 x 8; the last tile of a dimension is ragged when it does not divide).
// A query tile keeps a key tile when, in each of t, h and w,
//   |clamp(q, D, n - 1 - D) - k| <= D,   D = window // 2,
// q, k the tile coordinates, n the tile count of that dimension and window
// (kt, kh, kw) in tiles: the window is shifted inward at the borders, never
// cut, and a window of at least n tiles covers the whole dimension. Text rows
// and columns are kept whole.
//
// Like the temporal mask, the mask is defined on the original frame-major
// order and runs in its own order: tile-major (tiles in raster order of their
// coordinates, raster order inside a tile), with the text after the video. In
// that order a key tile is a contiguous run of keys, so with block sizes that
// divide the tile (a tile of 6 x 8 x 8 = 384 tokens: blocks of 128 or 384) and
// a canvas the tiles divide, every plan tile is full or empty: no partial
// tiles at all. Both orders classify tiles from index ranges (a range of
// indices is at most five boxes of a 3-D grid), never by scanning.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "tilesplash/candidates.h"
#include "tilesplash/mask.h"
#include "tilesplash/video.h"

namespace tilesplash {

struct StaOptions {
  std::array<std::int64_t, 3> tile{6, 8, 8};    // tt, th, tw in latent tokens (>= 1)
  std::array<std::int64_t, 3> window{3, 3, 3};  // kt, kh, kw in tiles (>= 1)
  friend bool operator==(const StaOptions&, const StaOptions&) = default;
};

// Prints as its SPEC: sta:GEOM,tile=TTxTHxTW,window=KTxKHxKW. Throws
// std::invalid_argument naming a bad option.
Mask sta_mask(const VideoGeometry& geometry, StaOptions options = {});

struct StaMaskInfo {
  VideoGeometry geometry;
  StaOptions options;
};
std::optional<StaMaskInfo> sta_mask_info(const Mask& mask);  // nullopt unless sta

// Tiles per dimension: ceil(F / tt), ceil(H / th), ceil(W / tw).
std::array<std::int64_t, 3> sta_tile_counts(const VideoGeometry& geometry,
                                            const StaOptions& options);

// Exact kept pairs over tokens x tokens (the three dimensions count apart).
std::int64_t sta_kept_pairs(const VideoGeometry& geometry, const StaOptions& options);
double sta_density(const VideoGeometry& geometry, const StaOptions& options);

// Run position r (tile-major video, then text) holds original row source(r).
RowOrder sta_tile_major_order(const VideoGeometry& geometry, const StaOptions& options);
// The mask over tile-major indices, and the run: order, that mask, no segment.
Mask sta_run_mask(const VideoGeometry& geometry, const StaOptions& options);
MaskRun sta_run(const VideoGeometry& geometry, const StaOptions& options);

// The candidate "sta:KTxKHxKW" (window in tiles): runs tile-major.
MaskCandidate sta_candidate(const VideoGeometry& geometry, const StaOptions& options);

}  // namespace tilesplash
