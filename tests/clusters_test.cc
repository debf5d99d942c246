// Sparse VideoGen 2's semantic clusters against their definition (k-means
// itself is in kmeans_test.cc): the kept cluster pairs against a brute-force
// top-p; both masks (the original order and the cluster-sorted run order) and
// their plans against a brute-force scan of the predicate on ragged
// geometries with text before / after / none; the front door's svg2 heads
// against the double-precision reference, bit-identical for any thread count,
// warm-started on the next call.
#include "tilesplash/clusters.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "family_check.h"
#include "support/attention_check.h"
#include "support/random_data.h"
#include "support/reference.h"
#include "support/targets.h"
#include "tilesplash/routing.h"
#include "tilesplash/video.h"
#include "video_test_util.h"

namespace tilesplash {
namespace {

// ---- cluster pairs ------------------------------------------------------------

// A clustering of a head drawn at random: centroids, labels and the sizes
// they imply (some key clusters left empty).
HeadClusters random_clusters(std::int64_t video, std::int64_t qc, std::int64_t kc, std::int64_t d,
                             std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const auto make = [&](std::int64_t k, bool leave_empty) {
    KMeansResult r;
    r.clusters = k;
    r.dim = d;
    for (std::int64_t i = 0; i < k * d; ++i) r.centroids.push_back(static_cast<float>(normal(rng)));
    r.sizes.assign(static_cast<std::size_t>(k), 0);
    // Labels of the first min(k, video) tokens cover distinct clusters so that
    // few are empty; every fourth key cluster stays empty when asked.
    const std::int64_t usable = leave_empty ? std::max<std::int64_t>(1, k - k / 4) : k;
    for (std::int64_t u = 0; u < video; ++u) {
      const std::int64_t label = u < usable ? u : static_cast<std::int64_t>(rng() % usable);
      r.labels.push_back(static_cast<std::int32_t>(label));
      ++r.sizes[static_cast<std::size_t>(label)];
    }
    std::shuffle(r.labels.begin(), r.labels.end(), rng);
    return r;
  };
  return {make(qc, false), make(kc, true)};
}

// Top-p written out: weights, a sort, a running sum.
std::vector<std::uint8_t> brute_pairs(const HeadClusters& c, double scale, double p, double ratio) {
  const std::int64_t qc = c.query.clusters, kc = c.key.clusters, d = c.query.dim;
  std::vector<std::uint8_t> kept(static_cast<std::size_t>(qc * kc), 0);
  const std::int64_t nonempty =
      std::count_if(c.key.sizes.begin(), c.key.sizes.end(), [](std::int64_t s) { return s > 0; });
  const std::int64_t minimum = std::clamp<std::int64_t>(
      static_cast<std::int64_t>(std::ceil(ratio * static_cast<double>(kc) - 1e-9)), 1, nonempty);
  for (std::int64_t a = 0; a < qc; ++a) {
    std::vector<double> w(static_cast<std::size_t>(kc));
    double total = 0.0;
    for (std::int64_t b = 0; b < kc; ++b) {
      double dot = 0.0;
      for (std::int64_t t = 0; t < d; ++t) {
        dot += static_cast<double>(c.query.centroids[a * d + t]) * c.key.centroids[b * d + t];
      }
      w[b] = static_cast<double>(c.key.sizes[b]) * std::exp(scale * dot);
      total += w[b];
    }
    std::vector<std::int64_t> order(static_cast<std::size_t>(kc));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int64_t x, std::int64_t y) { return w[x] > w[y]; });
    double running = 0.0;
    for (std::int64_t i = 0; i < nonempty; ++i) {
      if (i >= minimum && running >= p) break;
      running += w[order[i]] / total;
      kept[static_cast<std::size_t>(a * kc + order[i])] = 1;
    }
  }
  return kept;
}

