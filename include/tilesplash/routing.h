// Sparse VideoGen's online routing and the one front door for video attention.
// VideoAttention takes Q, K and V of every head of one layer in the original
// (frame-major) token order, plus the layer and denoising-step indices, and
// returns the attention output (and LSE) with a report per head. Each head
// runs dense (warm-up layers and steps), spatial or temporal; the router picks
// between the last two by sampling a few video query rows, computing their
// exact attention under the dense, spatial and temporal masks, and keeping the
// mask whose output is closer to dense (DESIGN §6). Spatial heads run as they
// are; temporal heads are permuted to token-major order and back, so both
// kinds execute one shared band plan, and the sink runs as its own key
// segment merged through the LSEs. The output equals masked attention with
// each head's chosen mask applied on the original order.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "tilesplash/attention.h"
#include "tilesplash/plan.h"
#include "tilesplash/video.h"

namespace tilesplash {

enum class HeadMask : std::uint8_t { kDense, kSpatial, kTemporal };
std::string_view to_string(HeadMask mask);  // "dense", "spatial", "temporal"

// Dense attention for layers [0, dense_layers) and steps [0, dense_steps):
// Sparse VideoGen keeps the first layer(s) and the first 10-20% of the
// denoising steps dense. Indices come from the caller.
struct WarmupPolicy {
  std::int64_t dense_layers = 0;
  std::int64_t dense_steps = 0;
  bool is_dense(std::int64_t layer, std::int64_t step) const {
    return layer < dense_layers || step < dense_steps;
  }
};

struct RouterOptions {
  std::int64_t samples = 64;  // query rows per layer call, among the video tokens (>= 1)
  std::uint64_t seed = 0;     // rows are drawn from (seed, layer, step), shared by the heads
};

struct VideoAttentionOptions {
  // The band half-width W in tokens; when unset, the band whose spatial and
  // temporal masks (sink and text areas included) average closest to density.
  std::optional<std::int64_t> band;
  double density = 0.25;  // in (0, 1]; used only without band
  bool sink = false;      // OR the first-frame sink into both masks
  bool text_full = true;  // text rows and columns attend everything (no effect without text)
  WarmupPolicy warmup;
  RouterOptions router;
  std::optional<HeadMask> force;  // every head runs this mask, no routing (benchmarks)
  BlockSizes blocks;              // tiles of the band, sink and dense plans
  int threads = 0;                // 0: all hardware threads
  std::optional<float> scale;     // default 1 / sqrt(head_dim)
  bool check_finite = true;       // reject NaN / Inf in Q, K, V
};

struct HeadReport {
  std::int64_t head = 0;
  HeadMask choice = HeadMask::kDense;
  bool routed = false;           // false for warm-up or forced heads
  double mse_spatial = 0.0;      // NaN when not routed
  double mse_temporal = 0.0;     // NaN when not routed
  double density = 1.0;          // of the mask the head ran with, over tokens x tokens
  double seconds = 0.0;          // this head's attention: permutation, kernel calls, merge
  double permute_seconds = 0.0;  // of which permutation (temporal heads only)
};

struct LayerReport {
  std::vector<HeadReport> heads;
  std::int64_t band = 0;
  bool warmup = false;             // the warm-up policy made every head dense
  double routing_seconds = 0.0;    // sampling, the router's kernel call and the MSEs
  double plan_seconds = 0.0;       // plans built in this call (0 once cached)
  double permute_seconds = 0.0;    // sum over heads
  double attention_seconds = 0.0;  // sum over heads
  double total_seconds = 0.0;
};

// MSEs of the sampled rows' spatial and temporal outputs against dense.
struct RouteDecision {
  HeadMask choice = HeadMask::kSpatial;  // the smaller MSE; spatial on a tie
  double mse_spatial = 0.0;
  double mse_temporal = 0.0;
};

// Owns its kernel runner, thread pool, plan cache and scratch buffers: one
// object serves one call at a time and is meant to live across layers and
// steps, so plans are built once.
class VideoAttention {
 public:
  // Throws std::invalid_argument on an invalid geometry or options.
  explicit VideoAttention(const VideoGeometry& geometry, VideoAttentionOptions options = {});
  ~VideoAttention();
  VideoAttention(const VideoAttention&) = delete;
  VideoAttention& operator=(const VideoAttention&) = delete;

  const VideoGeometry& geometry() const;
  const VideoAttentionOptions& options() const;
  std::int64_t band() const;  // W, resolved from options.band or options.density
  // The mask a head with this choice runs, on the original order.
  Mask mask(HeadMask choice) const;

  // args: q, k [heads, tokens, d], v [heads, tokens, dv], out [heads, tokens,
  // dv] (f32 or the input dtype), lse (heads * tokens floats) or null; all in
  // the original order, any strides (AttentionArgs rules). Throws
  // std::invalid_argument naming the argument on a mismatch.
  LayerReport forward(const AttentionArgs& args, std::int64_t layer = 0, std::int64_t step = 0);

  // The router alone: one decision per head of q, k, v (same rules as forward).
  std::vector<RouteDecision> route(const TensorView& q, const TensorView& k, const TensorView& v,
                                   std::int64_t layer = 0, std::int64_t step = 0);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tilesplash
