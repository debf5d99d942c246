// The front door against the double-precision reference: every head's output
// and LSE must equal plain masked attention with the head's chosen mask
// applied on the original token order, whatever the route (spatial as is,
// temporal permuted), with or without the sink segment and the text area,
// for f32 and bf16 inputs, f32 and bf16 outputs and strided layouts.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/attention_check.h"
#include "support/random_data.h"
#include "support/reference.h"
#include "tilesplash/routing.h"
#include "tilesplash/workload.h"
#include "video_test_util.h"

namespace tilesplash {
namespace {

using test::HostTensor;

struct Inputs {
  HostTensor q, k, v;
};

Inputs random_inputs(const VideoGeometry& g, DType dtype, std::int64_t heads, std::int64_t d,
                     bool strided, std::uint64_t seed) {
  Inputs in{HostTensor(dtype, heads, g.tokens(), d), HostTensor(dtype, heads, g.tokens(), d),
            HostTensor(dtype, heads, g.tokens(), d)};
  in.q.fill_normal(seed);
  in.k.fill_normal(seed + 1);
  in.v.fill_normal(seed + 2);
  if (strided) {  // FlashAttention's [N, H, d]
    in.q = in.q.relayout(d, heads * d);
    in.k = in.k.relayout(d, heads * d);
    in.v = in.v.relayout(d, heads * d);
  }
  return in;
}

// Runs the front door and checks every head against the reference of the
// mask it reports.
void check_front_door(const VideoGeometry& g, const VideoAttentionOptions& options,
                      const Inputs& in, DType out_dtype, const std::string& what) {
  const std::int64_t heads = in.q.heads(), n = g.tokens(), d = in.v.dim();
  HostTensor out(out_dtype, heads, n, d);
  out.fill_storage(123.0f);
  std::vector<float> lse(static_cast<std::size_t>(heads * n), 77.0f);
  VideoAttention attention(g, options);
  const LayerReport report = attention.forward(
      {in.q.view(), in.k.view(), in.v.view(), out.mutable_view(), lse.data()}, 3, 5);
  ASSERT_EQ(static_cast<std::int64_t>(report.heads.size()), heads);
  std::vector<test::ReferenceHead> reference;
  for (std::int64_t h = 0; h < heads; ++h) {
    const Mask mask = attention.mask(report.heads[static_cast<std::size_t>(h)].choice);
    reference.push_back(test::reference_attention(mask, in.q.view(), in.k.view(), in.v.view(), h));
  }
  EXPECT_TRUE(test::matches_reference(reference, out, lse.data(),
                                      test::tolerance_for(in.q.dtype(), out_dtype), in.v.max_abs()))
      << what;
}

TEST(VideoAttention, EqualsMaskedAttentionOnTheOriginalOrder) {
  for (const VideoGeometry& g : test::small_geometries()) {
    const Inputs in = random_inputs(g, DType::kF32, 3, 16, false, 7);
    for (const std::optional<HeadMask>& force :
         {std::optional<HeadMask>(HeadMask::kSpatial), std::optional(HeadMask::kTemporal),
          std::optional(HeadMask::kDense), std::optional<HeadMask>()}) {
      for (int flags = 0; flags < 4; ++flags) {
        for (const std::int64_t band :
             {std::int64_t{0}, std::int64_t{3}, g.tokens_per_frame() + 1}) {
          VideoAttentionOptions options;
          options.band = band;
          options.sink = (flags & 1) != 0;
          options.text_full = (flags & 2) != 0;
          options.force = force;
          options.blocks = {8, 64};
          options.router.samples = 5;
          check_front_door(g, options, in, DType::kF32,
                           g.to_string() + " band " + std::to_string(band) + " flags " +
                               std::to_string(flags) + " force " +
                               (force ? std::string(to_string(*force)) : "none"));
        }
      }
    }
  }
}

TEST(VideoAttention, RaggedTilesStridedLayoutsAndBf16) {
  // P = 35 and N = 223 are multiples of no tile size; several q and kv tiles.
  const VideoGeometry g{6, 5, 7, 13, TextPlacement::kBefore};
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    for (const bool strided : {false, true}) {
      const Inputs in = random_inputs(g, dtype, 2, 32, strided, 21);
      for (const HeadMask& force : {HeadMask::kSpatial, HeadMask::kTemporal}) {
        for (const bool sink : {false, true}) {
          VideoAttentionOptions options;
          options.density = 0.3;
          options.sink = sink;
          options.force = force;
          options.blocks = {16, 64};
          for (const DType out : {DType::kF32, dtype}) {
            check_front_door(g, options, in, out,
                             std::string(to_string(dtype)) + (strided ? " strided " : " ") +
                                 std::string(to_string(force)) + (sink ? " sink" : "") + " out " +
                                 std::string(to_string(out)));
          }
        }
      }
    }
  }
}

TEST(VideoAttention, RoutedPlantedWorkloadEqualsReference) {
  const VideoGeometry g{8, 4, 6, 10, TextPlacement::kAfter};
  WorkloadOptions wo;
  wo.heads = 6;
  wo.head_dim = 32;
  wo.dtype = DType::kBF16;
  wo.seed = 4;
  const VideoWorkload workload(g, wo);
  HostTensor out(DType::kF32, wo.heads, g.tokens(), wo.head_dim);
  std::vector<float> lse(static_cast<std::size_t>(wo.heads * g.tokens()));
  VideoAttentionOptions options;
  options.sink = true;
  options.blocks = {32, 64};
  VideoAttention attention(g, options);
  const LayerReport report =
      attention.forward({workload.q(), workload.k(), workload.v(), out.mutable_view(), lse.data()});
  std::vector<test::ReferenceHead> reference;
  double v_max = 0.0;
  for (std::int64_t h = 0; h < wo.heads; ++h) {
    const HeadReport& head = report.heads[static_cast<std::size_t>(h)];
    EXPECT_TRUE(head.routed);
    EXPECT_NE(head.choice, HeadMask::kDense);
    reference.push_back(test::reference_attention(attention.mask(head.choice), workload.q(),
                                                  workload.k(), workload.v(), h));
    for (std::int64_t r = 0; r < g.tokens(); ++r) {
      for (std::int64_t c = 0; c < wo.head_dim; ++c) {
        v_max = std::max(v_max, std::abs(test::load_element(workload.v(), h, r, c)));
      }
    }
  }
  EXPECT_TRUE(test::matches_reference(reference, out, lse.data(),
                                      test::tolerance_for(DType::kBF16, DType::kF32), v_max));
}

TEST(VideoAttention, RejectsBadArguments) {
  const VideoGeometry g{3, 2, 2, 0, TextPlacement::kNone};
  const Inputs in = random_inputs(g, DType::kF32, 1, 8, false, 1);
  HostTensor short_out(DType::kF32, 1, g.tokens() - 1, 8);
  VideoAttention attention(g);
  const auto message = [&](const AttentionArgs& args) {
    try {
      attention.forward(args);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({in.q.view(), in.k.view(), in.v.view(), short_out.mutable_view()})
                .find("out.len must equal"),
            std::string::npos);
  TensorView two_heads = in.k.view();
  two_heads.heads = 2;
  HostTensor out(DType::kF32, 1, g.tokens(), 8);
  EXPECT_NE(
      message({in.q.view(), two_heads, in.v.view(), out.mutable_view()}).find("k.heads must equal"),
      std::string::npos);
  VideoAttentionOptions bad;
  bad.density = 0.0;
  EXPECT_THROW(VideoAttention(g, bad), std::invalid_argument);
  bad = {};
  bad.router.samples = -1;
  EXPECT_THROW(VideoAttention(g, bad), std::invalid_argument);
  bad = {};
  bad.band = -3;
  EXPECT_THROW(VideoAttention(g, bad), std::invalid_argument);
  EXPECT_THROW(VideoAttention({0, 1, 1, 0, TextPlacement::kNone}), std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash
