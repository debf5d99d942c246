// Sparse VideoGen's online routing and the one front door for video attention.
// VideoAttention takes Q, K and V of every head of one layer in the original
// (frame-major) token order, plus the layer and denoising-step indices, and
// returns the attention output (and LSE) with a report per head. Each head
// runs dense (warm-up layers and steps) or one of a list of named candidate
// masks (candidates.h); the router picks per head by sampling a few video
// query rows, computing their exact attention under the dense mask and every
// candidate, and keeping the candidate whose output is closest to dense
// (smallest MSE over the sampled rows and channels), optionally among those
// within a density budget; with an error target, the least dense candidate
// whose sampled error meets it (decide_route(), the one rule every front
// door calls).
// The default list is Sparse VideoGen's spatial and temporal pair on one band.
// Each candidate runs in its own row order (temporal heads token-major, STA
// tile-major) with Q/K/V permuted in and the output permuted back, plus the
// sink as its own key segment merged through the LSEs. With cluster options
// set, heads run Sparse VideoGen 2's semantic clusters instead (clusters.h):
// a per-head k-means of Q and K, warm-started from the previous call for the
// same layer, and a plan built per head and step. Either way the output
// equals masked attention with each head's mask applied on the original order.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tilesplash/attention.h"
#include "tilesplash/candidates.h"
#include "tilesplash/clusters.h"
#include "tilesplash/fields.h"
#include "tilesplash/plan.h"
#include "tilesplash/pooled.h"
#include "tilesplash/threading.h"
#include "tilesplash/tile_granular.h"
#include "tilesplash/video.h"

namespace tilesplash {

// The name of the mask a head runs: "dense", a candidate's name ("spatial",
// "temporal", "radial", "sta:3x3x3", ...) or "svg2". The constants name dense
// and the Sparse VideoGen pair, which every front door knows.
class HeadMask {
 public:
  HeadMask() = default;  // dense
  explicit HeadMask(std::string name) : name_(std::move(name)) {}
  static const HeadMask kDense;
  static const HeadMask kSpatial;
  static const HeadMask kTemporal;
  const std::string& name() const { return name_; }
  friend bool operator==(const HeadMask&, const HeadMask&) = default;

