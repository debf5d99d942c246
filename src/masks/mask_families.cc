// The one place where mask families register their SPEC names: the table at
// the end of this file. The parser looks every atom's name up here, and the
// "unknown mask" error and mask_spec_names() list what is here. A family is a
// name and a parser; the core families' parsers are below, the video
// families' beside their masks (src/video/*_spec.cc).
#include <array>

#include "masks/spec_params.h"
#include "tilesplash/mask_spec.h"
#include "video/video_spec.h"

namespace tilesplash {
namespace detail {
namespace {

Mask parse_dense(const Params& params) {
  params.check_keys({}, "no parameters");
  return Mask::dense();
}

Mask parse_causal(const Params& params) {
  params.check_keys({"offset"}, "offset");
  const Param* offset = params.find("offset");
  return Mask::causal(offset ? params.integer(*offset, INT64_MIN, "an integer") : 0);
}

Mask parse_local(const Params& params) {
  params.check_keys({"left", "right", "offset"}, "left, right or offset");
  std::optional<std::int64_t> left;
  std::optional<std::int64_t> right;
  std::int64_t offset = 0;
  if (const Param* p = params.find("left")) left = params.integer(*p, 0, "an integer >= 0");
  if (const Param* p = params.find("right")) right = params.integer(*p, 0, "an integer >= 0");
  if (const Param* p = params.find("offset")) offset = params.integer(*p, INT64_MIN, "an integer");
  return Mask::local(left, right, offset);
}

Mask parse_chunked(const Params& params) {
  params.check_keys({"size"}, "size");
  const Param& size = params.require("size", "the chunk length, an integer >= 1");
  return Mask::chunked_causal(params.integer(size, 1, "an integer >= 1"));
}

Mask parse_random(const Params& params) {
  params.check_keys({"density", "seed"}, "density or seed");
  const Param& density = params.require("density", "a number in [0, 1]");
  const Param* seed = params.find("seed");
  return Mask::random(params.probability(density), seed ? params.unsigned_integer(*seed) : 0);
}

constexpr std::array kFamilies = {
    MaskFamily{"dense", parse_dense, nullptr},
    MaskFamily{"causal", parse_causal, nullptr},
    MaskFamily{"local", parse_local, nullptr},
    MaskFamily{"chunked", parse_chunked, nullptr},
    MaskFamily{"random", parse_random, nullptr},
    MaskFamily{"spatial", nullptr, parse_video_mask},
    MaskFamily{"temporal", nullptr, parse_video_mask},
    MaskFamily{"radial", nullptr, parse_radial_mask},
    MaskFamily{"sta", nullptr, parse_sta_mask},
};

}  // namespace

const MaskFamily* find_mask_family(std::string_view name) {
  for (const MaskFamily& family : kFamilies) {
    if (family.name == name) return &family;
  }
  return nullptr;
}

}  // namespace detail

std::vector<std::string_view> mask_spec_names() {
  std::vector<std::string_view> names;
  for (const detail::MaskFamily& family : detail::kFamilies) names.push_back(family.name);
  return names;
}

}  // namespace tilesplash
