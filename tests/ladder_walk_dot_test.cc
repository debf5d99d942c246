// The ladder walk's bf16 dot-product loops (kernel::WalkDotOps, kernel/
// ladder_walk_dot-inl.h) on every target that has them, against float64
// definitions: the scores are the bf16 products summed (exact products, f32
// sums), the packed values are the block's key pairs with zeros past its end,
// and the weighted sums are the weights rounded to bf16 times the values.
// Targets without a bf16 dot product must leave every member null.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernel/isa_dispatch.h"
#include "support/random_data.h"
#include "support/targets.h"
#include "tilesplash/tensor.h"

namespace tilesplash {
namespace {

constexpr std::int64_t kBlock = kernel::kWalkDotBlock;

class WalkDotPerTarget : public test::TargetTest {
 protected:
  const kernel::WalkDotOps& ops() const { return kernel::active_target().walk_dot; }
  // True (and the test skipped) where the target has no dot product; its
  // members must then all be null.
  bool absent() const {
    const kernel::WalkDotOps& o = ops();
    if (o.key_scores != nullptr) return false;
    EXPECT_EQ(o.pack_values, nullptr);
    EXPECT_EQ(o.rows_axpy, nullptr);
    EXPECT_EQ(o.gather_axpy, nullptr);
    EXPECT_EQ(o.masked_axpy, nullptr);
    return true;
  }
};

double bf16(std::uint16_t bits) { return bf16_to_float(bits); }

std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed, float spread = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<std::uint16_t> out(n);
  for (auto& x : out) x = float_to_bf16(normal(rng));
  return out;
}

TEST_P(WalkDotPerTarget, ScoresAreTheBf16ProductsSummed) {
  if (absent()) GTEST_SKIP() << GetParam() << " has no bf16 dot product";
  for (const std::int64_t d : {32, 72, 128}) {
    for (const std::int64_t rows : {5, 16, 20}) {
      for (const std::int64_t n : {1, 7, 8, 64}) {
        SCOPED_TRACE("d " + std::to_string(d) + " rows " + std::to_string(rows) + " keys " +
                     std::to_string(n));
        const std::int64_t padded = (rows + 15) / 16 * 16, key_stride = d + 6;
        const auto q = random_bf16(static_cast<std::size_t>(rows * d), 1);
        const auto keys = random_bf16(static_cast<std::size_t>(n * key_stride), 2);
        std::vector<std::uint32_t> qt(static_cast<std::size_t>(d / 2 * padded), 0u);
        for (std::int64_t i = 0; i < rows; ++i) {
          for (std::int64_t c = 0; c < d / 2; ++c) {
            qt[static_cast<std::size_t>(c * padded + i)] =
                q[static_cast<std::size_t>(i * d + 2 * c)] |
                static_cast<std::uint32_t>(q[static_cast<std::size_t>(i * d + 2 * c + 1)]) << 16;
          }
        }
        const float scale = 0.125f;
        std::vector<float> scores(static_cast<std::size_t>(n * padded), -1.0f);
        ops().key_scores(qt.data(), padded, d, keys.data(), key_stride, n, scale, scores.data());
        for (std::int64_t j = 0; j < n; ++j) {
          for (std::int64_t i = 0; i < padded; ++i) {
            double exact = 0.0, size = 0.0;
            for (std::int64_t c = 0; i < rows && c < d; ++c) {
              const double p = bf16(q[static_cast<std::size_t>(i * d + c)]) *
                               bf16(keys[static_cast<std::size_t>(j * key_stride + c)]);
              exact += p;
              size += std::abs(p);
            }
            // f32 sums of d exact products: at most d roundings of the sum.
            EXPECT_NEAR(scores[static_cast<std::size_t>(j * padded + i)], scale * exact,
                        scale * size * 1e-6 * static_cast<double>(d))
                << "key " << j << " row " << i;
          }
        }
      }
    }
  }
}

TEST_P(WalkDotPerTarget, PackedValuesAreTheBlocksKeyPairsZeroPastItsEnd) {
  if (absent()) GTEST_SKIP() << GetParam() << " has no bf16 dot product";
  for (const std::int64_t dv : {64, 128}) {
    // Strided rows of two heads; the block of head 1 from key0 to end.
    const std::int64_t len = 150, row_stride = dv + 8, head_stride = len * row_stride;
    auto data = random_bf16(static_cast<std::size_t>(2 * head_stride), 3);
    const TensorView v{data.data(), DType::kBF16, 2, len, dv, head_stride, row_stride};
    for (const auto& [key0, end] :
         {std::pair<std::int64_t, std::int64_t>{0, 64}, {5, 69}, {70, 107}, {100, 150}}) {
      SCOPED_TRACE("dv " + std::to_string(dv) + " keys " + std::to_string(key0) + ".." +
                   std::to_string(end));
      std::vector<std::uint32_t> pairs(static_cast<std::size_t>(kBlock / 2 * dv), 0xdeadbeefu);
      EXPECT_TRUE(ops().pack_values(v, 1, key0, end, dv, pairs.data()));
      const auto at = [&](std::int64_t key, std::int64_t c) -> std::uint32_t {
        if (key0 + key >= end) return 0u;
        return data[static_cast<std::size_t>(head_stride + (key0 + key) * row_stride + c)];
      };
      for (std::int64_t i = 0; i < kBlock / 2; ++i) {
        for (std::int64_t c = 0; c < dv; ++c) {
          ASSERT_EQ(pairs[static_cast<std::size_t>(i * dv + c)], at(2 * i, c) | at(2 * i + 1, c)
                                                                                    << 16)
              << "pair " << i << " channel " << c;
        }
      }
      // A non-finite value inside the block is reported; one past its end is not read.
      const std::size_t inside = static_cast<std::size_t>(head_stride + (end - 1) * row_stride + 3);
      const std::uint16_t saved = data[inside];
      data[inside] = 0x7f80;  // +inf
      EXPECT_FALSE(ops().pack_values(v, 1, key0, end, dv, pairs.data()));
      data[inside] = saved;
      if (end < len) {
        const std::size_t past = static_cast<std::size_t>(head_stride + end * row_stride);
        data[past] = 0x7fc0;  // NaN
        EXPECT_TRUE(ops().pack_values(v, 1, key0, end, dv, pairs.data()));
        data[past] = saved;
      }
    }
  }
}

// Packs `values` ([kBlock][dv] bf16) as the walk's key pairs.
std::vector<std::uint32_t> pairs_of(const std::vector<std::uint16_t>& values, std::int64_t dv) {
  std::vector<std::uint32_t> pairs(static_cast<std::size_t>(kBlock / 2 * dv));
  for (std::int64_t i = 0; i < kBlock / 2; ++i) {
    for (std::int64_t c = 0; c < dv; ++c) {
      pairs[static_cast<std::size_t>(i * dv + c)] =
          values[static_cast<std::size_t>(2 * i * dv + c)] |
          static_cast<std::uint32_t>(values[static_cast<std::size_t>((2 * i + 1) * dv + c)]) << 16;
    }
  }
  return pairs;
}

// Weights in [0, 1], as the walk's are (exp of score minus the maximum).
std::vector<float> random_weights(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> w(n);
  for (float& x : w) x = unit(rng);
  return w;
}

TEST_P(WalkDotPerTarget, RowsWeightedSumsAreTheRoundedWeightsTimesTheValues) {
  if (absent()) GTEST_SKIP() << GetParam() << " has no bf16 dot product";
  for (const std::int64_t dv : {64, 128}) {
    for (const std::int64_t rows : {1, 5, 6, 7, 16}) {
      SCOPED_TRACE("dv " + std::to_string(dv) + " rows " + std::to_string(rows));
      const auto values = random_bf16(static_cast<std::size_t>(kBlock * dv), 4);
      const auto pairs = pairs_of(values, dv);
      const std::int64_t w_stride = kBlock + 3, o_stride = dv + 16;
      std::vector<float> w = random_weights(static_cast<std::size_t>(rows * w_stride), 5);
      for (std::int64_t r = 0; r < rows; ++r) {  // keys past 40 are not the row's: zero
        std::fill_n(w.begin() + r * w_stride + 40, kBlock - 40, 0.0f);
      }
      const std::vector<float> alpha = random_weights(static_cast<std::size_t>(rows), 6);
      std::vector<float> o = random_weights(static_cast<std::size_t>(rows * o_stride), 7);
      const std::vector<float> before = o;
      std::vector<std::uint32_t> probs(static_cast<std::size_t>(rows * kBlock / 2));
      ops().rows_axpy(w.data(), w_stride, pairs.data(), dv, alpha.data(), rows, o.data(), o_stride,
                      probs.data());
      for (std::int64_t r = 0; r < rows; ++r) {
        // Every row's rounded weights stay in probs, as masked_axpy takes them.
        for (std::int64_t j = 0; j < kBlock; ++j) {
          const std::uint32_t pair = probs[static_cast<std::size_t>(r * kBlock / 2 + j / 2)];
          ASSERT_EQ(static_cast<std::uint16_t>(j % 2 ? pair >> 16 : pair & 0xffffu),
                    float_to_bf16(w[static_cast<std::size_t>(r * w_stride + j)]))
              << "row " << r << " key " << j;
        }
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < o_stride; ++c) {
          const std::size_t at = static_cast<std::size_t>(r * o_stride + c);
          if (c >= dv) {  // the gap between rows is left alone
            EXPECT_EQ(o[at], before[at]);
            continue;
          }
          double exact = static_cast<double>(before[at]) * alpha[static_cast<std::size_t>(r)];
          double size = std::abs(exact);
          for (std::int64_t j = 0; j < kBlock; ++j) {
            const double p = bf16(float_to_bf16(w[static_cast<std::size_t>(r * w_stride + j)])) *
                             bf16(values[static_cast<std::size_t>(j * dv + c)]);
            exact += p;
            size += std::abs(p);
          }
          EXPECT_NEAR(o[at], exact, size * 1e-6 * kBlock) << "row " << r << " channel " << c;
        }
      }
    }
  }
}

TEST_P(WalkDotPerTarget, GatheredWeightedSumsAreTheRoundedWeightsTimesTheirKeys) {
  if (absent()) GTEST_SKIP() << GetParam() << " has no bf16 dot product";
  std::mt19937_64 rng(8);
  for (const std::int64_t dv : {64, 128, 192}) {
    for (const std::int64_t n : {0, 1, 2, 17, 40, 64}) {
      SCOPED_TRACE("dv " + std::to_string(dv) + " keys " + std::to_string(n));
      const auto values = random_bf16(static_cast<std::size_t>(kBlock * dv), 9);
      const auto pairs = pairs_of(values, dv);
      // n distinct keys of the block in ascending order, both halves of
      // pairs and lone keys among them.
      std::vector<std::int32_t> all(kBlock);
      for (std::int32_t i = 0; i < kBlock; ++i) all[static_cast<std::size_t>(i)] = i;
      std::shuffle(all.begin(), all.end(), rng);
      std::vector<std::int32_t> index(all.begin(), all.begin() + n);
      std::sort(index.begin(), index.end());
      const std::vector<float> p = random_weights(static_cast<std::size_t>(n), 10);
      const float alpha = 0.75f;
      std::vector<float> acc = random_weights(static_cast<std::size_t>(dv), 11);
      const std::vector<float> before = acc;
      ops().gather_axpy(p.data(), index.data(), n, pairs.data(), dv, alpha, acc.data());
      for (std::int64_t c = 0; c < dv; ++c) {
        double exact = static_cast<double>(before[static_cast<std::size_t>(c)]) * alpha;
        double size = std::abs(exact);
        for (std::int64_t i = 0; i < n; ++i) {
          const double term =
              bf16(float_to_bf16(p[static_cast<std::size_t>(i)])) *
              bf16(values[static_cast<std::size_t>(index[static_cast<std::size_t>(i)] * dv + c)]);
          exact += term;
          size += std::abs(term);
        }
        EXPECT_NEAR(acc[static_cast<std::size_t>(c)], exact, size * 1e-6 * kBlock)
            << "channel " << c;
      }
    }
  }
}

// The weighted sum over the keys of a bit mask, from a row of rounded
// weights (rows_axpy's probs), and the sum of the same keys' f32 weights:
// masks of every density, both halves of pairs and lone keys, each 32-key
// half alone.
TEST_P(WalkDotPerTarget, MaskedWeightedSumsTakeOnlyTheMasksKeys) {
  if (absent()) GTEST_SKIP() << GetParam() << " has no bf16 dot product";
  std::mt19937_64 rng(12);
  const std::vector<float> w = random_weights(kBlock, 13);
  std::vector<std::uint32_t> probs(kBlock / 2);
  for (std::int64_t j = 0; j < kBlock; ++j) {
    const std::uint32_t bits = float_to_bf16(w[static_cast<std::size_t>(j)]);
    probs[static_cast<std::size_t>(j / 2)] |= j % 2 ? bits << 16 : bits;
  }
  std::vector<std::uint64_t> masks = {0,
                                      ~std::uint64_t{0},
                                      0xffffffffu,
                                      0xffffffff00000000u,
                                      std::uint64_t{1} << 63,
                                      0x5555555555555555u,
                                      0x6u};
  for (int i = 0; i < 8; ++i) masks.push_back(rng() & rng());  // about a quarter of the keys
  for (const std::int64_t dv : {64, 128, 192}) {
    const auto values = random_bf16(static_cast<std::size_t>(kBlock * dv), 14);
    const auto pairs = pairs_of(values, dv);
    for (const std::uint64_t keys : masks) {
      SCOPED_TRACE("dv " + std::to_string(dv) + " keys " + std::to_string(keys));
      const float alpha = 0.5f;
      std::vector<float> acc = random_weights(static_cast<std::size_t>(dv), 15);
      const std::vector<float> before = acc;
      const float sum =
          ops().masked_axpy(w.data(), probs.data(), keys, pairs.data(), dv, alpha, acc.data());
      double exact_sum = 0.0;
      for (std::int64_t j = 0; j < kBlock; ++j) {
        if (keys >> j & 1) exact_sum += w[static_cast<std::size_t>(j)];
      }
      EXPECT_NEAR(sum, exact_sum, 1e-6 * kBlock);
      for (std::int64_t c = 0; c < dv; ++c) {
        double exact = static_cast<double>(before[static_cast<std::size_t>(c)]) * alpha;
        double size = std::abs(exact);
        for (std::int64_t j = 0; j < kBlock; ++j) {
          if (!(keys >> j & 1)) continue;
          const double term = bf16(float_to_bf16(w[static_cast<std::size_t>(j)])) *
                              bf16(values[static_cast<std::size_t>(j * dv + c)]);
          exact += term;
          size += std::abs(term);
        }
        EXPECT_NEAR(acc[static_cast<std::size_t>(c)], exact, size * 1e-6 * kBlock)
            << "channel " << c;
      }
    }
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(WalkDotPerTarget);

}  // namespace
}  // namespace tilesplash