 private:
  std::string name_ = "dense";
};
inline const HeadMask HeadMask::kDense{"dense"};
inline const HeadMask HeadMask::kSpatial{"spatial"};
inline const HeadMask HeadMask::kTemporal{"temporal"};
inline std::string_view to_string(const HeadMask& mask) { return mask.name(); }

// Dense attention for layers [0, dense_layers) and steps [0, dense_steps):
// Sparse VideoGen keeps the first layer(s) and the first 10-20% of the
// denoising steps dense. Indices come from the caller.
// The decision lives in the library once (route_policy.cc): every front door
// (C++, the flex backend, JAX) asks it instead of writing the rule again.
struct WarmupPolicy {
  std::int64_t dense_layers = 0;
  std::int64_t dense_steps = 0;
  bool is_dense(std::int64_t layer, std::int64_t step) const;
};

// The routing rule, the one every front door applies to its table of
// sampled scores (route_policy.cc). The sampled error of a candidate is the
// relative L2 of the sampled output rows against dense,
//   error = ||O_c - O_dense||_2 / ||O_dense||_2 over the sampled rows and channels
//         = sqrt(mse / power), power = mean of O_dense^2,
// so that it does not depend on the scale of V. The rule:
//   - allowed: the candidates of density <= density_budget (all when unset;
//     the least dense one alone when none is);
//   - without an error target: the allowed candidate of smallest MSE, the
//     first on a tie (Sparse VideoGen);
//   - with one: the least dense allowed candidate whose error is <= error
//     (smaller error, then the first, on a density tie); when none meets it,
//     the allowed candidate of smallest error, and target_met is false.
struct RoutePolicy {
  std::optional<double> density_budget;  // in (0, 1]
  std::optional<double> error;           // > 0
};

struct RouteChoice {
  std::size_t index = 0;   // into the candidates
  bool target_met = true;  // false: an error target no allowed candidate met
};

// sqrt(mse / power); 0 when both are 0, +inf when only power is.
double sampled_error(double mse, double power);

// One head's choice; densities and mse have one entry per candidate
// (at least one). Throws std::invalid_argument on mismatched sizes.
RouteChoice decide_route(std::span<const double> densities, std::span<const double> mse,
                         double power, const RoutePolicy& policy);

// Test-only: with true, the rule and the warm-up decision are inverted
// (the allowed candidate of largest error wins; dense iff the warm-up says
// sparse), so a test can prove that every front door follows the library's
// decision rather than a copy of it. Process-wide; false restores them.
void set_policy_inverted_for_tests(bool inverted);

// The default density ladder of an error target: 5%, 10%, 15%, 25%, 40%.
std::span<const double> default_density_ladder();
// Throws std::invalid_argument naming `who` unless `densities` is non-empty,
// strictly increasing and inside (0, 1].
void check_density_ladder(std::span<const double> densities, const std::string& who);
// Throws std::invalid_argument naming `who` unless error is > 0 and finite.
void check_error_target(double error, const std::string& who);

// The query rows the router samples per layer call when RouterOptions::samples
// is 0 (the default): one per 1,024 video tokens, at least 16 and at most 64
// (all of them when there are fewer than 16). Routing costs about r * N per
// candidate and head, the attention it steers density * N^2, so a fixed r
// weighs as 1/N: 64 rows were 4% of a 720p layer but 45% of one of 3,072
// tokens (bench/error_target.py, docs/masks.md). 64 from 65,536 video tokens
// up (Wan 720p as before), 31 at Wan 480p, 16 below 17,408 tokens.
std::int64_t default_router_samples(std::int64_t video_tokens);

struct RouterOptions {
  // Query rows per layer call, among the video tokens: >= 1, or 0 for
  // default_router_samples() of the geometry (VideoAttention::options()
  // then reports the count in use).
  std::int64_t samples = 0;
  std::uint64_t seed = 0;  // rows are drawn from (seed, layer, step), shared by the heads
};

struct VideoAttentionOptions {
  // The heads' choices; names must be unique and not "dense". Empty: the
  // candidates of the registry's default method (default_method(), Sparse
  // VideoGen's spatial and temporal pair) on the band below.
  std::vector<MaskCandidate> candidates;
  // The band half-width W in tokens of the default candidates; when unset,
  // the band whose spatial and temporal masks (sink and text areas included)
  // average closest to density.
  std::optional<std::int64_t> band;
  double density = 0.25;  // in (0, 1]; used only without band
  bool sink = false;      // OR the first-frame sink into both default masks
  bool text_full = true;  // text rows and columns attend everything (no effect without text)
  // Route only among candidates of density <= budget (the least dense one
  // when none is); unset: every candidate.
  std::optional<double> density_budget;
  // An error target (RoutePolicy): each routed head runs the least dense
  // candidate whose sampled relative L2 error against dense is <= error.
  // With empty candidates, they become the default method's candidates at
  // every density of the ladder below (ladder_candidates()).
  std::optional<double> error;
  // The ladder of the default candidates with an error target; empty:
  // default_density_ladder(). Only with error.
  std::vector<double> densities;
  WarmupPolicy warmup;
  RouterOptions router;
  // Every head runs this mask, no routing (benchmarks): dense, a candidate,
  // or svg2 with clusters set.
  std::optional<HeadMask> force;
  // Sparse VideoGen 2: every head past the warm-up runs its own semantic
  // clusters (clusters.h) instead of a candidate; exclusive with candidates.
  std::optional<ClusterOptions> clusters;
  // Pooled scores (pooled.h): every head past the warm-up keeps the key
  // tiles its own pooled Q and K rank to the options' p or density;
  // exclusive with clusters. Beside candidates (a mix with pooled among its
  // families), each routed head's selection is one more choice the router
  // scores on the head's own sampled rows (pooled_sampled_errors, drop-only)
  // and runs when the rule picks it; choice and family "pooled". Its tiles are options.pooled's
  // blocks, whatever `blocks` says; with an error target each head takes
  // the smallest p of pooled_p_ladder() that meets it on the sampled rows.
  std::optional<PooledOptions> pooled;
  BlockSizes blocks;  // tiles of the band, sink and dense plans
  // kTile: every mask a head runs (band, sink segment, svg2 clusters) is
  // rounded out to whole tiles of `blocks` in the order it runs
  // (tile_granular.h), so the kernel visits full tiles only; key padding
  // stays exact, and the router still scores the token-exact masks.
  Granularity granularity = Granularity::kToken;
  int threads = 0;             // 0: the context's threads() (all hardware threads by default)
  std::optional<float> scale;  // default 1 / sqrt(head_dim)
  bool check_finite = true;    // reject NaN / Inf in Q, K, V
  // Of every kernel call (Precision, attention_args.h): kInt8 runs Q.K^T in
  // 8 bits, the router's sampled rows included.
  Precision precision = Precision::kDefault;
  // Skipped tiles approximated instead of dropped (AttentionOptions::
  // compensate): every empty tile of a sparse head's plan, in the order and
  // tiles it runs, adds its keys' mean key and value; keys of the sink
  // segment (attended exactly) and padded keys are left out of the means.
  // With an error target the router scores the compensated outputs, so heads
  // whose skipped part is well approximated get lower densities.
  bool compensate = false;
};

struct HeadReport {
  std::int64_t head = 0;
  HeadMask choice = HeadMask::kDense;
  // What the choice is, as fields (never parsed from its name): the
  // registered mask family of the mask the head ran ("spatial" for
  // "spatial@0.05", "sta" for "sta:3x3x3@0.1"; "dense"; the cluster choice,
  // "svg2"; a candidate of no registered family: its MaskCandidate::family,
  // else its name) and its rung, the ladder density of an error target's
  // candidate (MaskCandidate::rung), or a pooled head's p with an error
  // target (0 for any other choice).
  std::string family = "dense";
  double rung = 0.0;
  // The row order its Q rows ran in (RowOrder::name(): "original" for dense
  // and frame-major heads, "token-major" for temporal heads and pooled heads
  // whose selection was cheaper token-major, ...).
  std::string order = "original";
  bool routed = false;  // false for warm-up or forced heads
  // Sampled MSE against dense of every candidate, in VideoAttention::
  // candidates() order; empty when not routed.
  std::vector<double> mse;
  double mse_spatial = 0.0;   // mse of the candidate named "spatial"; NaN when none or not routed
  double mse_temporal = 0.0;  // likewise for "temporal"
  double error = 0.0;         // sampled relative L2 error of the choice (RoutePolicy); NaN unrouted
  bool target_met = true;     // false: no candidate met options.error (the lowest error ran)
  double density = 1.0;       // of the mask the head ran with, over tokens x tokens
  // Pairs inside the tiles the kernel visited (full and partial, every key
  // segment) over tokens x tokens: the kernel's work against dense's.
  double tiles_visited = 1.0;
  double seconds = 0.0;          // this head's attention: permutation, kernel calls, merge
  double permute_seconds = 0.0;  // of which permutation (heads run in another order)
  double cluster_seconds = 0.0;  // svg2: of which k-means and the choice of cluster pairs
  double plan_seconds = 0.0;     // svg2: of which this head's plan (masks, orders, tiles)
  // Its plan skipped tiles and their pooled keys were added (options.compensate).
  bool compensated = false;
  double compensation_seconds = 0.0;  // of `seconds`: pooling K, V and the compensation pass
};

struct LayerReport {
  std::vector<HeadReport> heads;
  std::int64_t band = 0;
  bool warmup = false;             // the warm-up policy made every head dense
  double routing_seconds = 0.0;    // sampling, the router's kernel call and the MSEs
  double plan_seconds = 0.0;       // plans built in this call (0 once cached; svg2: every call)
  double cluster_seconds = 0.0;    // svg2: k-means and pair choice, sum over heads
  double permute_seconds = 0.0;    // sum over heads
  double attention_seconds = 0.0;  // sum over heads
  double total_seconds = 0.0;
};

// MSEs of the sampled rows' outputs under every candidate against dense.
struct RouteDecision {
  HeadMask choice;         // decide_route()'s choice
  std::size_t index = 0;   // of the choice in VideoAttention::candidates()
  bool target_met = true;  // decide_route()'s
  // Per candidate, then (options.pooled beside candidates) per pooled
  // selection the head was scored on: its one selection, or every rung of
  // pooled_p_ladder() with an error target; index may point past the
  // candidates there, and choice is then the pooled choice.
  std::vector<double> mse;
  std::vector<double> error;  // likewise: sampled_error(mse, power of the dense rows)
  double mse_spatial = 0.0;   // of "spatial"; NaN when there is none
  double mse_temporal = 0.0;  // of "temporal"; NaN when there is none
};

// Every registered method (methods.h) a front door runs by name:
// method_names() (candidate lists, routed per head) and "svg2" (semantic
// clusters per head).
std::span<const std::string_view> attention_method_names();

// An error target as a front end takes it (error=, --error): each routed
// head runs the least dense candidate whose sampled relative L2 error
// against dense is <= error, among the method's candidates at every density
// of the ladder.
struct ErrorTarget {
  double error = 0.0;  // > 0 and finite
  // The ladder, strictly increasing in (0, 1]; nullopt: default_density_ladder().
  std::optional<std::vector<double>> densities;
};

// The front-door options of a registered method, matched to
// options.density: candidates = the entry's candidates (method_candidates();
// a method whose heads share a band, svg, builds them on options.band when
// given, else on the band that meets the density), or clusters for a
// data-driven method (svg2: default_cluster_options(geometry), the top_p
// that meets the density per head, min_kc_ratio at most density / 2 so that
// the floor leaves it room). With an error target: error set and
// candidates = ladder_candidates(method, ...) on its ladder (the one setup
// of the CLI's --error and Python's error=; no band, no data-driven
// method). Pooled options (pooled: instead of candidates; mix with it in
// options.families: beside them) come from options.density or p, floor and
// gate. options.band with a method that takes none is an error ("band:
// ..."), and so are p, floor or gate where no head ranks pooled tiles
// ("p: ..."), families with a method that routes none ("families: ...") and
// p with an error target. The rest (warm-up, router, blocks, threads) stays default for the
// caller to set. Throws std::invalid_argument naming the valid methods.
VideoAttentionOptions method_attention_options(
    std::string_view method, const VideoGeometry& geometry, const MethodOptions& options = {},
    const std::optional<ErrorTarget>& error = std::nullopt);

// The candidates of `method` (method_candidates(), options.band left out:
// each rung on the band of its density) at every density of the
// ladder, named "<name>@<density>" ("spatial@0.05", "sta:3x3x3@0.1"), in
// ladder order: what an error target routes among. options.density is
// ignored; the ladder is checked (check_density_ladder). Throws
// std::invalid_argument for svg2 (clusters, no candidate list); empty for
// pooled, whose heads step over p themselves (VideoAttentionOptions::pooled).
std::vector<MaskCandidate> ladder_candidates(std::string_view method, const VideoGeometry& geometry,
                                             const MethodOptions& options,
                                             std::span<const double> densities);

// "<name>@<density>": a ladder candidate's name, the density in the shortest
// %g form (6 significant digits or more) that reads back as the same double,
// so distinct densities give distinct names ("spatial@0.1", "spatial@0.1000001").
std::string ladder_name(std::string_view name, double density);

// One head's report as named values, the one serialisation every front end
// uses (the CLI's route, demo, attend and compare, the Python report dict):
// head, choice, routed, mse ({candidate name: sampled MSE} in `candidates`
// order, empty when not routed), mse_spatial and mse_temporal (of the
// candidates so named; NaN when there is none or the head was not routed:
// kept for callers of the Sparse VideoGen pair), error (the choice's
// sampled relative L2 error; NaN when not routed), target_met, density, tiles_visited,
// seconds, permute_seconds, cluster_seconds, plan_seconds.
Fields head_fields(const HeadReport& head, std::span<const MaskCandidate> candidates);

// The names options.force may take: "dense" and the masks these options'
// heads run (the candidates' names; the default method's mask names, at
// every rung with an error target, without candidates; the cluster choice
// with clusters). The front door rejects any
// other name. With pooled options beside candidates, the pooled choice
// and the candidates' names.
std::vector<std::string> force_names(const VideoAttentionOptions& options);

// Owns its kernel runner, plan cache and scratch buffers, and runs everything
// (kernel, permutations, merges, k-means) on one ThreadingContext: its own, or
// one it shares. One object serves one call at a time and is meant to live
// across layers and steps, so plans are built once; for calls side by side,
// one object per calling thread, each with its own context.
class VideoAttention {
 public:
  // context: shared with whoever else holds it (kept alive by this object);
  // null: a private one of hardware_threads() threads. options.threads 0 uses
  // the context's threads(). Throws std::invalid_argument on an invalid
  // geometry or options.
  explicit VideoAttention(const VideoGeometry& geometry, VideoAttentionOptions options = {},
                          std::shared_ptr<ThreadingContext> context = nullptr);
  ~VideoAttention();
  VideoAttention(const VideoAttention&) = delete;
  VideoAttention& operator=(const VideoAttention&) = delete;

