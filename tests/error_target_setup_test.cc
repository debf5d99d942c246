// The front doors' one setup (method_attention_options with an ErrorTarget),
// the registry's default method, and what heads report as fields (family,
// rung) instead of a name to parse.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/registry.h"
#include "tilesplash/methods.h"
#include "tilesplash/routing.h"
#include "tilesplash/workload.h"

namespace tilesplash {
namespace {

const VideoGeometry kGeometry{4, 4, 4, 0, TextPlacement::kNone};

std::vector<std::string> names_of(const std::vector<MaskCandidate>& candidates) {
  std::vector<std::string> names;
  for (const MaskCandidate& c : candidates) names.push_back(c.name);
  return names;
}

TEST(ErrorTargetSetup, TheDefaultMethodIsARegisteredOneAndRunsThroughItsEntry) {
  const std::string_view method = default_method();
  EXPECT_NO_THROW(method_info(method));
  const VideoAttention plain(kGeometry, VideoAttentionOptions{});
  EXPECT_EQ(names_of(plain.candidates()),
            names_of(method_attention_options(method, kGeometry, {0.25}).candidates));
  VideoAttentionOptions targeted;
  targeted.error = 0.05;
  targeted.densities = {0.1, 0.3};
  const VideoAttention routed(kGeometry, targeted);
  const std::vector<MaskCandidate> ladder =
      method_attention_options(method, kGeometry, {}, ErrorTarget{0.05, std::vector{0.1, 0.3}})
          .candidates;
  EXPECT_EQ(names_of(routed.candidates()), names_of(ladder));
  EXPECT_EQ(force_names(targeted).size(), ladder.size() + 1);  // and "dense"
}

TEST(ErrorTargetSetup, OneSetupForEveryMethodWithCandidates) {
  for (const MethodInfo& method : methods()) {
    const std::vector<double> ladder = {0.1, 0.2};
    if (!method.candidates) {
      const detail::MethodEntry& entry = *detail::find_method(method.name);
      if (entry.pooled != nullptr) {  // its heads step over p themselves: no candidates
        const VideoAttentionOptions options =
            method_attention_options(method.name, kGeometry, {}, ErrorTarget{0.05, ladder});
        EXPECT_TRUE(options.pooled.has_value()) << method.name;
        EXPECT_EQ(options.error, std::optional<double>(0.05)) << method.name;
        EXPECT_TRUE(options.candidates.empty()) << method.name;
        continue;
      }
      EXPECT_THROW(method_attention_options(method.name, kGeometry, {}, ErrorTarget{0.05, ladder}),
                   std::invalid_argument)
          << method.name;
      continue;
    }
    const VideoAttentionOptions options =
        method_attention_options(method.name, kGeometry, {}, ErrorTarget{0.05, ladder});
    ASSERT_TRUE(options.error.has_value()) << method.name;
    EXPECT_EQ(*options.error, 0.05);
    EXPECT_EQ(names_of(options.candidates),
              names_of(ladder_candidates(method.name, kGeometry, {}, ladder)))
        << method.name;
    const VideoAttentionOptions defaults =
        method_attention_options(method.name, kGeometry, {}, ErrorTarget{0.05, std::nullopt});
    EXPECT_EQ(names_of(defaults.candidates),
              names_of(ladder_candidates(method.name, kGeometry, {}, default_density_ladder())))
        << method.name;
  }
}

TEST(ErrorTargetSetup, RefusesWhatALadderCannotTake) {
  const std::string method(default_method());
  MethodOptions banded;
  banded.band = 4;
  EXPECT_THROW(method_attention_options(method, kGeometry, banded, ErrorTarget{0.05, {}}),
               std::invalid_argument);
  EXPECT_THROW(method_attention_options(method, kGeometry, {}, ErrorTarget{0.0, {}}),
               std::invalid_argument);
  EXPECT_THROW(
      method_attention_options(method, kGeometry, {}, ErrorTarget{0.05, std::vector<double>{}}),
      std::invalid_argument);
  EXPECT_THROW(
      method_attention_options(method, kGeometry, {}, ErrorTarget{0.05, std::vector{0.3, 0.1}}),
      std::invalid_argument);
}

// Every rung forced on one head: the report names the family and the rung.
TEST(HeadReportFields, FamilyAndRungAreFieldsOfTheChoice) {
  WorkloadOptions workload_options;
  workload_options.heads = 1;
  workload_options.head_dim = 16;
  workload_options.dtype = DType::kF32;
  const VideoWorkload workload(kGeometry, workload_options);
  const std::int64_t n = kGeometry.tokens();
  std::vector<float> out(static_cast<std::size_t>(n * 16));
  for (const std::string method : {"svg", "sta", "mix"}) {
    VideoAttentionOptions options =
        method_attention_options(method, kGeometry, {}, ErrorTarget{0.05, std::vector{0.2, 0.5}});
    options.threads = 1;
    for (const MaskCandidate& c : std::vector<MaskCandidate>(options.candidates)) {
      options.force = HeadMask(c.name);
      VideoAttention attention(kGeometry, options);
      const LayerReport report =
          attention.forward({workload.q(), workload.k(), workload.v(),
                             MutableTensorView::contiguous(out.data(), DType::kF32, 1, n, 16)});
      const HeadReport& head = report.heads.at(0);
      EXPECT_EQ(head.rung, c.rung) << c.name;
      // The family is the registered family, the candidate's name up to its
      // parameters ("sta:1x2x2@0.2" -> "sta").
      EXPECT_EQ(head.family, c.family.substr(0, c.family.find(':'))) << c.name;
      EXPECT_TRUE(method_info(head.family).spec) << c.name;
      const Fields fields = head_fields(head, attention.candidates());
      const auto family = std::find_if(fields.begin(), fields.end(),
                                       [](const auto& field) { return field.first == "family"; });
      ASSERT_NE(family, fields.end());
    }
  }
  VideoAttentionOptions dense;
  dense.force = HeadMask::kDense;
  VideoAttention attention(kGeometry, dense);
  const LayerReport report =
      attention.forward({workload.q(), workload.k(), workload.v(),
                         MutableTensorView::contiguous(out.data(), DType::kF32, 1, n, 16)});
  EXPECT_EQ(report.heads.at(0).family, "dense");
  EXPECT_EQ(report.heads.at(0).rung, 0.0);
}

}  // namespace
}  // namespace tilesplash
