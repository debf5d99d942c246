// What a mask runs as, for the callers that show plans or pick tile sizes.
// A temporal video mask means the temporal mask on the original frame-major
// order, but it never runs in that order: Q, K and V are permuted to
// token-major order, where it is the band that spatial heads share, and the
// first-frame sink runs as its own key segment (video.h, video_run_masks).
// A sliding-tile (sta) mask likewise runs, and is planned, in tile-major
// order (sta.h), and a radial mask adds the density of the paper's block vote.
// plan_mask() therefore plans the mask that runs and describes the substitution, and
// plan_fields() lists what `tilesplash plan --json` prints and Python's
// TilePlan.stats() returns, so the two cannot drift apart. For tile sizes,
// the band plan is what every routed head of a layer runs, so it is the mask
// the tuner times for a model preset and the one choose_blocks() is asked
// about for a VideoAttention.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tilesplash/fields.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tilesplash/plan_cache.h"
#include "tilesplash/tensor.h"
#include "tilesplash/tuning.h"
#include "tilesplash/video.h"

namespace tilesplash {

// How a temporal video mask's plan differs from the mask as given.
struct TemporalRun {
  TokenOrder order = TokenOrder::kTokenMajor;
  Mask band;                         // planned instead of the mask
  std::optional<PlanStats> sink;     // the sink segment's plan, tokens x P
  std::int64_t sink_kv_len = 0;      // P
  std::int64_t mask_kept_pairs = 0;  // of the temporal mask itself
  double mask_density = 0.0;
};

// How a sliding-tile mask's plan differs: it runs in tile-major order, where
// every key tile is one run of keys.
struct TileMajorRun {
  std::string order;                 // the row order's name, "tile-major"
  Mask run_mask;                     // planned instead of the mask (run-order indices)
  std::int64_t mask_kept_pairs = 0;  // of the sta mask itself (equal to the plan's)
  double mask_density = 0.0;
};

struct MaskPlan {
  Mask mask;                                       // as given
  std::shared_ptr<const TilePlan> plan = nullptr;  // what the kernel runs
  std::optional<TemporalRun> temporal = {};        // set when `plan` is a temporal mask's band
  std::optional<TileMajorRun> sta = {};  // set when `plan` is an sta mask's tile-major mask
  std::optional<double> block_vote_density = {};  // radial: the paper's block vote (radial.h)
  // The geometry of a video mask whose plan is in frame-major order (frames
  // can be marked on a picture of it); unset for permuted plans.
  std::optional<VideoGeometry> frame_geometry = {};
  // The mask family's own fields, after the common ones in plan_fields().
  Fields fields = {};
};

// The plan of `mask`; of its token-major band for a temporal video mask, of
// its tile-major mask for an sta mask (both need q_len == kv_len == their
// token count; std::invalid_argument otherwise). From `plans` when given,
// else built here.
MaskPlan plan_mask(const Mask& mask, std::int64_t q_len, std::int64_t kv_len, BlockSizes blocks,
                   PlanCache* plans = nullptr);

// In order: mask, q_len, kv_len, block_q, block_kv, q_blocks, kv_blocks, full,
// partial, empty, distinct_partial, kept_pairs, density, plan_bytes,
// build_seconds; for a temporal mask also plan_order, plan_note, plan_mask,
// sink_kv_len, sink_full, sink_partial, sink_empty, sink_distinct_partial,
// sink_kept_pairs (with the sink), mask_kept_pairs and mask_density; for an
// sta mask plan_order, plan_note, plan_mask, mask_kept_pairs and
// mask_density; for a radial mask block_vote_density.
Fields plan_fields(const MaskPlan& plan);

// The band plan every routed head runs: video_run_masks(spatial, ...).band.
Mask video_band_mask(const VideoGeometry& geometry, std::int64_t band,
                     const VideoMaskOptions& options);

// A model preset at a target density, as the tuner times it: the spatial
// band (text rows and columns kept where the model has text) over all tokens.
struct PresetBand {
  Mask mask;
  std::int64_t band = 0;
  std::int64_t tokens = 0;
};
PresetBand preset_band(const VideoPreset& preset, double density);

// Tiles for a VideoAttention on this geometry: cached_block_choice() of its
// band plan (batched_attention.h), so `tilesplash tune --preset` results apply.
BlockChoice choose_video_blocks(const VideoGeometry& geometry, std::int64_t band,
                                const VideoMaskOptions& options, std::int64_t head_dim, DType dtype,
                                int threads);

}  // namespace tilesplash
