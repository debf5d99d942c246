// Video geometry: token ranges, the token-major index map against its
// definition, presets against the released models' shapes, the GEOM syntax and its errors.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

#include "tilesplash/video.h"
#include "video_test_util.h"

namespace tilesplash {
namespace {

TEST(VideoGeometry, RangesAndIndexMaps) {
  for (const VideoGeometry& g : test::small_geometries()) {
    const test::RefVideo ref(g);
    EXPECT_EQ(g.tokens(), ref.tokens);
    EXPECT_EQ(g.video_range().begin, ref.first);
    EXPECT_EQ(g.text_range().size(), g.text);
    std::set<std::int64_t> seen;
    for (std::int64_t n = 0; n < g.tokens(); ++n) {
      EXPECT_EQ(g.is_video(n), ref.video(n));
      EXPECT_EQ(g.to_token_major(n), ref.token_major(n)) << g.to_string() << " n=" << n;
      EXPECT_EQ(g.to_frame_major(g.to_token_major(n)), n);
      seen.insert(g.to_token_major(n));
    }
    EXPECT_EQ(static_cast<std::int64_t>(seen.size()), g.tokens());  // a permutation
  }
}

TEST(VideoGeometry, PresetsMatchTheDesignTable) {
  const struct {
    const char* name;
    std::int64_t frames, patches, tokens, heads, dim;
  } expected[] = {
      {"wan2.1-1.3b-480p", 21, 1560, 32760, 12, 128},
      {"wan2.1-14b-720p", 21, 3600, 75600, 40, 128},
      {"wan2.1-14b-1440p", 21, 14400, 302400, 40, 128},
      {"hunyuan-720p", 33, 3600, 118800 + 256, 24, 128},
      {"cogvideox1.5-768p", 11, 4080, 44880 + 226, 48, 64},
  };
  ASSERT_EQ(video_presets().size(), std::size(expected));
  for (const auto& e : expected) {
    const VideoPreset& preset = video_preset(e.name);
    EXPECT_EQ(preset.geometry.frames, e.frames) << e.name;
    EXPECT_EQ(preset.geometry.tokens_per_frame(), e.patches) << e.name;
    EXPECT_EQ(preset.geometry.tokens(), e.tokens) << e.name;
    EXPECT_EQ(preset.heads, e.heads) << e.name;
    EXPECT_EQ(preset.head_dim, e.dim) << e.name;
    EXPECT_NO_THROW(preset.geometry.validate());
  }
  EXPECT_EQ(video_preset("hunyuan-720p").geometry.text_at, TextPlacement::kAfter);
  EXPECT_EQ(video_preset("cogvideox1.5-768p").geometry.video_range().begin, 226);
}

TEST(VideoGeometry, UnknownPresetListsTheNames) {
  try {
    video_preset("wan-999p");
    FAIL();
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'wan-999p'"), std::string::npos) << what;
    for (const VideoPreset& preset : video_presets()) {
      EXPECT_NE(what.find(std::string(preset.name)), std::string::npos) << what;
    }
  }
}

TEST(VideoGeometry, ParsesAndPrints) {
  const VideoGeometry g = parse_video_geometry("frames=4, height=3,width=2,text=5,text_at=before");
  EXPECT_EQ(g, (VideoGeometry{4, 3, 2, 5, TextPlacement::kBefore}));
  EXPECT_EQ(parse_video_geometry(g.to_string()), g);
  EXPECT_EQ(parse_video_geometry("preset=hunyuan-720p"), video_preset("hunyuan-720p").geometry);
  EXPECT_EQ(parse_video_geometry("frames=2,height=2,width=2").to_string(),
            "frames=2,height=2,width=2");
}

TEST(VideoGeometry, ErrorsNameTheProblem) {
  const auto message = [](const char* text) {
    try {
      parse_video_geometry(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("frames=2,height=2").find("missing 'width'"), std::string::npos);
  EXPECT_NE(message("frames=0,height=2,width=2").find("'frames' must be"), std::string::npos);
  EXPECT_NE(message("frames=2,height=2,width=2,text=4").find("text_at"), std::string::npos);
  EXPECT_NE(message("frames=2,height=2,width=2,text=4,text_at=middle").find("before, after"),
            std::string::npos);
  EXPECT_NE(message("preset=hunyuan-720p,frames=3").find("cannot be combined"), std::string::npos);
  EXPECT_NE(message("frames=2,height=2,width=2,colour=red").find("unknown key 'colour'"),
            std::string::npos);
  EXPECT_NE(message("preset=nope").find("wan2.1-14b-720p"), std::string::npos);
  EXPECT_NE(message("").find("empty"), std::string::npos);
  EXPECT_THROW((VideoGeometry{2, 2, 2, 3, TextPlacement::kNone}.validate()), std::invalid_argument);
  EXPECT_THROW((VideoGeometry{2, 2, 2, 0, TextPlacement::kAfter}.validate()),
               std::invalid_argument);
  EXPECT_THROW(
      (VideoGeometry{std::int64_t{1} << 20, 1 << 20, 2, 0, TextPlacement::kNone}.validate()),
      std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash
