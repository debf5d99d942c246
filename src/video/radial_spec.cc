// `radial:` SPEC terms: geometry, decay (or a density to meet), block, sink.
#include <limits>
#include <stdexcept>
#include <string>

#include "tilesplash/radial.h"
#include "video/video_parse.h"
#include "video/video_spec.h"

namespace tilesplash::detail {
namespace {

constexpr const char* kExpectedKeys =
    "preset, frames, height, width, text, text_at, decay, density, block or sink";

}  // namespace

Mask parse_radial_mask(std::string_view name, std::optional<std::string_view> params) {
  const std::string context = "mask spec: " + std::string(name);
  if (!params) {
    throw std::invalid_argument(context + ": expected ':' and parameters, e.g. '" +
                                std::string(name) + ":preset=wan2.1-1.3b-480p,decay=0.2,sink'");
  }
  KeyValueList items = split_key_values(*params, context);
  items.check_known({"preset", "frames", "height", "width", "text", "text_at", "decay", "density",
                     "block", "sink"},
                    kExpectedKeys);
  const VideoGeometry geometry = take_geometry(items);
  RadialOptions options;
  options.sink = items.flag("sink");
  if (const auto block = items.integer("block", 1, (std::int64_t{1} << 40) - 1,
                                       "an integer in [1, 2^40) (tokens)")) {
    options.block = *block;
  }
  if (items.has("decay") == items.has("density")) {
    items.fail(std::string(items.has("decay") ? "both" : "neither") +
               " of 'decay' and 'density' (give exactly one: decay=D, e.g. 0.2 for Wan and 0.95 "
               "for HunyuanVideo, or density=S)");
  }
  if (const auto decay = items.number("decay", 0.0, std::numeric_limits<double>::max(), false,
                                      "a finite number >= 0")) {
    options.decay = *decay;
  } else if (const auto density = items.number("density", 0.0, 1.0, true, "a number in (0, 1]")) {
    options.decay = radial_decay_for_density(geometry, *density, options);
  }
  items.reject_unused(kExpectedKeys);
  return radial_mask(geometry, options);
}

}  // namespace tilesplash::detail
