// The GEOM part of SPEC terms; see geometry_params.h.
#include "geometry/geometry_params.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace tilesplash::detail {

void check_video_keys(const SpecParams& params, std::initializer_list<std::string_view> own,
                      const char* expected) {
  std::vector<std::string_view> known = {"preset", "frames", "height", "width", "text", "text_at"};
  known.insert(known.end(), own.begin(), own.end());
  params.check_known(known, expected);
}

VideoGeometry take_geometry(SpecParams& items) {
  constexpr std::int64_t kMax = std::int64_t{1} << 31;
  if (const std::optional<std::string> preset = items.text("preset")) {
    for (const char* key : {"frames", "height", "width", "text", "text_at"}) {
      if (items.has(key)) {
        items.fail(std::string("'") + key + "' cannot be combined with 'preset' (give either " +
                   "preset=NAME or frames, height, width [, text, text_at])");
      }
    }
    try {
      return video_preset(*preset).geometry;
    } catch (const std::invalid_argument& e) {
      items.fail(e.what());
    }
  }
  VideoGeometry geometry;
  const char* positive = "an integer in [1, 2^31)";
  const auto required = [&](const char* key) {
    const std::optional<std::int64_t> value = items.integer(key, 1, kMax - 1, positive);
    if (!value) {
      items.fail(std::string("missing '") + key +
                 "' (give preset=NAME or frames=F,height=h,width=w)");
    }
    return *value;
  };
  geometry.frames = required("frames");
  geometry.height = required("height");
  geometry.width = required("width");
  geometry.text = items.integer("text", 0, kMax - 1, "an integer in [0, 2^31)").value_or(0);
  if (const std::optional<std::string> at = items.text("text_at")) {
    if (*at == "before") {
      geometry.text_at = TextPlacement::kBefore;
    } else if (*at == "after") {
      geometry.text_at = TextPlacement::kAfter;
    } else if (*at == "none") {
      geometry.text_at = TextPlacement::kNone;
    } else {
      items.fail("'text_at' must be before, after or none, got '" + *at + "'");
    }
  } else if (geometry.text > 0) {
    items.fail("'text=" + std::to_string(geometry.text) +
               "' needs 'text_at=before' or 'text_at=after'");
  }
  try {
    geometry.validate();
  } catch (const std::invalid_argument& e) {
    // validate() already says "video geometry: "; the list adds its own context.
    constexpr std::string_view kPrefix = "video geometry: ";
    std::string_view message = e.what();
    if (message.substr(0, kPrefix.size()) == kPrefix) message.remove_prefix(kPrefix.size());
    items.fail(std::string(message));
  }
  return geometry;
}

}  // namespace tilesplash::detail
