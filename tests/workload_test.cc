// The synthetic video workload: reproducible from its seed whatever the
// thread count, the default 30 / 65 / 5 head mix, dtypes that are roundings of
// one another, and attention weight where the planted type says.
#include "tilesplash/workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "support/reference.h"

namespace tilesplash {
namespace {

const VideoGeometry kGeometry{6, 4, 5, 7, TextPlacement::kBefore};

bool same_bytes(const TensorView& a, const TensorView& b) {
  const std::size_t bytes = static_cast<std::size_t>(a.heads * a.len * a.dim * size_of(a.dtype));
  return std::memcmp(a.data, b.data, bytes) == 0;
}

TEST(Workload, ReproducibleAndThreadIndependent) {
  WorkloadOptions options;
  options.heads = 3;
  options.head_dim = 16;
  options.seed = 5;
  options.threads = 1;
  const VideoWorkload one(kGeometry, options);
  options.threads = 2;
  const VideoWorkload two(kGeometry, options);
  EXPECT_TRUE(same_bytes(one.q(), two.q()));
  EXPECT_TRUE(same_bytes(one.k(), two.k()));
  EXPECT_TRUE(same_bytes(one.v(), two.v()));
  EXPECT_EQ(one.planted(), two.planted());
  options.seed = 6;
  EXPECT_FALSE(same_bytes(one.q(), VideoWorkload(kGeometry, options).q()));
  EXPECT_EQ(one.q().len, kGeometry.tokens());
  EXPECT_EQ(one.q().dtype, DType::kBF16);
}

TEST(Workload, DefaultMixAndOverride) {
  WorkloadOptions options;
  options.head_dim = 8;
  for (const auto& [heads, spatial, ambiguous] :
       {std::tuple{20, 6, 1}, {2, 1, 0}, {40, 12, 2}, {1, 0, 0}}) {
    options.heads = heads;
    const VideoWorkload workload({2, 2, 2, 0, TextPlacement::kNone}, options);
    std::int64_t counts[3] = {0, 0, 0};
    for (const PlantedHead kind : workload.planted()) ++counts[static_cast<int>(kind)];
    EXPECT_EQ(counts[0], spatial) << heads;
    EXPECT_EQ(counts[2], ambiguous) << heads;
    EXPECT_EQ(counts[1], heads - spatial - ambiguous) << heads;
  }
  options.heads = 2;
  options.planted = {PlantedHead::kAmbiguous, PlantedHead::kSpatial};
  EXPECT_EQ(VideoWorkload(kGeometry, options).planted(), options.planted);
  options.planted = {PlantedHead::kSpatial};
  EXPECT_THROW(VideoWorkload(kGeometry, options), std::invalid_argument);
}

TEST(Workload, DtypesAreRoundingsOfOneAnother) {
  WorkloadOptions options;
  options.heads = 2;
  options.head_dim = 8;
  options.dtype = DType::kF32;
  const VideoWorkload f32(kGeometry, options);
  options.dtype = DType::kBF16;
  const VideoWorkload bf16(kGeometry, options);
  options.dtype = DType::kF16;
  const VideoWorkload f16(kGeometry, options);
  for (std::int64_t r = 0; r < kGeometry.tokens(); r += 7) {
    for (std::int64_t c = 0; c < 8; ++c) {
      const float x = static_cast<float>(test::load_element(f32.k(), 1, r, c));
      EXPECT_EQ(test::load_element(bf16.k(), 1, r, c), bf16_to_float(float_to_bf16(x)));
      EXPECT_EQ(test::load_element(f16.k(), 1, r, c), f16_to_float(float_to_f16(x)));
    }
  }
}

// Mean softmax weight a video query puts on its own frame and on its own
// patch (other frames), averaged over queries.
std::pair<double, double> weight_split(const VideoWorkload& w, std::int64_t head) {
  const VideoGeometry& g = w.geometry();
  const std::int64_t p = g.tokens_per_frame(), first = g.video_range().begin;
  const double scale = 1.0 / std::sqrt(static_cast<double>(w.head_dim()));
  double same_frame = 0.0, same_patch = 0.0;
  for (std::int64_t q = first; q < g.video_range().end; ++q) {
    std::vector<double> scores(static_cast<std::size_t>(g.tokens()));
    double max_score = -1e300;
    for (std::int64_t k = 0; k < g.tokens(); ++k) {
      double dot = 0.0;
      for (std::int64_t c = 0; c < w.head_dim(); ++c) {
        dot += test::load_element(w.q(), head, q, c) * test::load_element(w.k(), head, k, c);
      }
      scores[static_cast<std::size_t>(k)] = dot * scale;
      max_score = std::max(max_score, dot * scale);
    }
    double sum = 0.0, frame_w = 0.0, patch_w = 0.0;
    for (std::int64_t k = 0; k < g.tokens(); ++k) {
      const double e = std::exp(scores[static_cast<std::size_t>(k)] - max_score);
      sum += e;
      if (!g.is_video(k)) continue;
      if ((k - first) / p == (q - first) / p) frame_w += e;
      if ((k - first) % p == (q - first) % p && k != q) patch_w += e;
    }
    same_frame += frame_w / sum;
    same_patch += patch_w / sum;
  }
  const double queries = static_cast<double>(g.video_tokens());
  return {same_frame / queries, same_patch / queries};
}

TEST(Workload, WeightLiesWhereThePlantedTypeSays) {
  WorkloadOptions options;
  options.heads = 3;
  options.head_dim = 64;
  options.dtype = DType::kF32;
  options.planted = {PlantedHead::kSpatial, PlantedHead::kTemporal, PlantedHead::kAmbiguous};
  const VideoWorkload w(kGeometry, options);
  const auto [spatial_frame, spatial_patch] = weight_split(w, 0);
  const auto [temporal_frame, temporal_patch] = weight_split(w, 1);
  const auto [ambiguous_frame, ambiguous_patch] = weight_split(w, 2);
  EXPECT_GT(spatial_frame, 0.9);
  EXPECT_LT(spatial_patch, 0.1);
  EXPECT_GT(temporal_patch, 0.7);
  EXPECT_LT(ambiguous_frame + ambiguous_patch, 0.7);  // spread over the sequence
}

// Softmax weights of one video query over every key, in double.
std::vector<double> weights(const VideoWorkload& w, std::int64_t head, std::int64_t q) {
  const VideoGeometry& g = w.geometry();
  const double scale = 1.0 / std::sqrt(static_cast<double>(w.head_dim()));
  std::vector<double> p(static_cast<std::size_t>(g.tokens()));
  double top = -1e300, sum = 0.0;
  for (std::int64_t k = 0; k < g.tokens(); ++k) {
    double dot = 0.0;
    for (std::int64_t c = 0; c < w.head_dim(); ++c) {
      dot += test::load_element(w.q(), head, q, c) * test::load_element(w.k(), head, k, c);
    }
    p[static_cast<std::size_t>(k)] = dot * scale;
    top = std::max(top, dot * scale);
  }
  for (double& x : p) sum += (x = std::exp(x - top));
  for (double& x : p) x /= sum;
  return p;
}

TEST(Workload, NewTypesPutWeightWhereTheirMethodAssumes) {
  const VideoGeometry g{8, 6, 8, 5, TextPlacement::kAfter};
  WorkloadOptions options;
  options.head_dim = 64;
  options.dtype = DType::kF32;
  options.planted = {PlantedHead::kCluster, PlantedHead::kDecay, PlantedHead::kSpatialTemporal,
                     PlantedHead::kDecayCluster};
  options.heads = 4;
  const VideoWorkload w(g, options);
  const std::int64_t p = g.tokens_per_frame(), first = g.video_range().begin;
  double own_object = 0.0, object_frame = 0.0, cross = 0.0, mixed_object = 0.0, mixed_near = 0.0;
  std::vector<double> by_distance(static_cast<std::size_t>(g.frames), 0.0);
  std::vector<double> pairs(static_cast<std::size_t>(g.frames), 0.0);
  std::int64_t queries = 0;
  for (std::int64_t q = first; q < g.video_range().end; q += 5, ++queries) {
    const std::int64_t fq = (q - first) / p, pq = (q - first) % p;
    const std::vector<double> cluster = weights(w, 0, q), decay = weights(w, 1, q),
                              both = weights(w, 2, q), mixed = weights(w, 3, q);
    for (std::int64_t k = first; k < g.video_range().end; ++k) {
      const std::int64_t fk = (k - first) / p, pk = (k - first) % p;
      const std::size_t i = static_cast<std::size_t>(k);
      if (w.object(0, k) == w.object(0, q)) own_object += cluster[i];
      if (fk == fq) object_frame += cluster[i];
      const std::size_t distance = static_cast<std::size_t>(std::abs(fk - fq));
      by_distance[distance] += decay[i];
      if (pk == pq) pairs[distance] += 1.0;  // counts the frame pairs at this distance
      if (fk == fq || pk == pq) cross += both[i];
      if (w.object(3, k) == w.object(3, q)) mixed_object += mixed[i];
      if (std::abs(fk - fq) <= 1 && std::abs(pk / 8 - pq / 8) <= 1 &&
          std::abs(pk % 8 - pq % 8) <= 1) {
        mixed_near += mixed[i];
      }
    }
  }
  const double n = static_cast<double>(queries);
  // cluster: on the query's object, which its frame holds only a slice of.
  EXPECT_GT(own_object / n, 0.8);
  EXPECT_LT(object_frame / n, 0.3);
  // decay: the weight per frame pair falls with the frame distance, and the
  // frames beyond the adjacent ones still hold a share.
  for (std::size_t d = 0; d + 1 < 4; ++d) {
    EXPECT_GT(by_distance[d] / pairs[d], by_distance[d + 1] / pairs[d + 1]) << d;
  }
  double far = 0.0;
  for (std::size_t d = 2; d < by_distance.size(); ++d) far += by_distance[d];
  EXPECT_GT(far / n, 0.1);
  EXPECT_LT(by_distance[0] / n, 0.8);
  // spatial+temporal: the query's frame and its position in every frame.
  EXPECT_GT(cross / n, 0.8);
  // decay+cluster: both its object and its neighbourhood hold weight.
  EXPECT_GT(mixed_object / n, 0.3);
  EXPECT_GT(mixed_near / n, 0.12);  // a pure cluster head puts about 0.07 there
  EXPECT_EQ(w.object(1, first), -1);
  EXPECT_EQ(w.object(0, g.tokens() - 1), -1);  // text
  EXPECT_THROW(w.object(4, first), std::invalid_argument);
}

TEST(Workload, TypesByName) {
  ASSERT_EQ(planted_heads().size(), 7u);
  for (const PlantedHead kind : planted_heads()) {
    EXPECT_EQ(parse_planted_head(to_string(kind)), kind);
  }
  try {
    parse_planted_head("radial");
    ADD_FAILURE() << "accepted radial";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("spatial+temporal, decay+cluster"), std::string::npos)
        << e.what();
  }
}

TEST(Workload, NewTypesAreThreadIndependent) {
  WorkloadOptions options;
  options.heads = 4;
  options.head_dim = 16;
  options.planted = {PlantedHead::kCluster, PlantedHead::kDecay, PlantedHead::kSpatialTemporal,
                     PlantedHead::kDecayCluster};
  options.threads = 1;
  const VideoWorkload one(kGeometry, options);
  options.threads = 3;
  const VideoWorkload three(kGeometry, options);
  EXPECT_TRUE(same_bytes(one.q(), three.q()));
  EXPECT_TRUE(same_bytes(one.k(), three.k()));
  // A head's data depends on its own type only: the spatial head of a mixed
  // list equals the spatial head of the default list at the same index.
  options.planted = {PlantedHead::kSpatial, PlantedHead::kCluster, PlantedHead::kDecay,
                     PlantedHead::kTemporal};
  const VideoWorkload mixed(kGeometry, options);
  options.planted = {PlantedHead::kSpatial, PlantedHead::kTemporal, PlantedHead::kTemporal,
                     PlantedHead::kTemporal};
  const VideoWorkload plain(kGeometry, options);
  const std::size_t head_bytes = static_cast<std::size_t>(kGeometry.tokens() * 16 * 2);
  EXPECT_EQ(std::memcmp(mixed.q().data, plain.q().data, head_bytes), 0);
  EXPECT_EQ(std::memcmp(static_cast<const char*>(mixed.q().data) + 3 * head_bytes,
                        static_cast<const char*>(plain.q().data) + 3 * head_bytes, head_bytes),
            0);
}

TEST(Workload, RejectsBadOptions) {
  WorkloadOptions options;
  options.heads = 0;
  EXPECT_THROW(VideoWorkload(kGeometry, options), std::invalid_argument);
  options = {};
  options.spatial_fraction = 0.8;
  options.ambiguous_fraction = 0.3;
  EXPECT_THROW(VideoWorkload(kGeometry, options), std::invalid_argument);
  options = {};
  options.sharpness = 0.0;
  EXPECT_THROW(VideoWorkload(kGeometry, options), std::invalid_argument);
  EXPECT_THROW(VideoWorkload({0, 1, 1, 0, TextPlacement::kNone}, {}), std::invalid_argument);
  options = {};
  options.objects = 0;
  EXPECT_THROW(VideoWorkload(kGeometry, options), std::invalid_argument);
  options = {};
  options.decay_frames = -1.0;
  EXPECT_THROW(VideoWorkload(kGeometry, options), std::invalid_argument);
  options = {};
  options.decay_patches = NAN;
  EXPECT_THROW(VideoWorkload(kGeometry, options), std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash
