// The kernel at the edges of the f32 range, on every SIMD target (a test
// parameter, skipped where the CPU lacks it): scores up to the f32 limit (the
// running max must not lose the precision that a folded `s * c - m * c`
// exponent loses), values near FLT_MAX (the accumulator must not overflow when
// the output is representable), and q.k that overflows f32 (refused with a
// message naming a row, never NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/attention_check.h"
#include "support/random_data.h"
#include "support/targets.h"
#include "tilesplash/attention.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash::test {
namespace {

using enum DType;
using enum MaskMode;

const MaskMode kAllModes[] = {kTile, kElement, kBitmask};

void scale_tensor(HostTensor& t, double factor) {
  for (std::int64_t h = 0; h < t.heads(); ++h)
    for (std::int64_t r = 0; r < t.len(); ++r)
      for (std::int64_t c = 0; c < t.dim(); ++c)
        t.set(h, r, c, static_cast<float>(t.get(h, r, c) * factor));
}

// Runs every mode on the test's target and compares with the double-precision
// reference.
void expect_matches(const Mask& mask, const HostTensor& q, const HostTensor& k, const HostTensor& v,
                    const std::string& what) {
  const auto reference = reference_all_heads(mask, q, k, v, std::nullopt);
  const TilePlan plan = TilePlan::build(mask, q.len(), k.len(), {64, 64});
  for (const MaskMode mode : kAllModes) {
    SCOPED_TRACE(what + " " + mask.to_string() + " " + std::string(to_string(q.dtype())) + " " +
                 std::string(to_string(mode)));
    const Outputs o = run_forward(plan, q, k, v, kF32, {std::nullopt, mode, 2, true});
    EXPECT_TRUE(matches_reference(reference, o.out, o.lse.data(), tolerance_for(q.dtype(), kF32),
                                  v.max_abs()));
  }
}

class AttentionNumericEdges : public TargetTest {};

// Q = K with entries of about `magnitude`: every row's own key dominates, and
// the scores reach magnitude^2 * d.
TEST_P(AttentionNumericEdges, LargeScoresMatchReference) {
  struct Size {
    DType dtype;
    double magnitude;
  };
  // 3e4 in f16 (its range ends at 65504); in f32 up to scores near 1e37.
  const Size sizes[] = {{kF16, 3e4}, {kF32, 3e4}, {kF32, 1e9}, {kF32, 3e17}, {kBF16, 1e9}};
  for (const Size& size : sizes) {
    HostTensor q(size.dtype, 2, 100, 64), v(size.dtype, 2, 100, 64);
    q.fill_normal(5);
    v.fill_normal(6);
    scale_tensor(q, size.magnitude / 2);  // |N(0, 1)| reaches about 3 here
    for (const Mask& mask : {Mask::dense(), Mask::causal()}) {
      expect_matches(mask, q, q, v, "magnitude " + std::to_string(size.magnitude));
    }
  }
}

// V near FLT_MAX with near-uniform weights: the sum of weights times V passes
// the f32 range although the average, the output, does not.
TEST_P(AttentionNumericEdges, ValuesNearFloatMaxMatchReference) {
  for (const DType dtype : {kF32, kBF16}) {
    HostTensor q(dtype, 2, 130, 64), k(dtype, 2, 130, 64), v(dtype, 2, 130, 64);
    q.fill_normal(7);
    k.fill_normal(8);
    v.fill_normal(9);
    scale_tensor(q, 0.1);
    scale_tensor(v, 0.95 * std::numeric_limits<float>::max() / v.max_abs());
    expect_matches(Mask::dense(), q, k, v, "v near FLT_MAX");
    expect_matches(Mask::local(20, 20), q, k, v, "v near FLT_MAX");
  }
}

// Keys whose q.k overflows to -inf next to keys with finite scores: the true
// weights of the former are 0, so the answer is still representable.
TEST_P(AttentionNumericEdges, NegativeOverflowBesideFiniteScoresIsExact) {
  HostTensor q(kF32, 1, 64, 16), k(kF32, 1, 128, 16), v(kF32, 1, 128, 16);
  v.fill_normal(3);
  for (std::int64_t r = 0; r < 64; ++r) q.set(0, r, 0, 2e19f);
  for (std::int64_t r = 0; r < 64; ++r) k.set(0, r, 0, -2e19f);  // q.k = -4e38: -inf
  for (std::int64_t r = 64; r < 128; ++r) k.set(0, r, 1, 1.0f);  // q.k = 0
  expect_matches(Mask::dense(), q, k, v, "negative overflow");
}

// q.k beyond the f32 range: +inf, NaN (+inf + -inf) or, for every kept key,
// -inf. Each is refused with a message that names a row.
TEST_P(AttentionNumericEdges, OverflowingScoresAreRefused) {
  struct Overflow {
    std::string name;
    float k_sign;
    bool mixed;
  };
  const Overflow cases[] = {
      {"positive", 1.0f, false}, {"negative", -1.0f, false}, {"inf minus inf", 1.0f, true}};
  for (const Overflow& c : cases) {
    HostTensor q(kF32, 2, 70, 16), k(kF32, 2, 70, 16), v(kF32, 2, 70, 16);
    v.fill_normal(4);
    for (std::int64_t h = 0; h < 2; ++h) {
      for (std::int64_t r = 0; r < 70; ++r) {
        for (std::int64_t i = 0; i < 16; ++i) {
          q.set(h, r, i, 1e19f);
          const float sign = (c.mixed && i >= 8) ? -c.k_sign : c.k_sign;
          k.set(h, r, i, sign * 1e19f);
        }
      }
    }
    const TilePlan plan = TilePlan::build(Mask::causal(), 70, 70, {64, 64});
    for (const MaskMode mode : kAllModes) {
      SCOPED_TRACE(c.name + " " + std::string(to_string(mode)));
      try {
        run_forward(plan, q, k, v, kF32, {std::nullopt, mode, 2, true});
        ADD_FAILURE() << "expected std::invalid_argument";
      } catch (const std::invalid_argument& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("overflows float32"), std::string::npos) << message;
        EXPECT_NE(message.find("in 140 rows (first: head 0, q row 0)"), std::string::npos)
            << message;
      }
    }
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(AttentionNumericEdges);

}  // namespace
}  // namespace tilesplash::test
