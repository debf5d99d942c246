// Row sampling and the three-section router call; see router.h.
#include "routing/router.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <unordered_set>
#include <utility>

#include "masks/mask_util.h"
#include "routing/ladder_scorer.h"
#include "routing/sampled_rows_node.h"
#include "tilesplash/attention.h"

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

// The MSE of a kernel section's r rows against the reference rows, each row
// first merged with candidate c's compensation term when there are terms
// (`lse`: the section's LSEs then).
double section_mse(const float* section, const float* lse, const float* reference, std::int64_t r,
                   std::int64_t dv, const CompensationTerms* terms, std::int64_t h,
                   std::int64_t c) {
  double sum = 0.0;
  std::vector<double> row(static_cast<std::size_t>(dv));
  for (std::int64_t j = 0; j < r; ++j) {
    for (std::int64_t x = 0; x < dv; ++x) row[x] = section[j * dv + x];
    if (terms != nullptr) {
      double row_lse = lse[j];
      terms->merge(h, j, c, row.data(), row_lse);
    }
    for (std::int64_t x = 0; x < dv; ++x) {
      const double diff = row[x] - reference[j * dv + x];
      sum += diff * diff;
    }
  }
  return sum / static_cast<double>(r * dv);
}

// Per head, the mean square of the r reference rows (the first r of each
// head's `block` rows of dv floats).
std::vector<double> row_power(const float* outputs, std::int64_t heads, std::int64_t block,
                              std::int64_t r, std::int64_t dv) {
  std::vector<double> power(static_cast<std::size_t>(heads), 0.0);
  for (std::int64_t h = 0; h < heads; ++h) {
    const float* dense = outputs + h * block * dv;
    double sum = 0.0;
    for (std::int64_t i = 0; i < r * dv; ++i) sum += static_cast<double>(dense[i]) * dense[i];
    power[static_cast<std::size_t>(h)] = sum / static_cast<double>(r * dv);
  }
  return power;
}

// The keys the reference keeps, when every sampled row keeps exactly one
// whole range and it is the same range for all (the dense mask, or the keys
// before the padding); else empty.
IndexRange whole_key_range(const Mask& reference, const std::vector<std::int64_t>& rows,
                           std::int64_t kv_len) {
  IndexRange keys{};
  for (const std::int64_t row : rows) {
    const IndexRange hull = reference.kv_hull({row, row + 1}, kv_len);
    if (hull.empty() || (!keys.empty() && (hull.begin != keys.begin || hull.end != keys.end)) ||
        reference.classify({row, row + 1}, hull) != TileKind::kFull) {
      return {};
    }
    keys = hull;
  }
  return keys;
}

// Whether the walk scores bf16 inputs on the bf16 dot product: where the
// kernel's product path for these options is the dot product.
bool bf16_dot(const TensorView& q, const AttentionOptions& options) {
  return q.dtype == DType::kBF16 &&
         choose_product_path(options.product_path).path == ProductPath::kDot;
}

}  // namespace

}  // namespace tilesplash::detail

namespace tilesplash {

std::int64_t default_router_samples(std::int64_t video_tokens) {
  // Fewer than 16 rows make a noisy estimate of a head's error; on the planted
  // band workload 16 and 64 rows choose the same rungs (tests/router_test.cc).
  constexpr std::int64_t kFewest = 16, kMost = 64, kTokensPerRow = 1024;
  return std::clamp(video_tokens / kTokensPerRow, kFewest, kMost);
}

}  // namespace tilesplash

namespace tilesplash::detail {

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

RouteDecision decide(const std::vector<MaskCandidate>& candidates, std::vector<double> mse,
                     double power, const RoutePolicy& policy) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> densities;
  for (const MaskCandidate& c : candidates) densities.push_back(c.density);
  const RouteChoice choice = decide_route(densities, mse, power, policy);
  RouteDecision decision;
  decision.choice = HeadMask(candidates[choice.index].name);
  decision.index = choice.index;
  decision.target_met = choice.target_met;
  decision.mse_spatial = kNaN;
  decision.mse_temporal = kNaN;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].name == HeadMask::kSpatial.name()) decision.mse_spatial = mse[i];
    if (candidates[i].name == HeadMask::kTemporal.name()) decision.mse_temporal = mse[i];
    decision.error.push_back(sampled_error(mse[i], power));
  }
  decision.mse = std::move(mse);
  return decision;
}

RouteDecision decide(const std::vector<MaskCandidate>& candidates, std::vector<double> mse,
                     std::optional<double> density_budget) {
  return decide(candidates, std::move(mse), 1.0, RoutePolicy{density_budget, std::nullopt});
}

