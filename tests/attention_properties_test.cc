// Properties of the kernel beyond matching the reference on one call: empty
// rows, run-to-run determinism across thread counts, and strided layouts, each
// on every SIMD target (a test parameter).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
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

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const MaskMode kAllModes[] = {kTile, kElement, kBitmask};

// Rows with no kept key: the first rows of a negative-offset causal mask and
// masks that keep nothing at all (a predicate, density 0, a band pushed past
// the keys). Exact zeros and -inf, never NaN, in every mode and dtype.
class AttentionEmptyRows : public TargetTest {};

TEST_P(AttentionEmptyRows, ZeroOutputAndMinusInfLse) {
  const Mask masks[] = {
      Mask::causal(-5),
      Mask::function([](std::int64_t, std::int64_t) { return false; }, "nothing"),
      Mask::random(0.0, 1),
      Mask::local(2, 2, 10000),
  };
  const std::int64_t len = 100;
  for (const Mask& mask : masks) {
    for (const DType dtype : {kF32, kBF16}) {
      HostTensor q(dtype, 2, len, 64), k(dtype, 2, len, 64), v(dtype, 2, len, 64);
      q.fill_normal(1);
      k.fill_normal(2);
      v.fill_normal(3);
      const auto reference = reference_all_heads(mask, q, k, v, std::nullopt);
      ASSERT_TRUE(std::isinf(reference[0].lse[0]))
          << "row 0 should be empty for " << mask.to_string();
      const TilePlan plan = TilePlan::build(mask, len, len, {64, 64});
      for (const MaskMode mode : kAllModes) {
        SCOPED_TRACE(mask.to_string() + " " + std::string(to_string(dtype)) + " " +
                     std::string(to_string(mode)));
        // Output in the input dtype, so bf16 zeros are checked too.
        const Outputs o = run_forward(plan, q, k, v, dtype, {std::nullopt, mode, 2, true});
        EXPECT_TRUE(matches_reference(reference, o.out, o.lse.data(), tolerance_for(dtype, dtype),
                                      v.max_abs()));
      }
    }
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(AttentionEmptyRows);

// Work is split across threads by q-block, and each row's reduction order must
// not depend on the split: any thread count gives the same bits.
class AttentionDeterminism : public TargetTest {};

TEST_P(AttentionDeterminism, BitIdenticalAcrossThreadCounts) {
  const Mask mask = (Mask::local(64, 64) | Mask::random(0.05, 11)) & Mask::causal(200);
  const TilePlan plan = TilePlan::build(mask, 700, 900, {64, 128});
  for (const DType dtype : {kF32, kBF16}) {
    HostTensor q(dtype, 3, 700, 64), k(dtype, 3, 900, 64), v(dtype, 3, 900, 64);
    q.fill_normal(4);
    k.fill_normal(5);
    v.fill_normal(6);
    SCOPED_TRACE(to_string(dtype));
    const Outputs one = run_forward(plan, q, k, v, kF32, {std::nullopt, kTile, 1, true});
    for (const int threads : {2, 3, 4}) {
      const Outputs many = run_forward(plan, q, k, v, kF32, {std::nullopt, kTile, threads, true});
      EXPECT_TRUE(bitwise_equal(one.out, many.out)) << threads << " threads";
      EXPECT_EQ(0, std::memcmp(one.lse.data(), many.lse.data(), one.lse.size() * sizeof(float)))
          << threads << " threads";
    }
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(AttentionDeterminism);

// FlashAttention's [N, heads, d] layout (row_stride = heads * d) reads and
// writes through the strides; the output rows also carry padding that the
// kernel must leave alone.
class AttentionStrides : public TargetTest {};

TEST_P(AttentionStrides, InterleavedHeadsMatchContiguous) {
  const std::int64_t heads = 3, q_len = 300, kv_len = 257, d = 64, dv = 80, pad = 8;
  const Mask mask = Mask::causal(kv_len - q_len) | Mask::local(8, 8);
  const TilePlan plan = TilePlan::build(mask, q_len, kv_len, {64, 64});
  for (const DType dtype : {kF32, kBF16, kF16}) {
    HostTensor q(dtype, heads, q_len, d), k(dtype, heads, kv_len, d), v(dtype, heads, kv_len, dv);
    q.fill_normal(7);
    k.fill_normal(8);
    v.fill_normal(9);
    const HostTensor qs = q.relayout(d, heads * d);
    const HostTensor ks = k.relayout(d, heads * d);
    const HostTensor vs = v.relayout(dv, heads * dv);
    SCOPED_TRACE(to_string(dtype));
    const AttentionOptions options{std::nullopt, kTile, 2, true};
    const Outputs contiguous = run_forward(plan, q, k, v, dtype, options);

    HostTensor out(dtype, heads, q_len, dv, dv, heads * dv + pad);
    out.fill_storage(kNaN);
    const std::vector<unsigned char> before = out.storage();
    std::vector<float> lse(static_cast<std::size_t>(heads * q_len), kNaN);
    attention_forward(plan, {qs.view(), ks.view(), vs.view(), out.mutable_view(), lse.data()},
                      options);
    EXPECT_TRUE(bitwise_equal(contiguous.out, out));
    EXPECT_EQ(0, std::memcmp(contiguous.lse.data(), lse.data(), lse.size() * sizeof(float)));

    const auto element = size_of(dtype);
    std::int64_t touched_padding = 0;
    for (std::int64_t r = 0; r < q_len; ++r) {
      const std::int64_t begin = (r * (heads * dv + pad) + heads * dv) * element;
      for (std::int64_t b = begin; b < begin + pad * element; ++b) {
        if (b < static_cast<std::int64_t>(before.size()) &&
            before[static_cast<std::size_t>(b)] != out.storage()[static_cast<std::size_t>(b)]) {
          ++touched_padding;
        }
      }
    }
    EXPECT_EQ(touched_padding, 0) << "bytes written between output rows";
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(AttentionStrides);

}  // namespace
}  // namespace tilesplash::test
