// Sparse against dense (evaluation.h): head by head and layer at once agree,
// forced-dense sparse sides have cosine 1, and the dense side is dense.
#include "tilesplash/evaluation.h"

#include <gtest/gtest.h>

#include "tilesplash/workload.h"

namespace tilesplash {
namespace {

VideoWorkload f32_workload(const VideoGeometry& g, std::int64_t heads, std::int64_t head_dim) {
  WorkloadOptions options;
  options.heads = heads;
  options.head_dim = head_dim;
  options.dtype = DType::kF32;
  return VideoWorkload(g, options);
}

TEST(Evaluation, HeadByHeadEqualsTheLayerCall) {
  const VideoGeometry g{6, 4, 4};
  const VideoWorkload workload = f32_workload(g, 3, 32);
  VideoAttentionOptions options;
  options.density = 0.3;
  DenseComparisonOptions layer;
  const DenseComparison a =
      compare_with_dense(g, options, workload.q(), workload.k(), workload.v(), layer);
  DenseComparisonOptions heads;
  heads.head_by_head = true;
  int calls = 0;
  heads.on_head = [&](std::int64_t, bool) { ++calls; };
  const DenseComparison b =
      compare_with_dense(g, options, workload.q(), workload.k(), workload.v(), heads);
  EXPECT_EQ(calls, 6);
  ASSERT_EQ(a.cosine.size(), 3u);
  EXPECT_EQ(a.cosine, b.cosine);
  for (std::size_t h = 0; h < 3; ++h) {
    EXPECT_EQ(a.sparse.heads[h].choice, b.sparse.heads[h].choice);
    EXPECT_EQ(b.sparse.heads[h].head, static_cast<std::int64_t>(h));
    EXPECT_EQ(a.dense->heads[h].choice, HeadMask::kDense);
    EXPECT_GT(a.cosine[h], 0.9);
    EXPECT_LT(a.cosine[h], 1.0);
  }
}

TEST(Evaluation, ForcedDenseMatchesDenseAndRepeatsReportMedians) {
  const VideoGeometry g{3, 4, 4};
  const VideoWorkload workload = f32_workload(g, 2, 16);
  VideoAttentionOptions options;
  options.force = HeadMask::kDense;
  DenseComparisonOptions compare;
  compare.repeats = 3;
  const DenseComparison c =
      compare_with_dense(g, options, workload.q(), workload.k(), workload.v(), compare);
  for (double cosine : c.cosine) EXPECT_DOUBLE_EQ(cosine, 1.0);
  compare.compare_dense = false;
  const DenseComparison sparse_only =
      compare_with_dense(g, options, workload.q(), workload.k(), workload.v(), compare);
  EXPECT_FALSE(sparse_only.dense);
  EXPECT_TRUE(sparse_only.cosine.empty());
  const float a[] = {1, 0}, b[] = {0, 1}, z[] = {0, 0};
  EXPECT_DOUBLE_EQ(cosine_similarity(a, a, 2), 1.0);
  EXPECT_DOUBLE_EQ(cosine_similarity(a, b, 2), 0.0);
  EXPECT_DOUBLE_EQ(cosine_similarity(a, z, 2), 0.0);
}

}  // namespace
}  // namespace tilesplash
