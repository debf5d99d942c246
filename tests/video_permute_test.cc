// Token-major permutation: every row lands where the definition says, text
// rows stay, the inverse restores the input bit for bit, for every dtype,
// strided layouts and thread counts.
#include <gtest/gtest.h>

#include <stdexcept>

#include "support/attention_check.h"
#include "support/random_data.h"
#include "tilesplash/video.h"
#include "video_test_util.h"

namespace tilesplash {
namespace {

using test::HostTensor;

TEST(VideoPermute, RowsLandWhereTheDefinitionSaysAndRoundTrip) {
  for (const VideoGeometry& g : test::small_geometries()) {
    const test::RefVideo ref(g);
    const std::int64_t n = g.tokens(), heads = 3, dim = 5;
    for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const bool strided : {false, true}) {
        HostTensor src(dtype, heads, n, dim);
        src.fill_normal(11);
        if (strided) src = src.relayout(dim + 2, heads * (dim + 2) + 1);  // [N, H, d] with gaps
        HostTensor token_major(dtype, heads, n, dim);
        HostTensor back(dtype, heads, n, dim, n * (dim + 3), dim + 3);
        back.fill_storage(-7.0f);
        for (const int threads : {1, 2}) {
          permute_to_token_major(g, src.view(), token_major.mutable_view(), threads);
          for (std::int64_t h = 0; h < heads; ++h) {
            for (std::int64_t r = 0; r < n; ++r) {
              for (std::int64_t c = 0; c < dim; ++c) {
                ASSERT_EQ(token_major.get(h, ref.token_major(r), c), src.get(h, r, c))
                    << g.to_string() << " row " << r;
              }
            }
          }
          permute_to_frame_major(g, token_major.view(), back.mutable_view(), threads);
          ASSERT_TRUE(test::bitwise_equal(back, src)) << g.to_string();
        }
      }
    }
  }
}

TEST(VideoPermute, LargeGeometryRoundTrip) {
  // More rows than one work chunk, text after the video.
  const VideoGeometry g{9, 20, 30, 77, TextPlacement::kAfter};
  HostTensor src(DType::kBF16, 2, g.tokens(), 16);
  src.fill_normal(5);
  HostTensor mid(DType::kBF16, 2, g.tokens(), 16), back(DType::kBF16, 2, g.tokens(), 16);
  permute_to_token_major(g, src.view(), mid.mutable_view());
  permute_to_frame_major(g, mid.view(), back.mutable_view());
  EXPECT_TRUE(test::bitwise_equal(back, src));
  const test::RefVideo ref(g);
  for (const std::int64_t r : {std::int64_t{0}, std::int64_t{1}, std::int64_t{599},
                               std::int64_t{600}, std::int64_t{5399}, g.tokens() - 1}) {
    EXPECT_EQ(mid.get(1, ref.token_major(r), 3), src.get(1, r, 3)) << r;
  }
}

TEST(VideoPermute, RejectsMismatchedViews) {
  const VideoGeometry g{3, 2, 2, 0, TextPlacement::kNone};
  HostTensor a(DType::kF32, 1, g.tokens(), 8);
  HostTensor short_one(DType::kF32, 1, g.tokens() - 1, 8);
  HostTensor other_dtype(DType::kBF16, 1, g.tokens(), 8);
  HostTensor other_dim(DType::kF32, 1, g.tokens(), 4);
  EXPECT_THROW(permute_to_token_major(g, short_one.view(), a.mutable_view()),
               std::invalid_argument);
  EXPECT_THROW(permute_to_token_major(g, a.view(), other_dtype.mutable_view()),
               std::invalid_argument);
  EXPECT_THROW(permute_to_frame_major(g, a.view(), other_dim.mutable_view()),
               std::invalid_argument);
  try {
    permute_to_token_major(g, short_one.view(), a.mutable_view());
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("src.len must equal"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tilesplash
