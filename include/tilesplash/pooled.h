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
// The tiles are cut in a row order (options.order): frame-major (the
// original order) or token-major (RowOrder::token_major: the same patch of
// every frame side by side, text in place), Q and K rows in the same order.
// A temporal head attends across frames at one position: in frame-major
// order a 64-row query tile spans 64 positions of one frame and needs every
// frame's key tiles over them; in token-major order its keys sit in a few
// tiles around the diagonal. PooledOrder::kAuto selects in both orders and
// keeps the cheaper selection (see PooledOrder).
//
// Memory is O(tiles): means (tiles x d), the kept tiles as per-row lists, a
// prefix sum of them for the mask; never a tokens x tokens array. Means,
// dot products and masses are computed in double in a fixed order, one work
// item per query tile: results are bit-identical for any thread count.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "tilesplash/candidates.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"

namespace tilesplash {

// The row order a pooled selection's tiles are cut in (declared in
// candidates.h, whose MethodOptions::order names it).
enum class PooledOrder {
  // Both orders; with a density (equal densities) the one that keeps more
  // pooled mass, else (equal p) the one of lower density; frame-major on a
  // tie. Both are estimates from the pooled scores alone: the front door
  // compares the orders on its sampled rows instead
  // (pooled_order_selections(), pooled_ladder_selections()).
  kAuto,
  kFrame,  // frame-major: the original order
  kToken,  // token-major (RowOrder::token_major)
};

// "auto", "frame" or "token" (the CLI's --order, Python's order=); throws
// std::invalid_argument naming `order` otherwise.
PooledOrder parse_pooled_order(std::string_view name);
const char* pooled_order_name(PooledOrder order);

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
  // The row order the tiles are cut in. With sink, in token-major order
  // every video key tile holds a first-frame key, so the sink keeps them
  // all: kAuto then stays frame-major.
  PooledOrder order = PooledOrder::kAuto;
};

// Throws std::invalid_argument naming the bad field ("p", "floor", "gate",
// "gate_share", "density", "blocks").
void check_pooled_options(const PooledOptions& options);

// One head's kept tiles, as per-query-tile lists, over the run-order indices
// of `order` (query tile i holds run positions [i * block_q, ...), original
// rows order.source(r)).
struct PooledSelection {
  RowOrder order;  // identity: frame-major; else token-major
  std::int64_t tokens = 0;
  BlockSizes blocks;
  std::int64_t q_tiles = 0, kv_tiles = 0;
  std::vector<std::int64_t> row_offsets;  // q_tiles + 1
  std::vector<std::int32_t> kept;         // key tiles per query tile, ascending
  double p = 0.0;                         // the p the selection used
  std::int64_t kept_pairs = 0;            // token pairs of the kept tiles
  double density = 0.0;                   // kept_pairs / tokens^2
  double mass = 0.0;  // pooled mass kept, mean over query rows (what kAuto compares)
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

// The selections at every p of `ps` (options.density ignored) in the one
// order options.order names (kFrame or kToken; kAuto throws), cut from one
// ranking of the tiles: each equals pooled_select() at that p, at the cost
// of one. What pooled_ladder_selections() steps over.
std::vector<PooledSelection> pooled_select_ps(const VideoGeometry& geometry, const TensorView& q,
                                              const TensorView& k, std::int64_t head, double scale,
                                              const PooledOptions& options,
                                              std::span<const double> ps, int threads = 0,
                                              ThreadingContext* context = nullptr);

// The selection as a mask over tokens x tokens of run-order indices (the
// selection's order): (q, k) kept iff their tiles' pair is; classifies any
// rectangle in O(1) through a prefix sum of the kept tiles (O(tiles) memory).
Mask pooled_mask(const PooledSelection& selection);

// The same pairs over the original order: pooled_mask() itself for a
// frame-major selection, else that mask seen through the order (O(1) per
// pair, tiles classified by scanning).
Mask pooled_original_mask(const PooledSelection& selection);

// The plan of pooled_mask() over the selection's own blocks (run order): its
// tiles are the selection's, full, in ascending order per query tile.
TilePlan pooled_plan(const PooledSelection& selection);

// The rungs of p an error target steps a pooled head over, increasing:
// 0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 1.
std::span<const double> pooled_p_ladder();

// The selection at options' p or density in each order options.order
// allows: kAuto: frame-major, then token-major unless the sink or a single
// frame keeps it frame-major; kFrame or kToken: that one. What the front
// door scores on its sampled rows to choose the order (pooled_sampled_errors).
std::vector<PooledSelection> pooled_order_selections(const VideoGeometry& geometry,
                                                     const TensorView& q, const TensorView& k,
                                                     std::int64_t head, double scale,
                                                     const PooledOptions& options, int threads = 0,
                                                     ThreadingContext* context = nullptr);

// An error target's rungs: the selection at each p of pooled_p_ladder(), in
// each order as pooled_order_selections() (all of frame-major's rungs
// first); options.p and options.density are ignored.
std::vector<PooledSelection> pooled_ladder_selections(const VideoGeometry& geometry,
                                                      const TensorView& q, const TensorView& k,
                                                      std::int64_t head, double scale,
                                                      const PooledOptions& options, int threads = 0,
                                                      ThreadingContext* context = nullptr);

// Relative L2 errors over the sampled query `rows` (original order; each
// selection in its own order) of head
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
