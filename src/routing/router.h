// Online routing (DESIGN §6) on the kernel itself: the sampled query rows are
// stacked three times (dense, spatial, temporal sections) into one short query
// block and run in a single kernel call against all keys, so K and V are
// packed once and the three outputs come at the kernel's speed. Cost is about
// (1 + 1 + density) * r / N of a dense head: the temporal section, on the
// original order, touches every key tile.
#pragma once

#include <cstdint>
#include <vector>

#include "tilesplash/attention.h"
#include "tilesplash/routing.h"
#include "tilesplash/video.h"

namespace tilesplash::detail {

// `samples` distinct video tokens (all of them when fewer), as sorted
// sequence indices, drawn from a generator seeded by (seed, layer, step).
std::vector<std::int64_t> sample_video_rows(const VideoGeometry& geometry, std::int64_t samples,
                                            std::uint64_t seed, std::int64_t layer,
                                            std::int64_t step);

class Router {
 public:
  // One decision per head of q, k, v ([heads, tokens, d], original order):
  // MSE over the sampled rows and all dv channels of the spatial and temporal
  // outputs against the dense one. `options` supplies scale and threads.
  std::vector<RouteDecision> route(AttentionRunner& runner, const TensorView& q,
                                   const TensorView& k, const TensorView& v, const Mask& spatial,
                                   const Mask& temporal, const std::vector<std::int64_t>& rows,
                                   std::int64_t block_kv, const AttentionOptions& options,
                                   double* plan_seconds);

 private:
  std::vector<unsigned char> queries_;  // [heads, 3 r, d] in q's dtype
  std::vector<float> outputs_;          // [heads, 3 r, dv]
};

}  // namespace tilesplash::detail
