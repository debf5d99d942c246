// Sliding Tile Attention as MaskNodes (see sta.h): StaNode on the original
// frame-major indices (what the router scores and the output equals) and
// StaRunNode on tile-major indices (what the kernel runs). The kept set is a
// product of one condition per dimension on tile coordinates, so a box of
// tokens against a box of keys is all-kept iff every dimension is, and has a
// kept pair iff every dimension does: a tile costs at most 5 x 5 box pairs of
// three interval checks each.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "geometry/grid_boxes.h"
#include "tilesplash/mask_node.h"
#include "tilesplash/sta.h"

namespace tilesplash::detail {

// Throws std::invalid_argument naming a bad option.
void check_sta_options(const StaOptions& options);

// The numbers every STA computation needs.
class StaGrid {
 public:
  StaGrid(const VideoGeometry& geometry, const StaOptions& options);

  // Some / every pair of query tiles [qa, qb] x key tiles [ka, kb] kept in
  // dimension `dim`.
  void check(int dim, std::int64_t qa, std::int64_t qb, std::int64_t ka, std::int64_t kb, bool& any,
             bool& all) const;
  bool keeps_tiles(const std::array<std::int64_t, 3>& q,
                   const std::array<std::int64_t, 3>& k) const;
  // Key tiles [lo, hi] of dimension `dim` kept by some query tile of [qa, qb].
  std::array<std::int64_t, 2> reach(int dim, std::int64_t qa, std::int64_t qb) const;
  // Accumulates any / all over the tile boxes q x k.
  void check_boxes(const GridBox& q, const GridBox& k, bool& any, bool& all) const;

  std::int64_t extent(int dim, std::int64_t t) const;  // tokens of tile t along dim
  // Tile-major run positions (video-relative).
  std::int64_t tile_start(const std::array<std::int64_t, 3>& t) const;
  std::int64_t tile_len(const std::array<std::int64_t, 3>& t) const;
  std::array<std::int64_t, 3> tile_at(std::int64_t position) const;  // tile holding it
  std::int64_t linear(const std::array<std::int64_t, 3>& t) const;   // raster index of a tile
  // Original video-relative index of tile-major position `position`.
  std::int64_t source(std::int64_t position) const;
  std::array<std::int64_t, 3> token_tile(std::int64_t u) const;  // tile of original index u

  std::array<std::int64_t, 3> dims;   // F, H, W
  std::array<std::int64_t, 3> tile;   // tt, th, tw
  std::array<std::int64_t, 3> count;  // tiles per dimension
  std::array<std::int64_t, 3> half;   // D per dimension; -1: the window covers it
};

class StaNode final : public MaskNode {
 public:
  StaNode(const VideoGeometry& geometry, StaOptions options);

  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;

  const StaMaskInfo& info() const { return info_; }

 private:
  TileKind classify_video(IndexRange rows, IndexRange cols) const;

  StaMaskInfo info_;
  StaGrid grid_;
  IndexRange video_;
  IndexRange text_;
  std::int64_t tokens_;
};

// The same mask on tile-major indices: video positions [0, L) tile-major,
// text [L, N).
class StaRunNode final : public MaskNode {
 public:
  StaRunNode(const VideoGeometry& geometry, StaOptions options);

  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;

 private:
  TileKind classify_video(IndexRange rows, IndexRange cols) const;

  StaMaskInfo info_;
  StaGrid grid_;
  std::int64_t video_tokens_;
  std::int64_t tokens_;
};

// One sliding-tile candidate per temporal window width (tiles of 6 x 8 x 8),
// each with the spatial window whose density is closest to options.density.
std::vector<MaskCandidate> sta_for_density(const VideoGeometry& geometry,
                                           const MethodOptions& options);

}  // namespace tilesplash::detail