  const VideoGeometry& geometry() const;
  const VideoAttentionOptions& options() const;
  std::int64_t band() const;  // W of the default candidates, from options.band or options.density
  // options.candidates, or the default spatial and temporal pair.
  const std::vector<MaskCandidate>& candidates() const;
  // The family a head that ran candidates()[index] reports (HeadReport::family),
  // for a backend that reports its own heads. Throws std::out_of_range.
  const std::string& candidate_family(std::size_t index) const;
  const std::shared_ptr<ThreadingContext>& context() const;
  // The mask a head with this choice ran, on the original order. Throws
  // std::invalid_argument for a name that is neither dense nor a candidate.
  Mask mask(const HeadMask& choice) const;
  // The cluster mask head `head` ran in the last forward() (svg2 only), on
  // the original order (under granularity kTile, rounded out as it ran: to
  // whole tiles of the run order); it classifies by scanning, for checks.
  Mask head_mask(std::int64_t head) const;
  // Forget the clusters of earlier calls (a new video): the next call
  // clusters every head from scratch.
  void reset_clusters();

  // args: q, k [heads, tokens, d], v [heads, tokens, dv], out [heads, tokens,
  // dv] (f32 or the input dtype), lse (heads * tokens floats) or null; all in
  // the original order, any strides (AttentionArgs rules). Throws
  // std::invalid_argument naming the argument on a mismatch.
  // key_limit: keys [key_limit, tokens) are padding (a prompt shorter than
  // its text slots): every head's mask, dense included, is ANDed with
  // Mask::key_range(0, key_limit), so no query keeps them and no plan visits
  // their tiles; padded queries attend the real keys like any other row.
  // Only trailing text can be padding: with text after the video,
  // key_limit in [video_range().end, tokens()]; otherwise tokens(). Unset:
  // no padding. The router scores its samples under the same limit.
  LayerReport forward(const AttentionArgs& args, std::int64_t layer = 0, std::int64_t step = 0,
                      std::optional<std::int64_t> key_limit = std::nullopt);

  // The query rows the router samples at this layer and step (sorted video
  // token indices, the same for every head): what a router on another
  // backend must sample to make the same decisions.
  std::vector<std::int64_t> sampled_rows(std::int64_t layer, std::int64_t step) const;

  // The router alone: one decision per head of q, k, v (same rules as forward).
  std::vector<RouteDecision> route(const TensorView& q, const TensorView& k, const TensorView& v,
                                   std::int64_t layer = 0, std::int64_t step = 0,
                                   std::optional<std::int64_t> key_limit = std::nullopt);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tilesplash
