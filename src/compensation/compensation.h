// Compensation of skipped tiles (Sol-Attn's pooled proxy, SVG-EAR's
// centroids): what a sparse plan skips is approximated instead of dropped.
// Every empty key tile t of a query tile, holding n_t keys with mean key k̄_t
// and mean value v̄_t, adds n_t * exp(scale * q . k̄_t) * v̄_t to the row's
// softmax numerator and n_t * exp(scale * q . k̄_t) to its denominator: the
// exact attention over the tile when its keys are all alike, a first-order
// proxy otherwise. The pass runs after the kernel and merges into its (out,
// lse) through the LSE, so the kernel itself is untouched:
//   1. pool_tiles(): K̄ and V̄ per key tile and head, O(N * (d + dv)) reads,
//      O(N / block_kv * (d + dv)) memory;
//   2. compensate(): per q-block, a small attention of its rows over the
//      skipped tiles' k̄ and v̄ merged into each row (TargetOps::pooled_merge,
//      register-tiled f32; TargetOps::pooled_merge_dot, the kernel's own bf16
//      micro-kernels, for bf16 inputs on the dot-product path). Work: rows x
//      skipped tiles x (d + dv), (1 - density) / (density * block_kv) of the
//      sparse kernel's: 7% at density 0.10 with 128-key tiles.
// Tiles are the plan's own (block_q x block_kv, in the order it runs), so a
// front door that permutes rows compensates in its run order. Items are
// (head, q-block), each summed in a fixed order: results are bit-identical
// for any thread count. A q-block with no skipped tile is left untouched, so
// a plan that skips nothing gives exactly the uncompensated bits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernel/forward_params.h"
#include "kernel/target_ops.h"
#include "tilesplash/plan.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"

namespace tilesplash::compensation {

// Keys the pooled means leave out: those at or past `limit` (padding a call
// never attends), and those of a second key segment (keys first + j * stride,
// j < count) that the front door attends exactly in its own plan (the
// first-frame sink), so they are never counted twice.
struct KeyFilter {
  std::int64_t limit = -1;  // < 0: every key of the call
  std::int64_t first = 0;
  std::int64_t count = 0;  // 0: no segment
  std::int64_t stride = 1;
  bool excluded(std::int64_t key) const;
};

// The pooled key tiles of one call, every head.
struct PooledTiles {
  std::int64_t heads = 0, tiles = 0, d = 0, dv = 0, block_kv = 0;
  // The rows of k and v each tile pools, in its key order: tile t's are
  // rows[row_start[t] .. row_start[t + 1]) (filter and sources resolved once,
  // not per head).
  std::vector<std::int64_t> rows, row_start;
  std::vector<float> keys;         // [heads][tiles][d]: mean key of each tile
  std::vector<float> values;       // [heads][tiles][dv]: mean value
  std::vector<std::int32_t> keep;  // tiles with at least one pooled key
  std::vector<float> log_count;    // [tiles]: log of its pooled keys (0 keys: unused)
};

// Means of k and v ([heads, kv_len, d | dv], any dtype and strides) over the
// keys of each block_kv tile that `filter` keeps; per tile in key order,
// eight keys at a time in f32 and those partial sums in double
// (TargetOps::sum_rows). The tiles are of run-order keys: key j is row sources[j] of k and
// v (empty sources: row j), so a router can pool a permuted run's tiles
// without permuting K and V.
void pool_tiles(ThreadingContext& context, int threads, const TensorView& k, const TensorView& v,
                std::int64_t block_kv, const KeyFilter& filter, PooledTiles& pooled,
                std::span<const std::int64_t> sources = {});

// pool_tiles() in two steps, for a caller that pools head by head (the
// router, beside its walk over each head's keys): prepare_pooled() sizes
// `pooled` and finds its tiles and their counts, pool_head() then pools every
// tile of head h on the calling thread (heads in any order, one thread per
// head at a time). The same bits as pool_tiles().
void prepare_pooled(const TensorView& k, const TensorView& v, std::int64_t block_kv,
                    const KeyFilter& filter, PooledTiles& pooled,
                    std::span<const std::int64_t> sources = {});
void pool_head(const TensorView& k, const TensorView& v, std::int64_t h, PooledTiles& pooled);

// The skipped pooled tiles of q-block qb of `plan`, ascending, into `skipped`
// (`visited`: scratch of plan.num_kv_blocks() bytes).
void skipped_tiles(const TilePlan& plan, std::int64_t qb, const PooledTiles& pooled,
                   std::vector<std::uint8_t>& visited, std::vector<std::int32_t>& skipped);

// One row q (d floats, f32) of head h: the tiles `skipped` of `pooled` merged
// into o (dv floats) and *lse in place. `scores`: scratch of skipped.size().
void compensate_row(const kernel::TargetOps& ops, const float* q, const PooledTiles& pooled,
                    std::int64_t h, std::span<const std::int32_t> skipped, float scale, float* o,
                    float* lse, float* scores);

// Merges the skipped tiles of `plan` (q_len x kv_len; pooled from the same
// keys with plan.blocks().block_kv) into out (f32 [heads, q_len, dv], any
// strides) and lse (heads * q_len) in place: every row of a q-block that
// skips at least one pooled tile. A row with no kept key and no such tile
// stays O = 0, LSE = -inf. Returns, per head, whether any row changed.
// `bf16_dot`: bf16 queries take the target's bf16 dot product
// (TargetOps::pooled_merge_dot, the means rounded to bf16) where it has one,
// as the kernel does when its product path resolves to it (ForwardParams::
// bf16_dot); otherwise everything runs in f32.
std::vector<bool> compensate(ThreadingContext& context, int threads, const TilePlan& plan,
                             const TensorView& q, const PooledTiles& pooled, float scale,
                             const MutableTensorView& out, float* lse, bool bf16_dot);

// Grow-only memory of compensated kernel calls.
struct Workspace {
  PooledTiles pooled;
  std::vector<float> out, lse;  // the kernel's f32 result when the caller's is not
};

// The kernel call of `params` (validated) with compensation: the kernel
// writes f32 rows and LSEs (the caller's when they are that, else the
// workspace's), compensate() merges the skipped tiles, and the result is
// stored in the caller's dtype with the kernel's own rounding. Every key of
// the call is pooled.
void compensated_forward(const kernel::ForwardParams& params, kernel::ForwardFn forward,
                         kernel::Workspace& kernel_workspace, Workspace& workspace,
                         ThreadingContext& context);

}  // namespace tilesplash::compensation
