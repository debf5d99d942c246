// The registry of methods, audited: every registered method's masks against
// a brute-force reference written from the family's definition
// (family_reference.h, video_test_util.h), independently of the library.
// The test iterates methods(), so a method registered without a reference
// for its masks fails here until one is written; nothing below names a
// method except the references themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "family_check.h"
#include "family_reference.h"
#include "tilesplash/candidates.h"
#include "tilesplash/clusters.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/methods.h"
#include "tilesplash/radial.h"
#include "tilesplash/routing.h"
#include "tilesplash/sta.h"
#include "tilesplash/video.h"
#include "tilesplash/workload.h"
#include "video_test_util.h"

namespace tilesplash {
namespace {

using Predicate = std::function<bool(std::int64_t q, std::int64_t k)>;

// The family of a mask: its SPEC term's name ("spatial:...": "spatial").
std::string family_of(const Mask& mask) {
  const std::string text = mask.to_string();
  return text.substr(0, text.find(':'));
}

// One reference per mask family, built from what the mask says it is.
const std::map<std::string, std::function<Predicate(const Mask&)>>& references() {
  static const std::map<std::string, std::function<Predicate(const Mask&)>> table = {
      {"spatial",
       [](const Mask& mask) -> Predicate {
         const VideoMaskInfo info = *video_mask_info(mask);
         const test::RefVideo ref(info.geometry);
         return [=](std::int64_t q, std::int64_t k) {
           return ref.keeps(info.kind, info.band, info.options, q, k);
         };
       }},
      {"temporal",
       [](const Mask& mask) -> Predicate {
         const VideoMaskInfo info = *video_mask_info(mask);
         const test::RefVideo ref(info.geometry);
         return [=](std::int64_t q, std::int64_t k) {
           return ref.keeps(info.kind, info.band, info.options, q, k);
         };
       }},
      {"radial",
       [](const Mask& mask) -> Predicate {
         const RadialMaskInfo info = *radial_mask_info(mask);
         const test::RefRadial ref(info.geometry, info.options.decay, info.options.block,
                                   info.options.sink);
         return [=](std::int64_t q, std::int64_t k) { return ref.keeps(q, k); };
       }},
      {"sta",
       [](const Mask& mask) -> Predicate {
         const StaMaskInfo info = *sta_mask_info(mask);
         const test::RefSta ref(info.geometry, info.options.tile, info.options.window);
         return [=](std::int64_t q, std::int64_t k) { return ref.keeps(q, k); };
       }},
  };
  return table;
}

// Whether `run` keeps original pair (q, k): its mask over run-order rows and
// keys, or its extra key segment.
bool run_keeps(const MaskRun& run, std::int64_t q, std::int64_t k) {
  const std::int64_t rq = run.order.position(q);
  const std::int64_t rk = (run.kv_order ? *run.kv_order : run.order).position(k);
  if (run.mask.keeps(rq, rk)) return true;
  if (!run.extra) return false;
  const KeySegment& e = *run.extra;
  const std::int64_t offset = rk - e.first;
  if (offset < 0 || offset % e.stride != 0 || offset / e.stride >= e.count) return false;
  return e.mask.keeps(rq, offset / e.stride);
}

std::int64_t count_kept(const Predicate& keeps, std::int64_t n) {
  std::int64_t kept = 0;
  for (std::int64_t q = 0; q < n; ++q) {
    for (std::int64_t k = 0; k < n; ++k) kept += keeps(q, k) ? 1 : 0;
  }
  return kept;
}

// A candidate against its family's reference: the mask itself (every pair,
// every tile, rows, hulls, plans), the run it executes as (row order, run
// mask, extra segment) and its density.
void audit_candidate(const MaskCandidate& c, std::int64_t n, const std::string& what) {
  const std::string family = family_of(c.mask);
  const auto found = references().find(family);
  ASSERT_NE(found, references().end())
      << what << ": no brute-force reference for mask family '" << family
      << "': write one from the family's definition (tests/family_reference.h) and list it in "
         "references() here";
  const Predicate reference = found->second(c.mask);
  test::audit_mask(c.mask, n, reference, what + " " + c.name);
  for (std::int64_t q = 0; q < n; ++q) {
    for (std::int64_t k = 0; k < n; ++k) {
      ASSERT_EQ(run_keeps(c.run, q, k), reference(q, k))
          << what << " " << c.name << " run order " << c.run.order.name() << " q=" << q
          << " k=" << k;
    }
  }
  // The run mask is a mask in its own right: tiles, rows and plans agree with its pairs.
  test::audit_mask(
      c.run.mask, n, [&](std::int64_t q, std::int64_t k) { return c.run.mask.keeps(q, k); },
      what + " " + c.name + " run mask");
  EXPECT_DOUBLE_EQ(c.density,
                   static_cast<double>(count_kept(reference, n)) / static_cast<double>(n * n))
      << what << " " << c.name;
  // A mask of the family runs alone (from a SPEC) as the front door runs it.
  const MaskRun alone = mask_run(c.mask, n);
  EXPECT_EQ(alone.mask, c.run.mask) << what << " " << c.name;
  EXPECT_EQ(alone.order.name(), c.run.order.name()) << what << " " << c.name;
  // Its SPEC text names the family and parses back to the same mask.
  EXPECT_EQ(parse_mask_spec(c.mask.to_string()), c.mask) << what << " " << c.name;
}

// Small geometries without and with text (sta's 6 x 8 x 8 tiles cut frames
// and rows into a whole tile and a ragged one).
std::vector<VideoGeometry> audit_geometries() {
  return {
      {7, 9, 3, 0, TextPlacement::kNone},
      {8, 9, 2, 5, TextPlacement::kBefore},
  };
}

TEST(MethodRegistry, EveryMethodWithCandidatesMatchesItsReference) {
  for (const MethodInfo& method : methods()) {
    if (!method.candidates) continue;
    for (const VideoGeometry& g : audit_geometries()) {
      for (const double density : {0.2, 0.5}) {
        for (const bool sink : {false, g.text_tokens() > 0}) {
          const std::string what = std::string(method.name) + " " + g.to_string() + " density " +
                                   std::to_string(density) + (sink ? " sink" : "");
          const std::vector<MaskCandidate> candidates =
              method_candidates(method.name, g, {density, sink});
          ASSERT_FALSE(candidates.empty()) << what;
          std::set<std::string> names;
          for (const MaskCandidate& c : candidates) {
            EXPECT_TRUE(names.insert(c.name).second) << what << ": name " << c.name << " twice";
            audit_candidate(c, g.tokens(), what);
            if (HasFatalFailure()) return;
          }
          if (!method.mask_names.empty()) {
            const std::set<std::string> fixed(method.mask_names.begin(), method.mask_names.end());
            EXPECT_EQ(names, fixed) << what << ": mask_names must list the candidates' names";
          }
          if (method.spec) {
            for (const MaskCandidate& c : candidates) {
              EXPECT_EQ(family_of(c.mask), method.name) << what;
            }
          }
        }
      }
    }
  }
}

// Methods whose masks come from each head's data: the mask a head runs in
// the front door, against one built from its clusters through the public
// pipeline and a reference written from the cluster labels and kept pairs.
TEST(MethodRegistry, EveryDataDrivenMethodMatchesItsReference) {
  const VideoGeometry g{4, 5, 6, 6, TextPlacement::kAfter};
  const test::RefVideo ref(g);
  const std::int64_t n = g.tokens();
  WorkloadOptions workload_options;
  workload_options.heads = 2;
  workload_options.head_dim = 16;
  workload_options.dtype = DType::kF32;
  workload_options.planted = {PlantedHead::kCluster, PlantedHead::kSpatial};
  const VideoWorkload workload(g, workload_options);
  for (const MethodInfo& method : methods()) {
    if (method.candidates) continue;
    const std::string what(method.name);
    VideoAttentionOptions options = method_attention_options(method.name, g, {0.3});
    if (options.pooled) continue;  // its own reference: tests/pooled_test.cc
    ASSERT_TRUE(options.clusters.has_value())
        << what << ": a method without candidates must run clusters; audit its masks here";
    options.clusters->query_clusters = 6;
    options.clusters->key_clusters = 9;
    options.threads = 1;
    VideoAttention attention(g, options);
    std::vector<float> out(static_cast<std::size_t>(2 * n * 16));
    attention.forward({workload.q(), workload.k(), workload.v(),
                       MutableTensorView::contiguous(out.data(), DType::kF32, 2, n, 16)});
    for (std::int64_t h = 0; h < 2; ++h) {
      const HeadClusters c = cluster_head(g, workload.q(), workload.k(), h, *options.clusters);
      const std::vector<std::uint8_t> kept =
          select_cluster_pairs(g, c, 1.0 / 4.0, *options.clusters);
      const ClusterMasks masks = cluster_masks(g, c, kept);
      const Predicate reference = [&](std::int64_t q, std::int64_t k) {
        if (q < 0 || k < 0 || q >= n || k >= n) return false;
        if (ref.text_token(q) || ref.text_token(k)) return true;
        const std::int64_t a = c.query.labels[static_cast<std::size_t>(q - ref.first)];
        const std::int64_t b = c.key.labels[static_cast<std::size_t>(k - ref.first)];
        return kept[static_cast<std::size_t>(a * c.key.clusters + b)] != 0;
      };
      test::audit_mask(masks.mask, n, reference, what + " head " + std::to_string(h));
      const Mask ran = attention.head_mask(h);
      for (std::int64_t q = 0; q < n; ++q) {
        for (std::int64_t k = 0; k < n; ++k) {
          ASSERT_EQ(ran.keeps(q, k), reference(q, k)) << what << " head " << h << " ran";
          ASSERT_EQ(run_keeps(masks.run, q, k), reference(q, k)) << what << " run";
        }
      }
    }
  }
}

TEST(MethodRegistry, EveryListIsTheRegistry) {
  std::vector<std::string_view> all, with_candidates, spec;
  for (const MethodInfo& method : methods()) {
    all.push_back(method.name);
    if (method.candidates) with_candidates.push_back(method.name);
    if (method.spec) spec.push_back(method.name);
    EXPECT_FALSE(method.summary.empty()) << method.name;
    EXPECT_FALSE(method.row_order.empty()) << method.name;
    EXPECT_EQ(&method_info(method.name), &method) << method.name;
  }
  const auto attention_names = attention_method_names();
  EXPECT_EQ(std::vector<std::string_view>(attention_names.begin(), attention_names.end()), all);
  const auto candidate_names = method_names();
  EXPECT_EQ(std::vector<std::string_view>(candidate_names.begin(), candidate_names.end()),
            with_candidates);
  // The SPEC names: the core families, then every method with a term, in order.
  const std::vector<std::string_view> spec_names = mask_spec_names();
  ASSERT_GE(spec_names.size(), spec.size());
  EXPECT_EQ(std::vector<std::string_view>(
                spec_names.end() - static_cast<std::ptrdiff_t>(spec.size()), spec_names.end()),
            spec);
  const VideoGeometry g{3, 4, 4, 0, TextPlacement::kNone};
  for (const std::string_view name : all) {
    EXPECT_NO_THROW(method_attention_options(name, g, {0.4})) << name;
  }
  try {
    method_info("no-such-method", "--method");
    ADD_FAILURE() << "accepted an unknown method";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "--method: unknown method 'no-such-method' (expected " + method_list_text() + ")");
    for (const std::string_view name : all) {
      EXPECT_NE(std::string(e.what()).find(std::string(name)), std::string::npos) << name;
    }
  }
}

}  // namespace
}  // namespace tilesplash
