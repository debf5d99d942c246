// The default precision's kernel under every loop variant (KernelVariant)
// and both bf16 product paths, on every SIMD target of the build: each
// against the double-precision reference, and bit-identical to the default
// variant on one thread whatever the variant and the thread count.
#include <gtest/gtest.h>

#include <string>

#include "kernel/isa_dispatch.h"
#include "support/attention_check.h"
#include "support/random_data.h"
#include "support/targets.h"
#include "tilesplash/attention.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tilesplash/tuning.h"

namespace tilesplash::test {
namespace {

using enum DType;

class KernelVariants : public TargetTest {};

bool target_has_dot() { return kernel::active_target().bf16_peak.run != nullptr; }

struct Input {
  DType dtype;
  ProductPath path;
};

TEST_P(KernelVariants, MatchTheReferenceAndEachOtherBitForBit) {
  for (const Input input : {Input{kF32, ProductPath::kWiden}, Input{kF16, ProductPath::kWiden},
                            Input{kBF16, ProductPath::kWiden}, Input{kBF16, ProductPath::kDot}}) {
    if (input.path == ProductPath::kDot && !target_has_dot()) continue;
    // Rows not a multiple of 6 * 4, ragged key tiles, a banded mask with
    // empty, partial and full tiles.
    const std::int64_t n = 461;
    HostTensor q(input.dtype, 2, n, 64), k(input.dtype, 2, n, 64), v(input.dtype, 2, n, 64);
    q.fill_normal(51);
    k.fill_normal(52);
    v.fill_normal(53);
    const Mask mask = Mask::local(120, 70) | Mask::causal(-400);
    const TilePlan plan = TilePlan::build(mask, n, n, {100, 128});
    const std::vector<ReferenceHead> reference = reference_all_heads(mask, q, k, v, std::nullopt);
    AttentionOptions options;
    options.product_path = input.path;
    options.threads = 1;
    const Outputs first = run_forward(plan, q, k, v, kF32, options);
    const std::string label =
        std::string(to_string(input.dtype)) + " " + std::string(to_string(input.path));
    EXPECT_TRUE(matches_reference(reference, first.out, first.lse.data(),
                                  tolerance_for(input.dtype, kF32), v.max_abs()))
        << label;
    for (const KernelVariant& variant : kernel_variants()) {
      for (const int threads : {1, 2, 3}) {
        options.variant = variant;
        options.threads = threads;
        const Outputs again = run_forward(plan, q, k, v, kF32, options);
        EXPECT_TRUE(bitwise_equal(first.out, again.out))
            << label << " " << to_string(variant) << " threads " << threads;
        EXPECT_EQ(first.lse, again.lse) << label << " " << to_string(variant);
      }
    }
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(KernelVariants);

// The two product paths compute differently (bf16 probabilities against f32
// ones): forcing one must change the result, or the option reaches nothing.
TEST(ProductPath, ForcingThePathChangesTheArithmetic) {
  if (!target_has_dot()) GTEST_SKIP() << "the active target has no bf16 dot product";
  HostTensor q(kBF16, 1, 200, 64), k(kBF16, 1, 200, 64), v(kBF16, 1, 200, 64);
  q.fill_normal(61);
  k.fill_normal(62);
  v.fill_normal(63);
  const TilePlan plan = TilePlan::build(Mask::dense(), 200, 200, {64, 64});
  AttentionOptions options;
  options.product_path = ProductPath::kDot;
  const Outputs dot = run_forward(plan, q, k, v, kF32, options);
  options.product_path = ProductPath::kWiden;
  const Outputs widen = run_forward(plan, q, k, v, kF32, options);
  EXPECT_FALSE(bitwise_equal(dot.out, widen.out));
}

TEST(ProductPath, ForcedChoicesAndTheirErrors) {
  EXPECT_EQ(choose_product_path(ProductPath::kWiden).path, ProductPath::kWiden);
  if (target_has_dot()) {
    EXPECT_EQ(choose_product_path(ProductPath::kDot).path, ProductPath::kDot);
  } else {
    EXPECT_THROW(choose_product_path(ProductPath::kDot), std::invalid_argument);
  }
  const ProductPathChoice automatic = choose_product_path(ProductPath::kAuto);
  EXPECT_FALSE(automatic.reason.empty());
  if (!target_has_dot()) {
    EXPECT_EQ(automatic.path, ProductPath::kWiden);
  }
}

}  // namespace
}  // namespace tilesplash::test
