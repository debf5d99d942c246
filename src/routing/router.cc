// Row sampling and the three-section router call; see router.h.
#include "routing/router.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_set>

#include "masks/mask_util.h"
#include "routing/sampled_rows_node.h"

namespace tilesplash::detail {
namespace {

// Query rows per tile of the router call: small enough that a single head
// still splits into several work items for the thread pool.
constexpr std::int64_t kRouterBlockQ = 32;

class SplitMix {
 public:
  explicit SplitMix(std::uint64_t seed) : state_(seed) {}
  // Uniform in [0, bound) by a multiply-shift (bias below 2^-40 here).
  std::int64_t below(std::int64_t bound) {
    state_ += 0x9e3779b97f4a7c15ULL;
    const std::uint64_t x = mix64(state_);
    return static_cast<std::int64_t>((static_cast<unsigned __int128>(x) * bound) >> 64);
  }

 private:
  std::uint64_t state_;
};

}  // namespace

std::vector<std::int64_t> sample_video_rows(const VideoGeometry& geometry, std::int64_t samples,
                                            std::uint64_t seed, std::int64_t layer,
                                            std::int64_t step) {
  const IndexRange video = geometry.video_range();
  const std::int64_t count = std::min(samples, video.size());
  std::vector<std::int64_t> rows;
  rows.reserve(static_cast<std::size_t>(count));
  if (count == video.size()) {
    for (std::int64_t n = video.begin; n < video.end; ++n) rows.push_back(n);
    return rows;
  }
  // Floyd's algorithm: exactly `count` distinct values, no rejection loop.
  SplitMix rng(hash_combine(hash_combine(seed, static_cast<std::uint64_t>(layer)),
                            static_cast<std::uint64_t>(step)));
  std::unordered_set<std::int64_t> chosen;
  for (std::int64_t j = video.size() - count; j < video.size(); ++j) {
    const std::int64_t t = rng.below(j + 1);
    chosen.insert(chosen.count(t) ? j : t);
  }
  for (const std::int64_t u : chosen) rows.push_back(video.begin + u);
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<RouteDecision> Router::route(AttentionRunner& runner, const TensorView& q,
                                         const TensorView& k, const TensorView& v,
                                         const Mask& spatial, const Mask& temporal,
                                         const std::vector<std::int64_t>& rows,
                                         std::int64_t block_kv, const AttentionOptions& options,
                                         double* plan_seconds) {
  const std::int64_t heads = q.heads;
  const std::int64_t r = static_cast<std::int64_t>(rows.size());
  const std::int64_t block = 3 * r;
  const std::int64_t d = q.dim;
  const std::int64_t dv = v.dim;
  const std::int64_t elem = size_of(q.dtype);

  // Gather the sampled rows of every head, three times over.
  queries_.resize(static_cast<std::size_t>(heads * block * d * elem));
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t i = 0; i < block; ++i) {
      const auto* src =
          static_cast<const unsigned char*>(q.data) +
          (h * q.head_stride + rows[static_cast<std::size_t>(i % r)] * q.row_stride) * elem;
      std::memcpy(queries_.data() + (h * block + i) * d * elem, src,
                  static_cast<std::size_t>(d * elem));
    }
  }
  outputs_.resize(static_cast<std::size_t>(heads * block * dv));

  const Mask stacked(
      std::make_shared<SampledRowsNode>(std::vector<Mask>{Mask::dense(), spatial, temporal}, rows));
  const TilePlan plan =
      TilePlan::build(stacked, block, k.len, {std::min(kRouterBlockQ, block), block_kv});
  if (plan_seconds != nullptr) *plan_seconds += plan.stats().build_seconds;
  runner.forward(plan,
                 {TensorView::contiguous(queries_.data(), q.dtype, heads, block, d), k, v,
                  MutableTensorView::contiguous(outputs_.data(), DType::kF32, heads, block, dv)},
                 options);

  std::vector<RouteDecision> decisions(static_cast<std::size_t>(heads));
  for (std::int64_t h = 0; h < heads; ++h) {
    const float* dense = outputs_.data() + h * block * dv;
    const float* sections[2] = {dense + r * dv, dense + 2 * r * dv};
    double mse[2] = {0.0, 0.0};
    for (int s = 0; s < 2; ++s) {
      double sum = 0.0;
      for (std::int64_t i = 0; i < r * dv; ++i) {
        const double diff = static_cast<double>(sections[s][i]) - dense[i];
        sum += diff * diff;
      }
      mse[s] = sum / static_cast<double>(r * dv);
    }
    RouteDecision& decision = decisions[static_cast<std::size_t>(h)];
    decision.mse_spatial = mse[0];
    decision.mse_temporal = mse[1];
    decision.choice = mse[0] <= mse[1] ? HeadMask::kSpatial : HeadMask::kTemporal;
  }
  return decisions;
}

}  // namespace tilesplash::detail
