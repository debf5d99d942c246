// Incremental scoring of density ladders (routing/ladder_scorer.h): the MSEs
// of every rung equal the kernel's stacked scoring and a float64 reference to
// float rounding, also where a "ladder" is not nested and with key padding;
// they do not depend on the thread count; chains group rungs by family.
#include "routing/ladder_scorer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernel/isa_dispatch.h"
#include "routing/router.h"
#include "support/targets.h"
#include "tilesplash/backend.h"
#include "tilesplash/routing.h"
#include "tilesplash/tensor.h"
#include "tilesplash/workload.h"

namespace tilesplash {
namespace {

const VideoGeometry kGeometry{12, 8, 10, 16, TextPlacement::kAfter};

// Float64 attention of one row over the keys `mask` keeps.
std::vector<double> reference_row(const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v, std::int64_t n, std::int64_t d,
                                  std::int64_t h, std::int64_t row, const Mask& mask) {
  const float* qr = q.data() + (h * n + row) * d;
  std::vector<double> score(static_cast<std::size_t>(n), -INFINITY);
  double top = -INFINITY;
  for (std::int64_t key = 0; key < n; ++key) {
    if (!mask.keeps(row, key)) continue;
    double s = 0.0;
    for (std::int64_t c = 0; c < d; ++c) {
      s += static_cast<double>(qr[c]) * k[static_cast<std::size_t>((h * n + key) * d + c)];
    }
    score[static_cast<std::size_t>(key)] = s / std::sqrt(static_cast<double>(d));
    top = std::max(top, score[static_cast<std::size_t>(key)]);
  }
  std::vector<double> out(static_cast<std::size_t>(d), 0.0);
  double sum = 0.0;
  for (std::int64_t key = 0; key < n; ++key) {
    if (std::isinf(score[static_cast<std::size_t>(key)])) continue;
    const double p = std::exp(score[static_cast<std::size_t>(key)] - top);
    sum += p;
    for (std::int64_t c = 0; c < d; ++c) {
      out[static_cast<std::size_t>(c)] += p * v[static_cast<std::size_t>((h * n + key) * d + c)];
    }
  }
  for (double& x : out) x = sum > 0.0 ? x / sum : 0.0;
  return out;
}

struct Case {
  std::vector<MaskCandidate> candidates;
  std::vector<float> q, k, v;
  std::int64_t heads = 4, n = 0, d = 32;
  std::vector<std::int64_t> rows;

