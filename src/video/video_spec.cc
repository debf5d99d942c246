// `spatial:` and `temporal:` SPEC terms: geometry, one band form, flags.
#include "video/video_spec.h"

#include <limits>
#include <stdexcept>
#include <string>

#include "tilesplash/video.h"
#include "video/video_parse.h"

namespace tilesplash::detail {
namespace {

constexpr const char* kExpectedKeys =
    "preset, frames, height, width, text, text_at, band, band_frames, density, sink or text_full";

}  // namespace

Mask parse_video_mask(std::string_view name, std::optional<std::string_view> params) {
  if (!params) {
    throw std::invalid_argument("mask spec: " + std::string(name) +
                                ": expected ':' and parameters, e.g. '" + std::string(name) +
                                ":preset=wan2.1-1.3b-480p,density=0.25'");
  }
  const VideoMaskKind kind = name == "spatial" ? VideoMaskKind::kSpatial : VideoMaskKind::kTemporal;
  KeyValueList items = split_key_values(*params, "mask spec: " + std::string(name));
  items.check_known({"preset", "frames", "height", "width", "text", "text_at", "band",
                     "band_frames", "density", "sink", "text_full"},
                    kExpectedKeys);
  const VideoGeometry geometry = take_geometry(items);
  VideoMaskOptions options;
  options.sink = items.flag("sink");
  options.text_full = items.flag("text_full");

  int forms = 0;
  for (const char* key : {"band", "band_frames", "density"}) forms += items.has(key) ? 1 : 0;
  if (forms != 1) {
    items.fail(std::string(forms == 0 ? "missing" : "more than one") +
               " band form (give exactly one of band=W, band_frames=M or density=S)");
  }
  std::int64_t band = 0;
  if (const auto w = items.integer("band", 0, std::numeric_limits<std::int64_t>::max(),
                                   "an integer >= 0 (half-width in tokens)")) {
    band = *w;
  } else if (const auto m = items.number("band_frames", 0.0, 1e9, false,
                                         "a number >= 0 (half-width in frames)")) {
    band = band_for_frames(geometry, *m);
  } else if (const auto s = items.number("density", 0.0, 1.0, true, "a number in (0, 1]")) {
    band = band_for_density(geometry, *s, options, kind);
  }
  items.reject_unused(kExpectedKeys);
  return video_mask(kind, geometry, band, options);
}

}  // namespace tilesplash::detail
