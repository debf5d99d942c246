// Radial Attention as a method: the `radial:` SPEC term (geometry, decay or
// a density to meet, block, sink), the one candidate matched to a density
// (text kept whole), run in the original order, and the paper's block-vote
// density in plan_mask()'s account.
#include <array>
#include <limits>
#include <stdexcept>
#include <string>

#include "geometry/geometry_params.h"
#include "methods/registry.h"
#include "tilesplash/radial.h"

namespace tilesplash::detail {
namespace {

constexpr const char* kExpectedKeys =
    "preset, frames, height, width, text, text_at, decay, density, block or sink";

Mask parse(SpecParams& params) {
  if (!params.given()) {
    params.fail(
        "expected ':' and parameters, e.g. 'radial:preset=wan2.1-1.3b-480p,decay=0.2,sink'");
  }
  check_video_keys(params, {"decay", "density", "block", "sink"}, kExpectedKeys);
  const VideoGeometry geometry = take_geometry(params);
  RadialOptions options;
  options.sink = params.flag("sink");
  if (const auto block = params.integer("block", 1, (std::int64_t{1} << 40) - 1,
                                        "an integer in [1, 2^40) (tokens)")) {
    options.block = *block;
  }
  const std::optional<double> decay = params.number(
      "decay", 0.0, std::numeric_limits<double>::max(), false, "a finite number >= 0");
  const std::optional<double> density =
      params.number("density", 0.0, 1.0, true, "a number in (0, 1]");
  params.reject_unused(kExpectedKeys);
  try {
    options.decay = resolve_radial_decay(geometry, decay, density, options);
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    params.fail(message.substr(message.find(": ") + 2));
  }
  return radial_mask(geometry, options);
}

// Radial keeps text whole and has no band: its decay meets the density.
std::vector<MaskCandidate> candidates(const VideoGeometry& geometry, const MethodOptions& options) {
  RadialOptions radial;
  radial.sink = options.sink;
  radial.decay = radial_decay_for_density(geometry, options.density, radial);
  return {radial_candidate(geometry, radial)};
}

std::optional<MaskRun> run(const Mask& mask) {
  if (!radial_mask_info(mask)) return std::nullopt;
  return MaskRun{RowOrder(), mask, std::nullopt};
}

bool plan(const Mask& mask, std::int64_t, std::int64_t, const PlanSource&, MaskPlan& out) {
  const std::optional<RadialMaskInfo> radial = radial_mask_info(mask);
  if (!radial) return false;
  out.block_vote_density = radial_block_density(radial->geometry, radial->options);
  out.fields.emplace_back("block_vote_density", *out.block_vote_density);
  out.frame_geometry = radial->geometry;
  return true;
}

}  // namespace

const MethodEntry& radial_method() {
  static constexpr std::array<std::string_view, 1> kNames = {"radial"};
  static const MethodEntry entry{
      .info = {.name = "radial",
               .summary = "Radial Attention: a static mask whose window shrinks, and whose key "
                          "frames thin out, with the distance between frames",
               .row_order = "frame-major",
               .spec = true,
               .spec_syntax = "radial:GEOM,decay=D|density=S[,block=B][,sink]",
               .candidates = true,
               .mask_names = kNames},
      .parse = parse,
      .candidates = candidates,
      .run = run,
      .plan = plan,
  };
  return entry;
}

}  // namespace tilesplash::detail
