// VideoAttention's state, shared by the files that implement it:
// video_attention.cc (options, routing, the layer loop) and head_runs.cc (how
// one head runs: dense, a candidate in its own order, or semantic clusters).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compensation/compensation.h"
#include "methods/registry.h"
#include "routing/router.h"
#include "tilesplash/clusters.h"
#include "tilesplash/mask.h"
#include "tilesplash/methods.h"
#include "tilesplash/plan_cache.h"
#include "tilesplash/routing.h"
#include "tilesplash/threading.h"

namespace tilesplash {
namespace detail {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

[[noreturn]] void front_door_fail(const std::string& message);

// The name heads running semantic clusters report.
inline const HeadMask kClusterChoice{std::string(cluster_choice())};
// The name heads ranking their own pooled key tiles report: the choice of
// the registry's method with pooled options.
inline const HeadMask kPooledChoice{[] {
  for (const MethodEntry* method : method_registry()) {
    if (method->info.data_driven && method->pooled != nullptr) {
      return std::string(method->info.choice);
    }
  }
  return std::string();
}()};

// Keys [limit, tokens) of one call are padding; `mask` is
// Mask::key_range(0, limit), ANDed into every mask the call runs.
struct KeyPadding {
  std::int64_t limit = 0;
  Mask mask;
};

}  // namespace detail

struct VideoAttention::Impl {
  Impl(const VideoGeometry& g, VideoAttentionOptions o, std::shared_ptr<ThreadingContext> c);

  std::vector<MaskCandidate> make_candidates() const;
  // The candidate of this name; throws naming the valid ones.
  const MaskCandidate& find(const HeadMask& choice) const;
  AttentionOptions attention_options(bool check_finite) const;
  void check_args(const TensorView& q, const TensorView& k, const TensorView& v) const;
  // The key padding of a call: nullopt when no key is padded, else the mask
  // Mask::key_range(0, limit); throws unless only trailing text is padded.
  std::optional<detail::KeyPadding> key_padding(std::optional<std::int64_t> key_limit) const;

  std::vector<RouteDecision> route(const TensorView& q, const TensorView& k, const TensorView& v,
                                   std::int64_t layer, std::int64_t step,
                                   const std::optional<detail::KeyPadding>& keys);
  // One head: dense, a candidate, or (choice "svg2") its clusters; `keys`
  // (key_padding()) ANDed into whatever it runs.
  HeadReport run_head(const AttentionArgs& args, std::int64_t h, const HeadMask& choice,
                      std::int64_t layer, const std::optional<detail::KeyPadding>& keys,
                      double* plan_seconds);
  void run_clusters(const AttentionArgs& args, const AttentionArgs& head, std::int64_t h,
                    std::int64_t layer, const std::optional<detail::KeyPadding>& keys,
                    HeadReport& report);
  // Pooled scores (options.pooled): the head's own kept tiles, run in their
  // row order (frame- or token-major) as a candidate runs in its own. With
  // an error target, the sparsest (order, p) of pooled_ladder_selections()
  // that meets options.error on `sampled`; else, with PooledOrder::kAuto,
  // the order of lower error on `sampled` at the density or p.
  void run_pooled(const AttentionArgs& args, const AttentionArgs& head, std::int64_t h,
                  const std::optional<detail::KeyPadding>& keys, HeadReport& report);
  // One routed head's decision among the shared candidates' MSEs and its own
  // pooled selection (options.pooled beside candidates: a mix with pooled
  // among its families): the selection at options.pooled in each row order
  // it allows, or with an error target every rung of
  // pooled_ladder_selections(), scored on the sampled rows
  // (pooled_sampled_errors, drop-only) into MSEs at the router's `power`,
  // then the one rule (decide_route) over the candidates and the rungs.
  // A chosen selection is kept in routed_pooled[h] for run_pooled.
  RouteDecision decide_with_pooled(const TensorView& q, const TensorView& k, const TensorView& v,
                                   std::int64_t h, const std::vector<std::int64_t>& rows,
                                   const std::optional<detail::KeyPadding>& keys,
                                   std::vector<double> mse, double power,
                                   const RoutePolicy& policy);
  // The plan `candidate` runs with: its run mask at options.granularity, the
  // key padding ANDed in (cached).
  const TilePlan& candidate_plan(const MaskCandidate& candidate,
                                 const std::optional<detail::KeyPadding>& keys,
                                 double* plan_seconds);
  // Every candidate's compensation term on the sampled rows (options.compensate).
  detail::CompensationTerms compensation_terms(const TensorView& q, const TensorView& k,
                                               const TensorView& v,
                                               const std::vector<std::int64_t>& rows,
                                               const std::optional<detail::KeyPadding>& keys);
  // Runs `run` with `plan` over its mask (the extra segment's plan cached);
  // with options.compensate, the plan's skipped tiles are added, their means
  // taken over keys below `key_limit` (< 0: all) outside the extra segment.
  // Returns the pairs the head kept over tokens^2 as the tile granularity
  // reports them: the tiles the plan visits, plus the extra segment's own
  // kept pairs (never the band's pairs its partial tiles skip).
  double run_sparse(const AttentionArgs& head, const MaskRun& run, const TilePlan& plan,
                    HeadReport& report, double* plan_seconds, std::int64_t key_limit);
  // Adds the plan's skipped tiles to `band` (the band's f32 output and LSE,
  // in run order) through their pooled keys and values (run_sparse's part).
  void compensate_band(const MaskRun& run, const TilePlan& plan, const AttentionArgs& band,
                       std::int64_t key_limit, HeadReport& report);
  // `mask` rounded out to whole `blocks` tiles of q_len x kv_len when
  // options.granularity is kTile, else `mask` (tile_granular.h).
  Mask at_granularity(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                      BlockSizes blocks) const;
  // run.mask & keys.mask, after checking that the run's key order leaves
  // the padded keys where they are (every order keeps trailing text in place).
  Mask padded_run_mask(const MaskRun& run, const detail::KeyPadding& keys) const;
  TensorView permuted(const TensorView& src, const RowOrder& order,
                      std::vector<unsigned char>& buffer);

  VideoGeometry geometry;
  VideoAttentionOptions options;
  VideoMaskOptions mask_options;
  std::int64_t band;
  std::vector<MaskCandidate> candidates;
  std::vector<Mask> candidate_masks;  // what the router scores, in candidates order
  // Each candidate's mask family (HeadReport::family), in candidates order.
  std::vector<std::string> candidate_families;
  // The runner, the permutations, the merges and k-means all run here.
  std::shared_ptr<ThreadingContext> context;
  int threads;                                // options.threads resolved against the context
  std::unique_ptr<AttentionBackend> backend;  // make_backend("cpu", context)
  // Unbounded (capacity 0): it never evicts, so a plan it hands out lives
  // as long as the front door.
  PlanCache plans{0};
  detail::Router router;
  std::vector<unsigned char> q_perm, k_perm, v_perm;          // one head, run order, input dtype
  std::vector<float> band_out, band_lse, sink_out, sink_lse;  // one head, run order
  compensation::PooledTiles pooled;                           // one head, run order
  // Semantic clusters: the last centroids per (layer, head), and the masks
  // the heads of the last call ran (on the original order).
  std::map<std::pair<std::int64_t, std::int64_t>, HeadClusters> warm;
  std::vector<std::optional<Mask>> head_masks;
  // Pooled heads with an error target or choosing their row order: the
  // sampled rows of this call.
  std::vector<std::int64_t> sampled;
  // Routed heads that chose their own pooled selection in this call, by head.
  std::vector<std::optional<PooledSelection>> routed_pooled;
};

}  // namespace tilesplash
