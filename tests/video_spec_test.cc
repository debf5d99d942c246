// The `spatial:` and `temporal:` SPEC terms: geometry by preset or by sizes,
// the three band forms, the flags, combination with the core terms, round
// trips through to_string(), and errors that name the part.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "tilesplash/mask_spec.h"
#include "tilesplash/video.h"

namespace tilesplash {
namespace {

TEST(VideoSpec, ParsesEveryForm) {
  const VideoGeometry g{4, 3, 2, 5, TextPlacement::kBefore};
  EXPECT_EQ(parse_mask_spec("spatial:frames=4,height=3,width=2,text=5,text_at=before,band=7"),
            spatial_mask(g, 7));
  EXPECT_EQ(parse_mask_spec("temporal: frames=4, height=3, width=2, text=5, text_at=before, "
                            "band_frames=1.5, sink, text_full"),
            temporal_mask(g, 9, {true, true}));
  const VideoGeometry wan = video_preset("wan2.1-1.3b-480p").geometry;
  EXPECT_EQ(parse_mask_spec("spatial:preset=wan2.1-1.3b-480p,density=0.25,sink"),
            spatial_mask(wan, band_for_density(wan, 0.25, {true, false}, VideoMaskKind::kSpatial),
                         {true, false}));
  EXPECT_EQ(parse_mask_spec("temporal:preset=wan2.1-1.3b-480p,density=0.25,sink"),
            temporal_mask(wan, band_for_density(wan, 0.25, {true, false}, VideoMaskKind::kTemporal),
                          {true, false}));
}

TEST(VideoSpec, CombinesWithCoreTermsAndRoundTrips) {
  const Mask mask = parse_mask_spec(
      "spatial:frames=3,height=2,width=2,band=2,sink | causal & "
      "temporal:frames=3,height=2,width=2,band=1");
  EXPECT_EQ(mask, spatial_mask({3, 2, 2, 0, TextPlacement::kNone}, 2, {true, false}) |
                      (Mask::causal() & temporal_mask({3, 2, 2, 0, TextPlacement::kNone}, 1)));
  for (const char* spec :
       {"spatial:frames=3,height=2,width=2,band=2,sink",
        "temporal:frames=5,height=1,width=4,text=3,text_at=after,band=11,sink,text_full",
        "(spatial:frames=3,height=2,width=2,band=0|local:left=1,right=1)&causal"}) {
    const Mask parsed = parse_mask_spec(spec);
    EXPECT_EQ(parse_mask_spec(parsed.to_string()), parsed) << spec;
  }
  EXPECT_EQ(parse_mask_spec("spatial:frames=3,height=2,width=2,band=2,sink").to_string(),
            "spatial:frames=3,height=2,width=2,band=2,sink");
}

TEST(VideoSpec, ErrorsNameThePart) {
  const struct {
    const char* spec;
    const char* message;
  } cases[] = {
      {"spatial", "spatial: expected ':'"},
      {"spatial:band=3", "mask spec: spatial: missing 'frames'"},
      {"temporal:frames=2,height=2,width=2", "missing band form"},
      {"temporal:frames=2,height=2,width=2,band=1,density=0.2", "more than one band form"},
      {"spatial:frames=2,height=2,width=2,band=-1", "'band' must be an integer >= 0"},
      {"spatial:frames=2,height=2,width=2,density=0", "'density' must be a number in (0, 1]"},
      {"spatial:frames=2,height=2,width=2,density=1.5", "'density' must be a number in (0, 1]"},
      {"spatial:frames=2,height=2,width=2,band_frames=x", "'band_frames' must be a number >= 0"},
      {"spatial:frames=2,height=2,width=2,band=1,sink=1", "'sink' is a flag"},
      {"spatial:frames=2,height=2,width=2,band=1,sinks", "unknown key 'sinks'"},
      {"spatial:frames=2,height=2,width=2,band=1,,sink", "empty item"},
      {"spatial:frames=2,height=2,width=2,band=1,band=2", "duplicate key 'band'"},
      {"spatial:frames=2,height=2,width=2,text=3,band=1", "needs 'text_at=before'"},
      {"spatial:preset=wan9,band=1", "unknown name 'wan9' (expected one of wan2.1-1.3b-480p"},
      {"spatial:preset=hunyuan-720p,frames=2,band=1", "cannot be combined with 'preset'"},
      {"spatial:frames=2,height=2,width=2,band", "'band' needs a value"},
  };
  for (const auto& c : cases) {
    try {
      parse_mask_spec(c.spec);
      ADD_FAILURE() << c.spec << ": no error";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos)
          << c.spec << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("mask spec: ", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace tilesplash
