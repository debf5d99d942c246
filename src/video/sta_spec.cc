// `sta:` SPEC terms: geometry, tile and window as AxBxC triples.
#include <array>
#include <charconv>
#include <stdexcept>
#include <string>
#include <system_error>

#include "tilesplash/sta.h"
#include "video/video_parse.h"
#include "video/video_spec.h"

namespace tilesplash::detail {
namespace {

constexpr const char* kExpectedKeys =
    "preset, frames, height, width, text, text_at, tile or window";

// "6x8x8" -> {6, 8, 8}, each in [1, 2^31).
std::array<std::int64_t, 3> triple(KeyValueList& items, const char* key, const char* what) {
  const std::string text = *items.text(key);
  std::array<std::int64_t, 3> value{};
  const char* p = text.data();
  const char* end = p + text.size();
  for (int i = 0; i < 3; ++i) {
    const auto [next, ec] = std::from_chars(p, end, value[i]);
    const bool separator_ok = i < 2 ? next < end && *next == 'x' : next == end;
    if (ec != std::errc() || !separator_ok || value[i] < 1 || value[i] >= (std::int64_t{1} << 31)) {
      std::string message = "'";
      message.append(key).append("' must be three integers >= 1 as AxBxC (").append(what);
      message.append("), got '").append(text).append("'");
      items.fail(message);
    }
    p = next + 1;
  }
  return value;
}

}  // namespace

Mask parse_sta_mask(std::string_view name, std::optional<std::string_view> params) {
  const std::string context = "mask spec: " + std::string(name);
  if (!params) {
    throw std::invalid_argument(context + ": expected ':' and parameters, e.g. '" +
                                std::string(name) +
                                ":preset=hunyuan-720p,tile=6x8x8,window=3x3x3'");
  }
  KeyValueList items = split_key_values(*params, context);
  items.check_known({"preset", "frames", "height", "width", "text", "text_at", "tile", "window"},
                    kExpectedKeys);
  const VideoGeometry geometry = take_geometry(items);
  StaOptions options;
  if (items.has("tile")) options.tile = triple(items, "tile", "tokens per tile in t, h, w");
  if (!items.has("window")) {
    items.fail("missing 'window' (tiles per window in t, h, w, e.g. window=3x3x3)");
  }
  options.window = triple(items, "window", "tiles per window in t, h, w");
  items.reject_unused(kExpectedKeys);
  return sta_mask(geometry, options);
}

}  // namespace tilesplash::detail
