// Key tiles chosen per query tile by their pooled scores (SpargeAttn, Zhang
// et al. 2025; XAttention, Xu et al. 2025; the per-head floor of SCOPE): a
// mask built per head from the head's own data, at tile granularity.
//
// Per head, over tiles of blocks.block_q query rows and blocks.block_kv key
// rows of the tokens x tokens map (the last of each ragged): q̄_i is the mean
// query of query tile i, k̄_j the mean key of key tile j, n_j its keys. The
// pooled score s_ij = scale * q̄_i . k̄_j and the tile's mass
// w_ij = n_j exp(s_ij) / sum_j' n_j' exp(s_ij') (a softmax over the key tiles
// of the row, weighted by tile size: the share of the row's attention the
// tile would take were its keys all k̄_j). Kept per query tile i:
//   forced   the key tiles that overlap query tile i's rows (the diagonal),
//            the first frame's key tiles (options.sink), tiles over text
//            (options.text_full: text columns; a query tile over text rows
//            keeps every key tile), and key tiles whose keys are not
//            self-similar: mean over the tile's keys of cos(k, k̄_j) below
//            options.gate (SpargeAttn's gate: a mean is a poor proxy there;
//            with options.density, within options.gate_share of it);
//   ranked   the other tiles by falling mass (lower index first on a tie):
//            tile r is kept while the mass already kept (forced tiles
//            included) is below p, or while fewer than options.floor tiles
//            are kept in the row; with p = 1 every tile of nonzero mass.
// A kept tile is kept whole, so the mask is exact at tile granularity and
// its plan (over the same blocks) has full and empty tiles only.
//
// Memory is O(tiles): means (tiles x d), the kept tiles as per-row lists, a
// prefix sum of them for the mask; never a tokens x tokens array. Means,
// dot products and masses are computed in double in a fixed order, one work
// item per query tile: results are bit-identical for any thread count.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"

namespace tilesplash {

struct PooledOptions {
  // Cumulative pooled mass kept per query tile, in (0, 1]. SpargeAttn's
  // default CDF threshold.
  double p = 0.98;
  // At least this many key tiles kept per query tile (forced ones count),
  // >= 0: SCOPE's per-head floor.
  std::int64_t floor = 1;
  // Key tiles whose mean cosine similarity to their mean key is below this
  // are always kept, in [-1, 1] (-1: none is gated). SpargeAttn's
  // simthreshd1 of its untuned example.
  double gate = 0.6;
  // With a density target, the gate forces key tiles (least self-similar
  // first) only while their columns (the tile's keys x every query) fit in
  // this share of the density, in [0, 1]: where most tiles fail the gate (a
  // head whose keys are not local in frame-major order) the density is
  // still met, by the pooled ranking. SpargeAttn tunes its gate per head
  // for the same reason.
  double gate_share = 0.5;
  // Meet this density (of tokens x tokens) instead of p: the smallest p
  // whose selection keeps at least it (p = 1 when none does), in (0, 1].
  std::optional<double> density;
  bool sink = false;      // the first frame's key tiles always kept (Wan)
  bool text_full = true;  // tiles over text rows and columns always kept
  BlockSizes blocks{64, 64};
};

// Throws std::invalid_argument naming the bad field ("p", "floor", "gate",
// "gate_share", "density", "blocks").
void check_pooled_options(const PooledOptions& options);

// One head's kept tiles, as per-query-tile lists.
struct PooledSelection {
  std::int64_t tokens = 0;
  BlockSizes blocks;
  std::int64_t q_tiles = 0, kv_tiles = 0;
  std::vector<std::int64_t> row_offsets;  // q_tiles + 1
  std::vector<std::int32_t> kept;         // key tiles per query tile, ascending
  double p = 0.0;                         // the p the selection used
  std::int64_t kept_pairs = 0;            // token pairs of the kept tiles
  double density = 0.0;                   // kept_pairs / tokens^2
};

// The selection of head `head` of q and k ([heads, tokens, d], original
// order, any dtype and strides; tokens == geometry.tokens()) with softmax
// scale `scale`, on `threads` threads (0: the context's) of `context` (null:
// default_threading_context()). Throws std::invalid_argument naming a bad
// argument.
PooledSelection pooled_select(const VideoGeometry& geometry, const TensorView& q,
                              const TensorView& k, std::int64_t head, double scale,
                              const PooledOptions& options, int threads = 0,
                              ThreadingContext* context = nullptr);

// The selection as a mask over tokens x tokens: (q, k) kept iff their tiles'
// pair is; classifies any rectangle in O(1) through a prefix sum of the kept
// tiles (O(tiles) memory).
Mask pooled_mask(const PooledSelection& selection);

// The plan of pooled_mask() over the selection's own blocks: its tiles are
// the selection's, full, in ascending order per query tile.
TilePlan pooled_plan(const PooledSelection& selection);

// The rungs of p an error target steps a pooled head over, increasing:
// 0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 1.
std::span<const double> pooled_p_ladder();

// Relative L2 errors over the sampled query `rows` (original order) of head
// `head` under each selection against exact attention over keys [0,
// key_limit) (key_limit < 0: all): sampled_error() (routing.h) of the mean
// square difference and the reference's mean square, in double. What an
// error target compares with its goal (q, k, v: [heads, tokens, d | dv]).
std::vector<double> pooled_sampled_errors(const TensorView& q, const TensorView& k,
                                          const TensorView& v, std::int64_t head, double scale,
                                          std::span<const std::int64_t> rows,
                                          std::span<const PooledSelection> selections,
                                          std::int64_t key_limit = -1);

}  // namespace tilesplash
