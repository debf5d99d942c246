// Key padding: Mask::key_range's tiles (golden grid and brute force), its
// SPEC, and VideoAttention::forward's key_limit against the double-precision
// reference of each head's mask ANDed with the real keys, for every method,
// forced and routed, dense included, f32 and bf16.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/attention_check.h"
#include "support/random_data.h"
#include "support/reference.h"
#include "tilesplash/mask.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/plan.h"
#include "tilesplash/routing.h"

namespace tilesplash {
namespace {

using test::HostTensor;

std::vector<std::string> kind_grid(const TilePlan& plan) {
  std::vector<std::string> grid;
  for (std::int64_t qb = 0; qb < plan.num_q_blocks(); ++qb) {
    std::string row;
    for (std::int64_t kb = 0; kb < plan.num_kv_blocks(); ++kb) row += to_char(plan.kind(qb, kb));
    grid.push_back(row);
  }
  return grid;
}

TEST(KeyRange, GoldenGridSkipsThePadding) {
  const TilePlan plan = TilePlan::build(Mask::key_range(0, 40), 64, 64, {16, 16});
  EXPECT_EQ(kind_grid(plan), (std::vector<std::string>(4, "FFPE")));
  EXPECT_EQ(plan.stats().distinct_partial, 1);
  EXPECT_EQ(plan.stats().kept_pairs, 64 * 40);
  // Composed with a band: the padding's tiles stay empty whatever the band keeps.
  const TilePlan banded =
      TilePlan::build(Mask::local(20, 20) & Mask::key_range(0, 40), 64, 64, {16, 16});
  EXPECT_EQ(kind_grid(banded), (std::vector<std::string>{"FPPE", "PFPE", "PPPE", "EPPE"}));
}

TEST(KeyRange, TilesAndRowsMatchBruteForce) {
  for (const auto& [begin, end] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {0, 0}, {0, 1}, {0, 37}, {5, 37}, {37, 37}, {0, 64}, {3, 80}}) {
    const Mask mask = Mask::key_range(begin, end);
    for (const std::int64_t block : {std::int64_t{1}, std::int64_t{7}, std::int64_t{16}}) {
      for (std::int64_t q0 = 0; q0 < 50; q0 += 13) {
        for (std::int64_t k0 = 0; k0 < 64; k0 += block) {
          const IndexRange rows{q0, q0 + 5}, cols{k0, std::min<std::int64_t>(k0 + block, 64)};
          bool kept = false, dropped = false;
          for (std::int64_t q = rows.begin; q < rows.end; ++q) {
            for (std::int64_t k = cols.begin; k < cols.end; ++k) {
              const bool keep = k >= begin && k < end;
              EXPECT_EQ(mask.keeps(q, k), keep);
              (keep ? kept : dropped) = true;
            }
          }
          const TileKind expected = kept && dropped ? TileKind::kPartial
                                    : kept          ? TileKind::kFull
                                                    : TileKind::kEmpty;
          EXPECT_EQ(mask.classify(rows, cols), expected) << begin << ".." << end << " " << k0;
        }
      }
      std::vector<std::uint8_t> row(64);
      mask.eval_row(9, 0, 64, row.data());
      for (std::int64_t k = 0; k < 64; ++k) EXPECT_EQ(row[k] != 0, k >= begin && k < end);
    }
    const IndexRange hull = mask.kv_hull({0, 10}, 64);  // holds every kept key
    if (begin < std::min<std::int64_t>(end, 64)) {
      EXPECT_LE(hull.begin, begin);
      EXPECT_GE(hull.end, std::min<std::int64_t>(end, 64));
    }
  }
}

TEST(KeyRange, SpecAndBadArguments) {
  EXPECT_EQ(parse_mask_spec("keys:end=40"), Mask::key_range(0, 40));
  EXPECT_EQ(parse_mask_spec("keys:begin=3,end=40"), Mask::key_range(3, 40));
  EXPECT_EQ(parse_mask_spec(Mask::key_range(3, 40).to_string()), Mask::key_range(3, 40));
  EXPECT_EQ(parse_mask_spec("local:left=4 & keys:end=9"),
            Mask::local(4, std::nullopt) & Mask::key_range(0, 9));
  EXPECT_NE(Mask::key_range(0, 40), Mask::key_range(0, 41));
  EXPECT_THROW(parse_mask_spec("keys"), std::invalid_argument);
  EXPECT_THROW(Mask::key_range(-1, 4), std::invalid_argument);
  EXPECT_THROW(Mask::key_range(5, 4), std::invalid_argument);
}

struct Case {
  std::string method;
  std::optional<std::string> force;  // nullopt: routed
};

// Every head of a key-padded call equals masked attention under its mask AND
// the real keys; padded keys change nothing.
void check_padded(const VideoGeometry& g, const Case& c, DType dtype, std::int64_t limit) {
  const std::int64_t heads = 3, d = 16, n = g.tokens();
  SCOPED_TRACE(c.method + " force " + c.force.value_or("none") + " " +
               std::string(to_string(dtype)) + " limit " + std::to_string(limit));
  HostTensor q(dtype, heads, n, d), k(dtype, heads, n, d), v(dtype, heads, n, d);
  q.fill_normal(11);
  k.fill_normal(12);
  v.fill_normal(13);
  MethodOptions method;
  method.density = 0.3;
  method.sink = c.method != "sta" && c.method != "svg2";
  VideoAttentionOptions options = method_attention_options(c.method, g, method);
  if (c.force) options.force = HeadMask(*c.force);
  options.router.samples = 8;
  options.blocks = {16, 64};
  VideoAttention attention(g, options);
  HostTensor out(DType::kF32, heads, n, d);
  std::vector<float> lse(static_cast<std::size_t>(heads * n));
  const LayerReport report = attention.forward(
      {q.view(), k.view(), v.view(), out.mutable_view(), lse.data()}, 1, 2, limit);
  std::vector<test::ReferenceHead> reference;
  for (std::int64_t h = 0; h < heads; ++h) {
    const HeadMask& choice = report.heads[static_cast<std::size_t>(h)].choice;
    const Mask mask = choice.name() == "svg2" ? attention.head_mask(h) : attention.mask(choice);
    reference.push_back(test::reference_attention(mask & Mask::key_range(0, limit), q.view(),
                                                  k.view(), v.view(), h));
  }
  EXPECT_TRUE(test::matches_reference(reference, out, lse.data(),
                                      test::tolerance_for(dtype, DType::kF32), v.max_abs()));
}

TEST(KeyPadding, EveryMethodEqualsTheReferenceOfItsMaskOnTheRealKeys) {
  // Text after the video (HunyuanVideo's layout): 4 x 3 x 4 video, 9 text slots.
  const VideoGeometry g{4, 3, 4, 9, TextPlacement::kAfter};
  const std::int64_t video = g.video_tokens();
  const std::vector<Case> cases = {
      {"svg", "dense"},     {"svg", "spatial"},    {"svg", "temporal"},   {"svg", std::nullopt},
      {"radial", "radial"}, {"sta", std::nullopt}, {"mix", std::nullopt}, {"svg2", "svg2"},
  };
  for (const Case& c : cases) {
    for (const std::int64_t limit : {video, video + 4, g.tokens() - 1}) {
      check_padded(g, c, DType::kF32, limit);
    }
  }
  check_padded(g, {"svg", "temporal"}, DType::kBF16, video + 2);
  check_padded(g, {"svg", "dense"}, DType::kBF16, video + 7);
}

TEST(KeyPadding, NoPaddingIsTheUnpaddedCallBitForBit) {
  const VideoGeometry g{3, 2, 4, 5, TextPlacement::kAfter};
  HostTensor q(DType::kF32, 2, g.tokens(), 8), k(DType::kF32, 2, g.tokens(), 8),
      v(DType::kF32, 2, g.tokens(), 8);
  q.fill_normal(1);
  k.fill_normal(2);
  v.fill_normal(3);
  VideoAttentionOptions options;
  options.router.samples = 4;
  VideoAttention attention(g, options);
  HostTensor plain(DType::kF32, 2, g.tokens(), 8), full(DType::kF32, 2, g.tokens(), 8);
  attention.forward({q.view(), k.view(), v.view(), plain.mutable_view()}, 0, 0);
  attention.forward({q.view(), k.view(), v.view(), full.mutable_view()}, 0, 0, g.tokens());
  EXPECT_EQ(plain.storage(), full.storage());
}

TEST(KeyPadding, OnlyTrailingTextCanBePadding) {
  HostTensor q(DType::kF32, 1, 29, 8);
  q.fill_normal(1);
  HostTensor out(DType::kF32, 1, 29, 8);
  const auto message = [&](const VideoGeometry& g, std::int64_t limit) {
    VideoAttention attention(g);
    try {
      attention.forward({q.view(), q.view(), q.view(), out.mutable_view()}, 0, 0, limit);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const VideoGeometry before{4, 3, 2, 5, TextPlacement::kBefore};
  const VideoGeometry after{4, 3, 2, 5, TextPlacement::kAfter};
  EXPECT_NE(message(before, 27).find("only text after the video"), std::string::npos);
  EXPECT_NE(message(after, 23).find("key_limit must be in [24, 29]"), std::string::npos);
  EXPECT_NE(message(after, 30).find("key_limit must be in [24, 29]"), std::string::npos);
  EXPECT_EQ(message(before, 29), "no error");
  EXPECT_EQ(message(after, 24), "no error");
}

}  // namespace
}  // namespace tilesplash