std::vector<std::vector<double>> Router::score_walked(
    const TensorView& q, const TensorView& k, const TensorView& v,
    const std::vector<Mask>& candidates, const std::vector<std::int64_t>& rows,
    IndexRange dense_keys, const AttentionOptions& options, std::vector<double>* power,
    const LadderScoring& ladder, CompensationTerms* terms) {
  const std::int64_t heads = q.heads, r = static_cast<std::int64_t>(rows.size());
  outputs_.resize(static_cast<std::size_t>(heads * r * v.dim));
  std::vector<std::vector<double>> mse(static_cast<std::size_t>(heads),
                                       std::vector<double>(candidates.size(), 0.0));
  const float scale = options.scale ? *options.scale : 1.0f / std::sqrt(static_cast<float>(q.dim));
  score_ladders(*ladder.context, options.threads, q, k, v, candidates, ladder.chains, rows, scale,
                nullptr, r, mse,
                {terms, {outputs_.data(), dense_keys}, bf16_dot(q, options), &walk_});
  if (power != nullptr) *power = row_power(outputs_.data(), heads, r, r, v.dim);
  return mse;
}

std::vector<std::vector<double>> Router::score(
    AttentionBackend& backend, const TensorView& q, const TensorView& k, const TensorView& v,
    const Mask& reference, const std::vector<Mask>& candidates,
    const std::vector<std::int64_t>& rows, std::int64_t block_kv, const AttentionOptions& options,
    double* plan_seconds, std::vector<double>* power, const LadderScoring* ladder,
    CompensationTerms* terms) {
  const bool incremental = ladder != nullptr && ladder->context != nullptr &&
                           !ladder->chains.empty() && ladder_scoring_applies(q, k, v, options);
  // The kernel's sections: the reference, then every candidate of no chain.
  std::vector<bool> walked(candidates.size(), false);
  if (incremental) {
    for (const auto& chain : ladder->chains) {
      for (const std::size_t c : chain) walked[c] = true;
    }
  }
  std::vector<std::size_t> on_kernel;
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    if (!walked[c]) on_kernel.push_back(c);
  }
  const std::int64_t heads = q.heads;
  const std::int64_t r = static_cast<std::int64_t>(rows.size());
  // Every candidate walked and a reference of whole key ranges: the walk
  // computes the reference rows too, and there is no kernel call at all.
  const IndexRange dense_keys =
      incremental && on_kernel.empty() ? whole_key_range(reference, rows, k.len) : IndexRange{};
  if (!dense_keys.empty()) {
    return score_walked(q, k, v, candidates, rows, dense_keys, options, power, *ladder, terms);
  }
  const std::int64_t sections = 1 + static_cast<std::int64_t>(on_kernel.size());
  const std::int64_t block = sections * r;
  const std::int64_t d = q.dim;
  const std::int64_t dv = v.dim;
  const std::int64_t elem = size_of(q.dtype);

  // Gather the sampled rows of every head, once per section.
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

  std::vector<Mask> masks{reference};
  for (const std::size_t c : on_kernel) masks.push_back(candidates[c]);
  const Mask stacked(std::make_shared<SampledRowsNode>(std::move(masks), rows));
  const TilePlan plan =
      TilePlan::build(stacked, block, k.len, {std::min(kRouterBlockQ, block), block_kv});
  if (plan_seconds != nullptr) *plan_seconds += plan.stats().build_seconds;
  lses_.resize(terms != nullptr ? static_cast<std::size_t>(heads * block) : 0);
  backend.forward(plan,
                  {TensorView::contiguous(queries_.data(), q.dtype, heads, block, d), k, v,
                   MutableTensorView::contiguous(outputs_.data(), DType::kF32, heads, block, dv),
                   terms != nullptr ? lses_.data() : nullptr},
                  options);

  std::vector<std::vector<double>> mse(static_cast<std::size_t>(heads),
                                       std::vector<double>(candidates.size(), 0.0));
  if (power != nullptr) *power = row_power(outputs_.data(), heads, block, r, dv);
  if (terms != nullptr) terms->fill();  // the kernel's sections take every head's
  for (std::int64_t h = 0; h < heads; ++h) {
    const float* dense = outputs_.data() + h * block * dv;
    for (std::int64_t s = 1; s < sections; ++s) {
      const std::size_t c = on_kernel[static_cast<std::size_t>(s - 1)];
      const float* lse = terms != nullptr ? lses_.data() + h * block + s * r : nullptr;
      mse[static_cast<std::size_t>(h)][c] = section_mse(dense + s * r * dv, lse, dense, r, dv,
                                                        terms, h, static_cast<std::int64_t>(c));
    }
  }
  if (incremental) {
    const float scale = options.scale ? *options.scale : 1.0f / std::sqrt(static_cast<float>(d));
    score_ladders(*ladder->context, options.threads, q, k, v, candidates, ladder->chains, rows,
                  scale, outputs_.data(), block, mse, {terms, {}, bf16_dot(q, options), &walk_});
  }
  return mse;
}

}  // namespace tilesplash::detail
