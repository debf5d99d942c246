// Online routing (Sparse VideoGen: sampled query rows scored against dense,
// the smallest MSE wins) on the kernel itself: the sampled query rows are
// stacked once per section (dense, then every candidate) into one short
// query block and run in a single kernel call against all keys, so K and V
// are packed once and every output comes at the kernel's speed. Cost is about
// (1 + sum of the candidates' row costs) * r / N of a dense head: a mask that
// is strided on the original order (temporal, sta) touches most key tiles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "routing/compensation_terms.h"
#include "routing/ladder_scorer.h"
#include "tilesplash/attention.h"
#include "tilesplash/routing.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"

namespace tilesplash::detail {

// `samples` distinct video tokens (all of them when fewer), as sorted
// sequence indices, drawn from a generator seeded by (seed, layer, step).
std::vector<std::int64_t> sample_video_rows(const VideoGeometry& geometry, std::int64_t samples,
                                            std::uint64_t seed, std::int64_t layer,
                                            std::int64_t step);

// The decision from one head's MSEs and the mean square of its dense rows
// (`power`): decide_route() (routing.h), the one rule, with the per-candidate
// errors and the Sparse VideoGen pair's MSEs filled in for the report.
RouteDecision decide(const std::vector<MaskCandidate>& candidates, std::vector<double> mse,
                     double power, const RoutePolicy& policy);
// The rule without an error target (power is then irrelevant).
RouteDecision decide(const std::vector<MaskCandidate>& candidates, std::vector<double> mse,
                     std::optional<double> density_budget);

// Candidates scored incrementally (ladder_scorer.h) instead of as kernel
// sections: the chains of nested rungs (ladder_chains()) and the threads to
// walk them on.
struct LadderScoring {
  ThreadingContext* context = nullptr;
  std::vector<std::vector<std::size_t>> chains;
};

class Router {
 public:
  // Per head of q, k, v ([heads, tokens, d], original order), per candidate
  // mask: the MSE over the sampled rows and all dv channels of its output
  // against the reference's ([head][candidate]): dense, or the keys a padded
  // call really has; `power`, when not null, gets per head the mean square of
  // the reference rows (sampled_error's denominator). `options` supplies
  // scale and threads. `ladder`, when not null and its chains not empty
  // (and ladder_scoring_applies()), scores the candidates of its chains
  // incrementally against the kernel's reference rows; the kernel call then
  // holds the reference and the other candidates only, and where there are
  // none and the reference keeps one whole key range, the walk computes the
  // reference rows too and there is no kernel call. `terms`, when not
  // null, are merged into every candidate's sampled rows before their error
  // is taken (compensation: the router scores what will run); score() fills
  // them (CompensationTerms::fill_head), head by head where it walks.
  std::vector<std::vector<double>> score(AttentionBackend& backend, const TensorView& q,
                                         const TensorView& k, const TensorView& v,
                                         const Mask& reference, const std::vector<Mask>& candidates,
                                         const std::vector<std::int64_t>& rows,
                                         std::int64_t block_kv, const AttentionOptions& options,
                                         double* plan_seconds, std::vector<double>* power = nullptr,
                                         const LadderScoring* ladder = nullptr,
                                         CompensationTerms* terms = nullptr);

 private:
  // score() with every candidate on a chain: the walk's own reference rows
  // over dense_keys, no kernel call.
  std::vector<std::vector<double>> score_walked(
      const TensorView& q, const TensorView& k, const TensorView& v,
      const std::vector<Mask>& candidates, const std::vector<std::int64_t>& rows,
      IndexRange dense_keys, const AttentionOptions& options, std::vector<double>* power,
      const LadderScoring& ladder, CompensationTerms* terms);

  std::vector<unsigned char> queries_;  // [heads, sections * r, d] in q's dtype
  std::vector<float> outputs_;          // [heads, sections * r, dv]
  std::vector<float> lses_;             // [heads, sections * r], with terms only
  LadderWorkspace walk_;                // the ladder walk's buffers, kept between calls
};

}  // namespace tilesplash::detail