TEST(Clusters, KeptPairsAreTheTopPPrefixes) {
  const VideoGeometry g{6, 5, 7, 0, TextPlacement::kNone};
  for (const std::uint64_t seed : {1, 2, 3}) {
    const HeadClusters c = random_clusters(g.video_tokens(), 11, 37, 16, seed);
    for (const double p : {0.3, 0.9, 0.999}) {
      for (const double ratio : {0.0, 0.1, 0.5}) {
        ClusterOptions o;
        o.top_p = p;
        o.min_kc_ratio = ratio;
        const double scale = 0.4;
        EXPECT_EQ(select_cluster_pairs(g, c, scale, o), brute_pairs(c, scale, p, ratio))
            << "seed " << seed << " p " << p << " ratio " << ratio;
      }
    }
  }
}

TEST(Clusters, DensityPicksTheTopPThatMeetsIt) {
  const VideoGeometry g{8, 6, 6, 10, TextPlacement::kAfter};
  const HeadClusters c = random_clusters(g.video_tokens(), 20, 60, 8, 4);
  for (const double density : {0.1, 0.3, 0.6}) {
    ClusterOptions o;
    o.min_kc_ratio = 0.0;
    o.density = density;
    const ClusterMasks masks = cluster_masks(g, c, select_cluster_pairs(g, c, 0.3, o));
    // One key cluster more or less per query cluster is the granularity.
    EXPECT_NEAR(masks.density, density, 0.05) << density;
  }
}

// ---- the masks ------------------------------------------------------------------

TEST(Clusters, MasksMatchTheDefinition) {
  const std::vector<VideoGeometry> geometries = {
      {4, 3, 5, 0, TextPlacement::kNone},
      {3, 4, 3, 7, TextPlacement::kBefore},
      {5, 2, 3, 4, TextPlacement::kAfter},
      {1, 3, 3, 2, TextPlacement::kAfter},
  };
  std::mt19937_64 rng(17);
  for (const VideoGeometry& g : geometries) {
    const test::RefVideo ref(g);
    const std::int64_t video = g.video_tokens();
    for (const auto& [qc, kc] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {3, 5}, {6, 9}}) {
      const HeadClusters c =
          random_clusters(video, std::min(qc, video), std::min(kc, video), 4, rng());
      std::vector<std::uint8_t> kept(static_cast<std::size_t>(c.query.clusters * c.key.clusters));
      for (std::uint8_t& k : kept) k = rng() % 3 == 0 ? 1 : 0;
      const ClusterMasks masks = cluster_masks(g, c, kept);
      const std::string what = g.to_string() + " qc=" + std::to_string(qc);
      const auto original = [&](std::int64_t q, std::int64_t k) {
        if (q < 0 || k < 0 || q >= ref.tokens || k >= ref.tokens) return false;
        if (ref.text_token(q) || ref.text_token(k)) return true;
        const std::int64_t a = c.query.labels[static_cast<std::size_t>(q - ref.first)];
        const std::int64_t b = c.key.labels[static_cast<std::size_t>(k - ref.first)];
        return kept[static_cast<std::size_t>(a * c.key.clusters + b)] != 0;
      };
      test::audit_mask(masks.mask, ref.tokens, original, what + " original");
      // The run order: each cluster's rows contiguous, the text last.
      const auto q_source = masks.run.order.sources();
      const auto k_source = masks.run.kv_order->sources();
      ASSERT_EQ(static_cast<std::int64_t>(q_source.size()), ref.tokens) << what;
      for (const auto& [source, labels] :
           {std::pair{q_source, &c.query.labels}, std::pair{k_source, &c.key.labels}}) {
        std::vector<bool> closed(64, false);
        std::int64_t previous = -1;
        for (std::int64_t r = 0; r < ref.tokens; ++r) {
          const std::int64_t row = source[static_cast<std::size_t>(r)];
          if (r >= video) {
            ASSERT_TRUE(ref.text_token(row)) << what << " run position " << r;
            continue;
          }
          const std::int64_t label = (*labels)[static_cast<std::size_t>(row - ref.first)];
          if (label != previous) {
            ASSERT_FALSE(closed[static_cast<std::size_t>(label)]) << what << " cluster split";
            if (previous >= 0) closed[static_cast<std::size_t>(previous)] = true;
            previous = label;
          }
        }
      }
      const auto run = [&](std::int64_t q, std::int64_t k) {
        if (q < 0 || k < 0 || q >= ref.tokens || k >= ref.tokens) return false;
        return original(q_source[static_cast<std::size_t>(q)],
                        k_source[static_cast<std::size_t>(k)]);
      };
      test::audit_mask(masks.run.mask, ref.tokens, run, what + " run");
      std::int64_t count = 0;
      for (std::int64_t q = 0; q < ref.tokens; ++q) {
        for (std::int64_t k = 0; k < ref.tokens; ++k) count += original(q, k) ? 1 : 0;
      }
      EXPECT_EQ(masks.kept_pairs, count) << what;
      EXPECT_DOUBLE_EQ(masks.density, static_cast<double>(count) / (ref.tokens * ref.tokens));
    }
  }
}

TEST(Clusters, RejectsInconsistentInput) {
  const VideoGeometry g{2, 2, 2, 0, TextPlacement::kNone};
  const HeadClusters c = random_clusters(g.video_tokens(), 2, 3, 4, 1);
  EXPECT_THROW(cluster_masks(g, c, std::vector<std::uint8_t>(5)), std::invalid_argument);
  ClusterOptions o;
  o.top_p = 0.0;
  EXPECT_THROW(select_cluster_pairs(g, c, 0.5, o), std::invalid_argument);
  o.top_p = 0.9;
  EXPECT_THROW(select_cluster_pairs(g, c, -1.0, o), std::invalid_argument);
  o.min_kc_ratio = 2.0;
  EXPECT_THROW(select_cluster_pairs(g, c, 0.5, o), std::invalid_argument);
}

// ---- the front door ------------------------------------------------------------

VideoAttentionOptions svg2_options(int threads) {
  VideoAttentionOptions options;
  ClusterOptions clusters;
  clusters.query_clusters = 5;
  clusters.key_clusters = 12;
  clusters.top_p = 0.7;
  clusters.blocks = {16, 64};
  options.clusters = clusters;
  options.threads = threads;
  return options;
}

class ClustersPerTarget : public test::TargetTest {};

TEST_P(ClustersPerTarget, FrontDoorMatchesTheReference) {
  for (const VideoGeometry& g : {VideoGeometry{5, 4, 6, 9, TextPlacement::kBefore},
                                 VideoGeometry{7, 3, 5, 6, TextPlacement::kAfter},
                                 VideoGeometry{6, 6, 6, 0, TextPlacement::kNone}}) {
    const std::int64_t n = g.tokens(), heads = 2, d = 32;
    for (const DType dtype : {DType::kF32, DType::kBF16}) {
      test::HostTensor q(dtype, heads, n, d), k(dtype, heads, n, d), v(dtype, heads, n, d);
      q.fill_normal(21);
      k.fill_normal(22);
      v.fill_normal(23);
      VideoAttention attention(g, svg2_options(2));
      test::HostTensor out(DType::kF32, heads, n, d);
      std::vector<float> lse(static_cast<std::size_t>(heads * n));
      const LayerReport report =
          attention.forward({q.view(), k.view(), v.view(), out.mutable_view(), lse.data()});
      std::vector<test::ReferenceHead> reference;
      for (std::int64_t h = 0; h < heads; ++h) {
        const HeadReport& head = report.heads[static_cast<std::size_t>(h)];
        EXPECT_EQ(head.choice, HeadMask("svg2"));
        EXPECT_FALSE(head.routed);
        const Mask mask = attention.head_mask(h);
        const TilePlan plan = TilePlan::build(mask, n, n, {8, 8});
        EXPECT_DOUBLE_EQ(head.density, plan.stats().density) << g.to_string();
        EXPECT_LT(head.density, 1.0);
        reference.push_back(test::reference_attention(mask, q.view(), k.view(), v.view(), h));
      }
      EXPECT_TRUE(test::matches_reference(reference, out, lse.data(),
                                          test::tolerance_for(dtype, DType::kF32), v.max_abs()))
          << g.to_string();
    }
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(ClustersPerTarget);

TEST(Clusters, FrontDoorIsBitIdenticalForAnyThreadCount) {
  const VideoGeometry g{6, 8, 8, 5, TextPlacement::kAfter};
  const std::int64_t n = g.tokens(), heads = 2, d = 64;
  test::HostTensor q(DType::kBF16, heads, n, d), k(DType::kBF16, heads, n, d),
      v(DType::kBF16, heads, n, d);
  q.fill_normal(1);
  k.fill_normal(2);
  v.fill_normal(3);
  std::vector<test::HostTensor> outs;
  for (const int threads : {1, 2, 3}) {
    VideoAttention attention(g, svg2_options(threads));
    outs.emplace_back(DType::kF32, heads, n, d);
    for (std::int64_t step = 0; step < 2; ++step) {
      attention.forward({q.view(), k.view(), v.view(), outs.back().mutable_view()}, 0, step);
    }
  }
  EXPECT_TRUE(test::bitwise_equal(outs[0], outs[1]));
  EXPECT_TRUE(test::bitwise_equal(outs[0], outs[2]));
}

TEST(Clusters, WarmStartFromTheSameLayer) {
  const VideoGeometry g{4, 8, 8, 0, TextPlacement::kNone};
  const std::int64_t heads = 1, d = 16;
  test::HostTensor q(DType::kF32, heads, g.tokens(), d), k(DType::kF32, heads, g.tokens(), d);
  q.fill_normal(5);
  k.fill_normal(6);
  ClusterOptions o;
  o.query_clusters = 6;
  o.key_clusters = 20;
  o.first_iterations = 50;
  o.warm_iterations = 2;
  const HeadClusters first = cluster_head(g, q.view(), k.view(), 0, o);
  EXPECT_GT(first.key.iterations, 2);
  const HeadClusters warm = cluster_head(g, q.view(), k.view(), 0, o, &first);
  EXPECT_LE(warm.query.iterations, 2);
  EXPECT_LE(warm.key.iterations, 2);
  // A converged clustering stays where it is.
  if (first.key.converged) {
    EXPECT_EQ(warm.key.labels, first.key.labels);
  }
  // More clusters than tokens: one per token.
  o.key_clusters = 1000;
  EXPECT_EQ(cluster_head(g, q.view(), k.view(), 0, o).key.clusters, g.video_tokens());

  // The front door warms each (layer, head) from its own last call.
  VideoAttentionOptions options = svg2_options(2);
  VideoAttention attention(g, options);
  test::HostTensor out(DType::kF32, heads, g.tokens(), d), v(DType::kF32, heads, g.tokens(), d);
  v.fill_normal(7);
  const AttentionArgs args{q.view(), k.view(), v.view(), out.mutable_view()};
  const LayerReport cold = attention.forward(args, 3, 10);
  const LayerReport warmed = attention.forward(args, 3, 11);
  EXPECT_GT(cold.cluster_seconds, 0.0);
  EXPECT_GT(warmed.heads[0].plan_seconds, 0.0);
  attention.reset_clusters();
  EXPECT_NO_THROW(attention.forward(args, 3, 12));
}

TEST(Clusters, FrontDoorOptionErrors) {
  const VideoGeometry g{2, 2, 2, 0, TextPlacement::kNone};
  VideoAttentionOptions options = svg2_options(1);
  options.clusters->top_p = 1.5;
  try {
    VideoAttention attention(g, options);
    ADD_FAILURE() << "accepted top_p 1.5";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("options.clusters: top_p must be in (0, 1]"),
              std::string::npos)
        << e.what();
  }
  options = svg2_options(1);
  options.candidates = method_candidates("svg", g);
  EXPECT_THROW(VideoAttention(g, options), std::invalid_argument);
  options = svg2_options(1);
  options.force = HeadMask::kSpatial;
  EXPECT_THROW(VideoAttention(g, options), std::invalid_argument);
  options.force = HeadMask("svg2");
  EXPECT_NO_THROW(VideoAttention(g, options));
  VideoAttention attention(g, svg2_options(1));
  EXPECT_THROW(attention.head_mask(0), std::invalid_argument);
  test::HostTensor q(DType::kF32, 1, g.tokens(), 8);
  q.fill_normal(1);
  EXPECT_THROW(attention.route(q.view(), q.view(), q.view()), std::invalid_argument);
}

TEST(Clusters, MethodsByName) {
  const VideoGeometry wan480 = video_preset("wan2.1-1.3b-480p").geometry;
  const VideoGeometry wan720 = video_preset("wan2.1-14b-720p").geometry;
  EXPECT_EQ(default_cluster_options(wan480).query_clusters, 200);
  EXPECT_EQ(default_cluster_options(wan720).query_clusters, 300);
  EXPECT_EQ(default_cluster_options(wan720).key_clusters, 1000);
  EXPECT_DOUBLE_EQ(default_cluster_options(wan720).top_p, 0.9);
  const VideoAttentionOptions svg2 = method_attention_options("svg2", wan480, {0.15});
  ASSERT_TRUE(svg2.clusters.has_value());
  EXPECT_EQ(svg2.clusters->density, 0.15);
  EXPECT_TRUE(svg2.candidates.empty());
  const VideoAttentionOptions radial = method_attention_options("radial", wan480, {0.15});
  EXPECT_FALSE(radial.clusters.has_value());
  ASSERT_EQ(radial.candidates.size(), 1u);
  EXPECT_EQ(radial.candidates[0].name, "radial");
  // svg2 and pooled: front-door methods without a candidate list.
  EXPECT_EQ(attention_method_names().size(), method_names().size() + 2);
  for (const std::string_view name : attention_method_names()) {
    EXPECT_NO_THROW(method_attention_options(name, wan480, {0.2})) << name;
  }
  try {
    method_attention_options("svg3", wan480);
    ADD_FAILURE() << "accepted svg3";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("mix, svg2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(method_candidates("svg2", wan480), std::invalid_argument);
  EXPECT_THROW(method_attention_options("svg2", wan480, {0.0}), std::invalid_argument);
}

// The k-means run of each side, as every front door reads it: clusters cut to
// the video tokens, seeds salted 1 (Q) and 2 (K), warm rounds from a warm start.
TEST(Clusters, KMeansOptionsPerSide) {
  const VideoGeometry tiny{2, 4, 4, 0, TextPlacement::kNone};  // 32 video tokens
  ClusterOptions options = default_cluster_options(tiny);
  options.seed = 7;
  const KMeansOptions q = cluster_kmeans_options(tiny, options, false, false);
  const KMeansOptions k = cluster_kmeans_options(tiny, options, true, true);
  EXPECT_EQ(q.clusters, 32);  // 200 asked, 32 tokens
  EXPECT_EQ(k.clusters, 32);
  EXPECT_EQ(q.max_iterations, options.first_iterations);
  EXPECT_EQ(k.max_iterations, options.warm_iterations);
  EXPECT_NE(q.seed, k.seed);
  EXPECT_NE(q.seed, options.seed);
  options.query_clusters = 5;
  EXPECT_EQ(cluster_kmeans_options(tiny, options, false, false).clusters, 5);
  EXPECT_EQ(cluster_kmeans_options(tiny, options, false, false).seed, q.seed);
}

}  // namespace
}  // namespace tilesplash
