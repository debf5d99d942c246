// Video geometry: where text and frame-major video tokens sit, the token-major
// index map, the model presets (the released configurations of Wan 2.1,
// HunyuanVideo and CogVideoX) and the GEOM text syntax shared by the mask SPEC
// and the CLI.
#include <array>
#include <stdexcept>
#include <string>

#include "geometry/geometry_params.h"
#include "tilesplash/video.h"

namespace tilesplash {
namespace {

// Every count is kept below 2^31 and the sequence below 2^40, so index
// arithmetic (products like p * F, sums with a band) never nears int64 limits.
constexpr std::int64_t kMaxSide = std::int64_t{1} << 31;
constexpr std::int64_t kMaxTokens = std::int64_t{1} << 40;

constexpr VideoGeometry wan_geometry(std::int64_t h, std::int64_t w) {
  return {21, h, w, 0, TextPlacement::kNone};
}

// Wan: VAE stride (4, 8, 8), patch (1, 2, 2): one token per 16 x 16 pixels, 81
// frames -> 21 latent frames. HunyuanVideo: 129 frames -> 33. CogVideoX 1.5:
// 81 frames -> 11 latent frames (temporal stride 8), 768 x 1360 -> 48 x 85.
constexpr std::array<VideoPreset, 5> kPresets = {{
    {"wan2.1-1.3b-480p", wan_geometry(30, 52), 12, 128, 30, "Wan 2.1 1.3B, 480x832, 81 frames"},
    {"wan2.1-14b-720p", wan_geometry(45, 80), 40, 128, 40, "Wan 2.1 14B, 720x1280, 81 frames"},
    {"wan2.1-14b-1440p", wan_geometry(90, 160), 40, 128, 40, "Wan 2.1 14B, 1440x2560, 81 frames"},
    {"hunyuan-720p",
     {33, 45, 80, 256, TextPlacement::kAfter},
     24,
     128,
     60,
     "HunyuanVideo, 720x1280, 129 frames"},
    {"cogvideox1.5-768p",
     {11, 48, 85, 226, TextPlacement::kBefore},
     48,
     64,
     42,
     "CogVideoX 1.5 5B, 768x1360, 81 frames"},
}};

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("video geometry: " + message);
}

void check_side(const char* name, std::int64_t value) {
  if (value < 1 || value >= kMaxSide) {
    fail(std::string(name) + " must be an integer in [1, 2^31), got " + std::to_string(value));
  }
}

}  // namespace

std::string_view to_string(TextPlacement placement) {
  switch (placement) {
    case TextPlacement::kNone:
      return "none";
    case TextPlacement::kBefore:
      return "before";
    case TextPlacement::kAfter:
      return "after";
  }
  return "?";
}

void VideoGeometry::validate() const {
  check_side("frames", frames);
  check_side("height", height);
  check_side("width", width);
  if (text < 0 || text >= kMaxSide) {
    fail("text must be an integer in [0, 2^31), got " + std::to_string(text));
  }
  if (text > 0 && text_at == TextPlacement::kNone) {
    fail("text_at must be before or after when text = " + std::to_string(text) + " > 0");
  }
  if (text == 0 && text_at != TextPlacement::kNone) {
    fail("text_at must be none when text = 0, got " + std::string(tilesplash::to_string(text_at)));
  }
  const __int128 total = static_cast<__int128>(frames) * height * width + text;
  if (total >= kMaxTokens) fail("frames * height * width + text must be below 2^40");
}

IndexRange VideoGeometry::video_range() const {
  const std::int64_t begin = text_at == TextPlacement::kBefore ? text : 0;
  return {begin, begin + video_tokens()};
}

IndexRange VideoGeometry::text_range() const {
  switch (text_at) {
    case TextPlacement::kBefore:
      return {0, text};
    case TextPlacement::kAfter:
      return {video_tokens(), video_tokens() + text};
    case TextPlacement::kNone:
      break;
  }
  return {};
}

bool VideoGeometry::is_video(std::int64_t n) const {
  const IndexRange video = video_range();
  return n >= video.begin && n < video.end;
}

std::int64_t VideoGeometry::to_token_major(std::int64_t n) const {
  if (!is_video(n)) return n;
  const IndexRange video = video_range();
  const std::int64_t u = n - video.begin;
  const std::int64_t p = tokens_per_frame();
  return video.begin + (u % p) * frames + u / p;
}

std::int64_t VideoGeometry::to_frame_major(std::int64_t n) const {
  if (!is_video(n)) return n;
  const IndexRange video = video_range();
  const std::int64_t u = n - video.begin;
  return video.begin + (u % frames) * tokens_per_frame() + u / frames;
}

std::string VideoGeometry::to_string() const {
  std::string text_part;
  if (text_at != TextPlacement::kNone) {
    text_part =
        ",text=" + std::to_string(text) + ",text_at=" + std::string(tilesplash::to_string(text_at));
  }
  return "frames=" + std::to_string(frames) + ",height=" + std::to_string(height) +
         ",width=" + std::to_string(width) + text_part;
}

std::span<const VideoPreset> video_presets() { return kPresets; }

const VideoPreset& video_preset(std::string_view name) {
  for (const VideoPreset& preset : kPresets) {
    if (preset.name == name) return preset;
  }
  std::string names;
  for (const VideoPreset& preset : kPresets) {
    if (!names.empty()) names += ", ";
    names += preset.name;
  }
  throw std::invalid_argument("video preset: unknown name '" + std::string(name) +
                              "' (expected one of " + names + ")");
}

VideoShape parse_video_shape(std::string_view text) {
  if (text.find('=') == std::string_view::npos) {
    const VideoPreset& preset = video_preset(text);
    return {preset.geometry, &preset};
  }
  detail::SpecParams items = detail::SpecParams::split(text, "video geometry");
  if (items.has("preset")) {
    const VideoGeometry geometry = parse_video_geometry(text);  // rejects mixed forms
    return {geometry, &video_preset(*items.text("preset"))};
  }
  return {parse_video_geometry(text), nullptr};
}

VideoShape choose_video_shape(std::string_view preset, std::string_view geometry,
                              std::string_view fallback_preset, std::string_view preset_label,
                              std::string_view geometry_label) {
  if (!preset.empty() && !geometry.empty()) {
    throw std::invalid_argument("give exactly one of " + std::string(preset_label) + " NAME or " +
                                std::string(geometry_label) + " GEOM, got both");
  }
  if (!geometry.empty()) return parse_video_shape(geometry);
  if (!preset.empty() || !fallback_preset.empty()) {
    const VideoPreset& named = video_preset(preset.empty() ? fallback_preset : preset);
    return {named.geometry, &named};
  }
  throw std::invalid_argument("give exactly one of " + std::string(preset_label) + " NAME or " +
                              std::string(geometry_label) + " GEOM, got neither");
}

VideoGeometry parse_video_geometry(std::string_view text) {
  detail::SpecParams items = detail::SpecParams::split(text, "video geometry");
  constexpr const char* kExpected = "preset, frames, height, width, text or text_at";
  detail::check_video_keys(items, {}, kExpected);
  const VideoGeometry geometry = detail::take_geometry(items);
  items.reject_unused(kExpected);
  return geometry;
}

}  // namespace tilesplash
