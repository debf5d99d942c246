// Radial Attention against its definition: the mask and its plans against a
// brute-force scan of the predicate on small geometries (ragged frames, text
// before / after / none, sink on / off, strides that make the subsampling
// rule bite), exact pair counts, the paper's block vote against a direct
// materialised port, the decay search, SPEC round trips, and attention under
// it against the double-precision reference.
#include "tilesplash/radial.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "family_check.h"
#include "family_reference.h"
#include "support/attention_check.h"
#include "support/random_data.h"
#include "support/reference.h"
#include "support/targets.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/routing.h"

namespace tilesplash {
namespace {

struct RadialCase {
  VideoGeometry geometry;
  RadialOptions options;
};

std::vector<RadialCase> radial_cases() {
  const std::vector<VideoGeometry> geometries = {
      {17, 2, 3, 3, TextPlacement::kAfter},  // P = 6: strides 2, 4 and 8 all occur
      {9, 1, 5, 4, TextPlacement::kBefore},  // P = 5
      {12, 3, 3, 0, TextPlacement::kNone},   // P = 9
      {5, 2, 2, 0, TextPlacement::kNone},    // few frames
      {1, 3, 4, 2, TextPlacement::kAfter},   // one frame
      {20, 1, 1, 0, TextPlacement::kNone},   // one patch per frame
  };
  std::vector<RadialCase> cases;
  for (const VideoGeometry& g : geometries) {
    for (const RadialOptions o :
         {RadialOptions{0.2, 4, false}, RadialOptions{0.95, 3, true}, RadialOptions{3.0, 1, false},
          RadialOptions{0.0, 2, true}, RadialOptions{0.5, 128, false}}) {
      cases.push_back({g, o});
    }
  }
  return cases;
}

std::string describe(const RadialCase& c) { return radial_mask(c.geometry, c.options).to_string(); }

TEST(Radial, PlanAndMaskMatchTheDefinition) {
  for (const RadialCase& c : radial_cases()) {
    const Mask mask = radial_mask(c.geometry, c.options);
    EXPECT_TRUE(mask.is_analytic());
    const test::RefRadial ref(c.geometry, c.options.decay, c.options.block, c.options.sink);
    test::audit_mask(
        mask, c.geometry.tokens(), [&](std::int64_t q, std::int64_t k) { return ref.keeps(q, k); },
        describe(c));
  }
}

TEST(Radial, SubsamplingRuleDropsFramePairs) {
  // P = 6: 2^bitlen(6) = 8, so L(2) = L(3) = 2 and B = 4 gives stride 2:
  // d = 2 is kept (its window), d = 3 is not at all.
  const VideoGeometry g{8, 2, 3, 0, TextPlacement::kNone};
  const Mask mask = radial_mask(g, {0.2, 4, false});
  EXPECT_TRUE(mask.keeps(2 * 6, 0));                            // frame 2 -> frame 0, r = c
  EXPECT_FALSE(mask.keeps(3 * 6, 0));                           // frame 3 -> frame 0
  EXPECT_TRUE(radial_mask(g, {0.2, 4, true}).keeps(3 * 6, 0));  // the sink keeps frame 0
}

TEST(Radial, CountsDensityAndDecaySearch) {
  for (const RadialCase& c : radial_cases()) {
    const test::RefRadial ref(c.geometry, c.options.decay, c.options.block, c.options.sink);
    std::int64_t kept = 0;
    const std::int64_t n = c.geometry.tokens();
    for (std::int64_t q = 0; q < n; ++q) {
      for (std::int64_t k = 0; k < n; ++k) kept += ref.keeps(q, k) ? 1 : 0;
    }
    EXPECT_EQ(radial_kept_pairs(c.geometry, c.options), kept) << describe(c);
    EXPECT_DOUBLE_EQ(radial_density(c.geometry, c.options),
                     static_cast<double>(kept) / static_cast<double>(n * n));
  }
  const VideoGeometry wan = video_preset("wan2.1-1.3b-480p").geometry;
  double previous = 0.0;
  for (const double target : {0.35, 0.5, 0.8}) {
    const double decay = radial_decay_for_density(wan, target, {0.0, 128, true});
    const double density = radial_density(wan, {decay, 128, true});
    EXPECT_NEAR(density, target, 0.01) << target;
    EXPECT_GE(density, previous);
    previous = density;
  }
  // Below radial's floor (frames at d <= 1, windows of B: about 27% at
  // 480p) the floor it is.
  EXPECT_EQ(radial_decay_for_density(wan, 0.2), 0.0);
  EXPECT_THROW(radial_decay_for_density(wan, 0.0), std::invalid_argument);
}

// The paper's gen_log_mask_shrinked + shrinkMaskStrict on a materialised
// token mask, transcribed loop by loop (video first, text after).
double upstream_block_density(const VideoGeometry& g, const RadialOptions& o) {
  const test::RefRadial ref({g.frames, g.height, g.width, 0, TextPlacement::kNone}, o.decay,
                            o.block, o.sink);
  const std::int64_t f = g.frames, p = g.tokens_per_frame(), b = o.block;
  const std::int64_t s = (g.tokens() + b - 1) / b * b, grid = s / b;
  std::vector<std::vector<bool>> final_mask(grid, std::vector<bool>(grid, false));
  const std::int64_t border = g.video_tokens() / b;
  for (std::int64_t i = border; i < grid; ++i) {
    for (std::int64_t j = 0; j < grid; ++j) final_mask[i][j] = final_mask[j][i] = true;
  }
  for (std::int64_t i = 0; i < f; ++i) {
    for (std::int64_t j = 0; j < f; ++j) {
      const std::int64_t rem_row = (i * p) % b, rem_col = (j * p) % b;
      const std::int64_t rows = rem_row + ((p - 1) / b + 1) * b;
      const std::int64_t cols = rem_col + ((p - 1) / b + 1) * b;
      std::vector<std::vector<bool>> padded(rows, std::vector<bool>(cols, false));
      for (std::int64_t r = 0; r < p; ++r) {
        for (std::int64_t c = 0; c < p; ++c) {
          padded[rem_row + r][rem_col + c] = ref.keeps(i * p + r, j * p + c);
        }
      }
      const std::int64_t num = rows / b;  // shrinkMaskStrict cuts to num * b square
      for (std::int64_t bi = 0; bi < num; ++bi) {
        for (std::int64_t bj = 0; bj < num; ++bj) {
          double nonzero = 0, high = 0;
          for (std::int64_t c = 0; c < b; ++c) {
            double sum = 0;
            for (std::int64_t r = 0; r < b; ++r) sum += padded[bi * b + r][bj * b + c] ? 1 : 0;
            const double density = sum / static_cast<double>(b);
            nonzero += density > 0 ? 1 : 0;
            high += density > 1.0 / 3.0 ? 1 : 0;
          }
          if (high / (nonzero + 1e-9) > 0.6) {
            const std::int64_t row = (i * p) / b + bi, col = (j * p) / b + bj;
            final_mask[row][col] = true;
          }
        }
      }
    }
  }
  double count = 0;
  for (const auto& row : final_mask) {
    for (const bool kept : row) count += kept ? 1 : 0;
  }
  return count / static_cast<double>(grid * grid);
}

TEST(Radial, BlockVoteMatchesThePapersCode) {
  const std::vector<std::pair<VideoGeometry, RadialOptions>> cases = {
      {{12, 4, 5, 0, TextPlacement::kNone}, {0.2, 8, true}},
      {{9, 3, 7, 11, TextPlacement::kAfter}, {0.95, 16, false}},
      {{6, 5, 5, 0, TextPlacement::kNone}, {0.5, 32, false}},
      {{17, 2, 3, 3, TextPlacement::kAfter}, {0.2, 4, false}},
  };
  for (const auto& [g, o] : cases) {
    EXPECT_DOUBLE_EQ(radial_block_density(g, o), upstream_block_density(g, o))
        << radial_mask(g, o).to_string();
  }
  // Wan 480p: the vote keeps blocks that the token mask only partly fills.
  const VideoGeometry wan = video_preset("wan2.1-1.3b-480p").geometry;
  const double block = radial_block_density(wan, {0.2, 128, true});
  EXPECT_GT(block, 0.0);
  EXPECT_LE(block, 1.0);
}

TEST(Radial, SpecRoundTripsAndErrors) {
  const std::vector<std::string> canonical = {
      "radial:frames=4,height=2,width=3,decay=0.2",
      "radial:frames=4,height=2,width=3,text=5,text_at=before,decay=0.95,block=64,sink",
      "radial:frames=21,height=30,width=52,decay=0.2,sink",
      "radial:frames=3,height=1,width=1,decay=0|causal",
  };
  for (const std::string& text : canonical) {
    const Mask mask = parse_mask_spec(text);
    EXPECT_EQ(mask.to_string(), text);
    EXPECT_EQ(parse_mask_spec(mask.to_string()), mask);
    EXPECT_EQ(parse_mask_spec(mask.to_string()).hash(), mask.hash());
  }
  EXPECT_EQ(parse_mask_spec("radial:preset=wan2.1-1.3b-480p,decay=0.2,sink"),
            radial_mask(video_preset("wan2.1-1.3b-480p").geometry, {0.2, 128, true}));
  const Mask by_density = parse_mask_spec("radial:frames=8,height=4,width=8,density=0.6,block=4");
  const RadialMaskInfo info = *radial_mask_info(by_density);
  EXPECT_NEAR(radial_density(info.geometry, info.options), 0.6, 0.03);
  EXPECT_EQ(info.options.block, 4);
  const std::vector<std::pair<std::string, std::string>> errors = {
      {"radial", "radial: expected ':' and parameters"},
      {"radial:frames=2,height=2,width=2", "neither of 'decay' and 'density'"},
      {"radial:frames=2,height=2,width=2,decay=1,density=0.5", "both of 'decay' and 'density'"},
      {"radial:frames=2,height=2,width=2,decay=-1", "'decay' must be a finite number >= 0"},
      {"radial:frames=2,height=2,width=2,decay=1,block=0", "'block' must be an integer in [1"},
      {"radial:frames=2,height=2,width=2,decay=1,band=3", "unknown key 'band'"},
      {"radial:frames=2,height=2,decay=1", "missing 'width'"},
  };
  for (const auto& [spec, message] : errors) {
    try {
      parse_mask_spec(spec);
      ADD_FAILURE() << "accepted " << spec;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos)
          << spec << " gave: " << e.what();
    }
  }
  EXPECT_THROW(radial_mask({2, 2, 2}, {std::nan(""), 128, false}), std::invalid_argument);
  EXPECT_THROW(TilePlan::build(radial_mask({2, 2, 2}), 9, 9, {4, 4}), std::invalid_argument);
}

class RadialPerTarget : public test::TargetTest {};

TEST_P(RadialPerTarget, AttentionEqualsTheReference) {
  for (const auto& [g, o] : std::vector<std::pair<VideoGeometry, RadialOptions>>{
           {{17, 2, 3, 3, TextPlacement::kAfter}, {0.2, 4, true}},
           {{9, 3, 5, 6, TextPlacement::kBefore}, {0.95, 8, false}}}) {
    const std::int64_t n = g.tokens(), heads = 2, d = 32;
    for (const DType dtype : {DType::kF32, DType::kBF16}) {
      test::HostTensor q(dtype, heads, n, d), k(dtype, heads, n, d), v(dtype, heads, n, d);
      q.fill_normal(11);
      k.fill_normal(12);
      v.fill_normal(13);
      const Mask mask = radial_mask(g, o);
      const std::vector<test::ReferenceHead> reference =
          test::reference_all_heads(mask, q, k, v, std::nullopt);
      const TilePlan plan = TilePlan::build(mask, n, n, {16, 64});
      const test::Outputs got = test::run_forward(plan, q, k, v, DType::kF32, {});
      EXPECT_TRUE(test::matches_reference(reference, got.out, got.lse.data(),
                                          test::tolerance_for(dtype, DType::kF32), v.max_abs()))
          << mask.to_string();
      // The front door with radial as its one candidate gives the same.
      VideoAttentionOptions options;
      options.candidates = {radial_candidate(g, o)};
      options.blocks = {16, 64};
      test::HostTensor out(DType::kF32, heads, n, d);
      std::vector<float> lse(static_cast<std::size_t>(heads * n));
      const LayerReport report =
          VideoAttention(g, options)
              .forward({q.view(), k.view(), v.view(), out.mutable_view(), lse.data()});
      EXPECT_EQ(report.heads[0].choice, HeadMask("radial"));
      EXPECT_DOUBLE_EQ(report.heads[0].density, radial_density(g, o));
      EXPECT_TRUE(test::matches_reference(reference, out, lse.data(),
                                          test::tolerance_for(dtype, DType::kF32), v.max_abs()));
    }
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(RadialPerTarget);

}  // namespace
}  // namespace tilesplash