  TensorView view(const std::vector<float>& data) const {
    return TensorView::contiguous(data.data(), DType::kF32, heads, n, d);
  }
};

Case make_case(std::int64_t d = 32) {
  Case c;
  c.d = d;
  c.n = kGeometry.tokens();
  WorkloadOptions wo = planted_band_options(c.heads, 3);
  wo.head_dim = c.d;
  wo.dtype = DType::kF32;
  const VideoWorkload workload(kGeometry, wo);
  const auto copy = [&](const TensorView& t) {
    const auto* p = static_cast<const float*>(t.data);
    return std::vector<float>(p, p + c.heads * c.n * c.d);
  };
  c.q = copy(workload.q());
  c.k = copy(workload.k());
  c.v = copy(workload.v());
  c.candidates = ladder_candidates("svg", kGeometry, MethodOptions{0.25, true, true, std::nullopt},
                                   default_density_ladder());
  c.rows = detail::sample_video_rows(kGeometry, 24, 7, 0, 0);
  return c;
}

// The case's q, k and v rounded to bf16, and views of them.
struct Bf16Inputs {
  std::vector<std::uint16_t> q, k, v;
  std::int64_t heads, n, d;
  explicit Bf16Inputs(const Case& c) : heads(c.heads), n(c.n), d(c.d) {
    for (const auto& [from, to] : {std::pair{&c.q, &q}, std::pair{&c.k, &k}, std::pair{&c.v, &v}}) {
      for (const float x : *from) to->push_back(float_to_bf16(x));
    }
  }
  TensorView view(const std::vector<std::uint16_t>& data) const {
    return TensorView::contiguous(data.data(), DType::kBF16, heads, n, d);
  }
};

std::vector<std::vector<double>> score(const Case& c, std::vector<Mask> masks,
                                       const Mask& reference, bool incremental, int threads) {
  auto context = std::make_shared<ThreadingContext>(threads);
  const auto backend = make_backend("cpu", context);
  detail::Router router;
  std::vector<MaskCandidate> named = c.candidates;
  for (std::size_t i = 0; i < named.size(); ++i) named[i].mask = masks[i];
  detail::LadderScoring ladder{context.get(), detail::ladder_chains(named)};
  AttentionOptions options;
  options.check_finite = false;
  return router.score(*backend, c.view(c.q), c.view(c.k), c.view(c.v), reference, masks, c.rows, 64,
                      options, nullptr, nullptr, incremental ? &ladder : nullptr);
}

// The MSE of each candidate against dense from float64 attention.
std::vector<std::vector<double>> reference_mse(const Case& c, const std::vector<Mask>& masks,
                                               const Mask& reference) {
  std::vector<std::vector<double>> mse(static_cast<std::size_t>(c.heads));
  for (std::int64_t h = 0; h < c.heads; ++h) {
    std::vector<std::vector<double>> dense_rows;  // the reference's, once per head and row
    for (const std::int64_t row : c.rows) {
      dense_rows.push_back(reference_row(c.q, c.k, c.v, c.n, c.d, h, row, reference));
    }
    for (const Mask& mask : masks) {
      double sum = 0.0;
      for (std::size_t j = 0; j < c.rows.size(); ++j) {
        const std::vector<double>& dense = dense_rows[j];
        const std::vector<double> part = reference_row(c.q, c.k, c.v, c.n, c.d, h, c.rows[j], mask);
        for (std::int64_t i = 0; i < c.d; ++i) {
          sum += (part[i] - dense[i]) * (part[i] - dense[i]);
        }
      }
      mse[static_cast<std::size_t>(h)].push_back(sum / static_cast<double>(c.rows.size() * c.d));
    }
  }
  return mse;
}

// Errors (the relative L2 of the sampled rows, whose square is MSE / power)
// agree to 1e-4 of themselves plus 1e-6: f32 scores and weights against the
// kernel's polynomial exp2 and its own summation order.
void expect_close(const std::vector<std::vector<double>>& a,
                  const std::vector<std::vector<double>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t h = 0; h < a.size(); ++h) {
    ASSERT_EQ(a[h].size(), b[h].size());
    for (std::size_t i = 0; i < a[h].size(); ++i) {
      const double ea = std::sqrt(a[h][i]), eb = std::sqrt(b[h][i]);
      EXPECT_NEAR(ea, eb, 1e-4 * eb + 1e-6) << what << " head " << h << " candidate " << i;
    }
  }
}

std::vector<Mask> masks_of(const Case& c) {
  std::vector<Mask> masks;
  for (const MaskCandidate& m : c.candidates) masks.push_back(m.mask);
  return masks;
}

TEST(LadderScorer, ChainsGroupRungsByFamilyInDensityOrder) {
  std::vector<MaskCandidate> list = make_case().candidates;
  list.erase(list.begin() + 6, list.end());
  // Rungs are grouped by their fields, not their names: the names below say
  // another family than the fields, and "radial" (no family) and a rung of
  // density 0 belong to no chain.
  const std::pair<const char*, double> rungs[] = {{"spatial", 0.1},  {"temporal", 0.1},
                                                  {"spatial", 0.05}, {"", 0.2},
                                                  {"temporal", 0.4}, {"sta", 0.0}};
  for (std::size_t i = 0; i < 6; ++i) {
    list[i].name = "name" + std::to_string(i) + "@0.3";
    list[i].family = rungs[i].first;
    list[i].rung = rungs[i].second;
  }
  const auto chains = detail::ladder_chains(list);
  ASSERT_EQ(chains.size(), 2u);
  EXPECT_EQ(chains[0], (std::vector<std::size_t>{2, 0}));
  EXPECT_EQ(chains[1], (std::vector<std::size_t>{1, 4}));
  list.erase(list.begin() + 2, list.end());  // one rung per family: nothing to walk incrementally
  EXPECT_TRUE(detail::ladder_chains(list).empty());
}

// Every SIMD target's walk loops (TargetOps::gather_dot / gather_axpy), at a
// head dim of whole vectors and at one with a tail (24: not a multiple of 16).
class LadderScorerPerTarget : public test::TargetTest {};

TEST_P(LadderScorerPerTarget, MatchesStackedScoringAndFloat64Reference) {
  for (const std::int64_t d : {32, 24}) {
    SCOPED_TRACE("d " + std::to_string(d));
    const Case c = make_case(d);
    const std::vector<Mask> masks = masks_of(c);
    ASSERT_EQ(detail::ladder_chains(c.candidates).size(), 2u);  // spatial and temporal
    const auto walked = score(c, masks, Mask::dense(), true, 2);
    const auto stacked = score(c, masks, Mask::dense(), false, 2);
    const auto exact = reference_mse(c, masks, Mask::dense());
    expect_close(walked, stacked, "incremental vs stacked");
    expect_close(walked, exact, "incremental vs float64");
    expect_close(stacked, exact, "stacked vs float64");
    // Not all zero: the rungs differ, and a wider one is closer to dense.
    for (std::size_t h = 0; h < walked.size(); ++h) {
      EXPECT_GT(walked[h][0], walked[h][walked[h].size() - 2]) << h;
    }
  }
}

// bf16 inputs at head dims the dot product takes (whole 64-channel panels):
// on a target with a bf16 dot product the walk's scores and sums run on it
// (kernel::WalkDotOps), the weights rounded to bf16 as the kernel rounds its
// probabilities; elsewhere widened to f32. Either way every rung's error and
// the reference rows' power match float64 on the same bf16 values, to the
// weights' rounding: 2e-3 of the error plus 2e-3 of the rows' RMS (measured:
// 5e-4 on the dot product; each weight put on its pair's other key: 1.3).
TEST_P(LadderScorerPerTarget, Bf16OnTheTargetsProductPathMatchesFloat64) {
  for (const std::int64_t d : {64, 128}) {
    SCOPED_TRACE("d " + std::to_string(d));
    Case c = make_case(d);
    for (std::vector<float>* t : {&c.q, &c.k, &c.v}) {
      for (float& x : *t) x = bf16_to_float(float_to_bf16(x));
    }
    Bf16Inputs b(c);
    auto context = std::make_shared<ThreadingContext>(2);
    const auto backend = make_backend("cpu", context);
    const std::vector<Mask> masks = masks_of(c);
    detail::LadderScoring ladder{context.get(), detail::ladder_chains(c.candidates)};
    AttentionOptions options;
    options.check_finite = false;
    options.product_path = kernel::active_target().walk_dot.key_scores != nullptr
                               ? ProductPath::kDot
                               : ProductPath::kWiden;
    detail::Router router;
    std::vector<double> power;
    const auto walked = router.score(*backend, b.view(b.q), b.view(b.k), b.view(b.v), Mask::dense(),
                                     masks, c.rows, 64, options, nullptr, &power, &ladder);
    const auto exact = reference_mse(c, masks, Mask::dense());
    for (std::int64_t h = 0; h < c.heads; ++h) {
      const double rms = std::sqrt(power[static_cast<std::size_t>(h)]);
      for (std::size_t i = 0; i < masks.size(); ++i) {
        const double ew = std::sqrt(walked[h][i]), ee = std::sqrt(exact[h][i]);
        EXPECT_NEAR(ew, ee, 2e-3 * ee + 2e-3 * rms) << "head " << h << " candidate " << i;
      }
    }
  }
}

// A value of V that is Inf: the block holding it takes the f32 loops, so a
// rung that does not keep that key, but keeps the other key of its pair,
// gets no 0 x Inf = NaN. The errors are those of the widened walk: Inf where
// the reference row is, never NaN where that one is not.
TEST_P(LadderScorerPerTarget, ANonFiniteValueTakesTheF32LoopsForItsBlock) {
  Case c = make_case(64);
  Bf16Inputs b(c);
  b.v[static_cast<std::size_t>(101 * c.d + 5)] = 0x7f80;  // head 0, key 101: +Inf
  auto context = std::make_shared<ThreadingContext>(2);
  const auto backend = make_backend("cpu", context);
  const std::vector<Mask> masks = masks_of(c);
  detail::LadderScoring ladder{context.get(), detail::ladder_chains(c.candidates)};
  std::vector<std::vector<double>> mse[2];
  for (const bool dot : {false, true}) {
    AttentionOptions options;
    options.check_finite = false;
    const bool has_dot = kernel::active_target().walk_dot.key_scores != nullptr;
    options.product_path = dot && has_dot ? ProductPath::kDot : ProductPath::kWiden;
    detail::Router router;
    mse[dot] = router.score(*backend, b.view(b.q), b.view(b.k), b.view(b.v), Mask::dense(), masks,
                            c.rows, 64, options, nullptr, nullptr, &ladder);
  }
  for (std::size_t i = 0; i < masks.size(); ++i) {
    EXPECT_EQ(std::isnan(mse[1][0][i]), std::isnan(mse[0][0][i])) << "candidate " << i;
    EXPECT_EQ(std::isinf(mse[1][0][i]), std::isinf(mse[0][0][i])) << "candidate " << i;
    EXPECT_TRUE(std::isfinite(mse[1][1][i])) << "head 1, candidate " << i;
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(LadderScorerPerTarget);

TEST(LadderScorer, KeyPaddingAndRungsThatAreNotNested) {
  Case c = make_case();
  const Mask keys = Mask::key_range(0, c.n - 5);  // the last text tokens are padding
  std::vector<Mask> masks;
  for (const Mask& m : masks_of(c)) masks.push_back(m & keys);
  // A "ladder" whose second rung drops keys of its first: scored rung by rung.
  c.candidates.erase(c.candidates.begin() + 2, c.candidates.end());
  c.candidates[0].name = "odd@0.1";
  c.candidates[1].name = "odd@0.2";
  masks = {Mask::local(0, 40) & keys, Mask::local(40, 0) & keys};
  const auto walked = score(c, masks, keys, true, 1);
  expect_close(walked, score(c, masks, keys, false, 1), "not nested vs stacked");
  expect_close(walked, reference_mse(c, masks, keys), "not nested vs float64");
}

// bf16 inputs are walked too (widened to f32); the kernel's bf16 path rounds
// its weights before P.V, so the two agree to about 1e-2 of the error here.
TEST(LadderScorer, Bf16InputsAgreeWithTheStackedScoring) {
  const Case c = make_case();
  Bf16Inputs b(c);
  AttentionOptions options;
  options.check_finite = false;
  ASSERT_TRUE(detail::ladder_scoring_applies(b.view(b.q), b.view(b.k), b.view(b.v), options));
  auto context = std::make_shared<ThreadingContext>(2);
  const auto backend = make_backend("cpu", context);
  const std::vector<Mask> masks = masks_of(c);
  detail::LadderScoring ladder{context.get(), detail::ladder_chains(c.candidates)};
  std::vector<std::vector<double>> mse[2];
  for (int walked = 0; walked < 2; ++walked) {
    detail::Router router;
    mse[walked] =
        router.score(*backend, b.view(b.q), b.view(b.k), b.view(b.v), Mask::dense(), masks, c.rows,
                     64, options, nullptr, nullptr, walked ? &ladder : nullptr);
  }
  for (std::size_t h = 0; h < mse[0].size(); ++h) {
    for (std::size_t i = 0; i < mse[0][h].size(); ++i) {
      const double stacked = std::sqrt(mse[0][h][i]), walked = std::sqrt(mse[1][h][i]);
      EXPECT_NEAR(walked, stacked, 1e-2 * stacked + 1e-4) << h << " " << i;
    }
  }
  options.precision = Precision::kInt8;  // int8 Q.K^T stays on the kernel
  EXPECT_FALSE(detail::ladder_scoring_applies(b.view(b.q), b.view(b.k), b.view(b.v), options));
}

// With every candidate on a chain and a reference of one whole key range, the
// walk computes the reference rows itself (no kernel call): their power, the
// MSEs' denominator, equals the kernel's and float64's; a reference that is
// not one whole range (a window) is left to the kernel, its MSEs still exact.
TEST(LadderScorer, TheWalkComputesWholeRangeReferencesAndLeavesOthersToTheKernel) {
  const Case c = make_case();
  const std::vector<Mask> masks = masks_of(c);
  auto context = std::make_shared<ThreadingContext>(2);
  const auto backend = make_backend("cpu", context);
  detail::LadderScoring ladder{context.get(), detail::ladder_chains(c.candidates)};
  AttentionOptions options;
  options.check_finite = false;
  for (const Mask& reference : {Mask::dense(), Mask::key_range(0, c.n - 7), Mask::local(50, 50)}) {
    SCOPED_TRACE(reference.to_string());
    std::vector<double> power[2];
    for (int walked = 0; walked < 2; ++walked) {
      detail::Router router;
      router.score(*backend, c.view(c.q), c.view(c.k), c.view(c.v), reference, masks, c.rows, 64,
                   options, nullptr, &power[walked], walked ? &ladder : nullptr);
    }
    for (std::int64_t h = 0; h < c.heads; ++h) {
      double exact = 0.0;
      for (const std::int64_t row : c.rows) {
        for (const double x : reference_row(c.q, c.k, c.v, c.n, c.d, h, row, reference)) {
          exact += x * x;
        }
      }
      exact /= static_cast<double>(c.rows.size() * c.d);
      EXPECT_NEAR(power[1][h], exact, 1e-5 * exact) << h;
      EXPECT_NEAR(power[1][h], power[0][h], 1e-5 * exact) << h;
    }
    expect_close(score(c, masks, reference, true, 2), reference_mse(c, masks, reference),
                 "walked vs float64");
  }
}

// Rings share their row's running maximum (the dense row's) when the walk
// computes the reference rows. Here one key scores about 140 for every row
// (every Q row shares a component along channel 0, and the key is that
// channel alone, large), the others below 30: every rung without it lies more
// than 69 below its row's maximum, where its weights would underflow on the
// row's maximum (its output 0, its error that of 0). The head is walked
// again with every ring on its own maximum, and the errors stay float64's.
TEST(LadderScorer, RingsFarBelowTheirRowsMaximumKeepTheirOwn) {
  Case c = make_case();
  const std::int64_t kKey = 5 * 80 + 37;  // frame 5 of 12 (80 tokens each): not the sink frame
  for (std::int64_t h = 0; h < c.heads; ++h) {
    for (std::int64_t n = 0; n < c.n; ++n)
      c.q[static_cast<std::size_t>((h * c.n + n) * c.d)] += 4.0f;
    float* key = c.k.data() + (h * c.n + kKey) * c.d;
    std::fill(key, key + c.d, 0.0f);
    key[0] = 200.0f;
  }
  const std::vector<Mask> masks = masks_of(c);
  const auto walked = score(c, masks, Mask::dense(), true, 2);
  const auto exact = reference_mse(c, masks, Mask::dense());
  expect_close(walked, exact, "walked vs float64");
  expect_close(walked, score(c, masks, Mask::dense(), false, 2), "walked vs stacked");
}

TEST(LadderScorer, BitIdenticalForAnyThreadCount) {
  const Case c = make_case();
  const std::vector<Mask> masks = masks_of(c);
  const auto one = score(c, masks, Mask::dense(), true, 1);
  for (const int threads : {2, 3, 5}) {
    EXPECT_EQ(one, score(c, masks, Mask::dense(), true, threads)) << threads;
  }
}

}  // namespace
}  // namespace tilesplash
