// Sliding Tile Attention as a method: the `sta:` SPEC term (geometry, tile
// and window as AxBxC triples), one candidate per temporal window width
// matched to a density, run and planned in tile-major order.
#include <array>
#include <charconv>
#include <stdexcept>
#include <string>
#include <system_error>

#include "geometry/geometry_params.h"
#include "methods/registry.h"
#include "methods/sta/sta_node.h"
#include "tilesplash/sta.h"

namespace tilesplash::detail {
namespace {

constexpr const char* kExpectedKeys =
    "preset, frames, height, width, text, text_at, tile or window";

// "6x8x8" -> {6, 8, 8}, each in [1, 2^31).
std::array<std::int64_t, 3> triple(SpecParams& items, const char* key, const char* what) {
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

Mask parse(SpecParams& params) {
  if (!params.given()) {
    params.fail(
        "expected ':' and parameters, e.g. 'sta:preset=hunyuan-720p,tile=6x8x8,window=3x3x3'");
  }
  check_video_keys(params, {"tile", "window"}, kExpectedKeys);
  const VideoGeometry geometry = take_geometry(params);
  StaOptions options;
  if (params.has("tile")) options.tile = triple(params, "tile", "tokens per tile in t, h, w");
  params.require("window", "tiles per window in t, h, w, e.g. window=3x3x3");
  options.window = triple(params, "window", "tiles per window in t, h, w");
  params.reject_unused(kExpectedKeys);
  return sta_mask(geometry, options);
}

std::optional<MaskRun> run(const Mask& mask) {
  const std::optional<StaMaskInfo> info = sta_mask_info(mask);
  if (!info) return std::nullopt;
  return sta_run(info->geometry, info->options);
}

// Planned in tile-major order, where every key tile is a run of keys.
bool plan(const Mask& mask, std::int64_t q_len, std::int64_t kv_len, const PlanSource& build,
          MaskPlan& out) {
  const std::optional<StaMaskInfo> sta = sta_mask_info(mask);
  if (!sta) return false;
  mask.check_lengths(q_len, kv_len);
  const MaskRun run = sta_run(sta->geometry, sta->options);
  out.sta = TileMajorRun{std::string(run.order.name()), run.mask,
                         sta_kept_pairs(sta->geometry, sta->options),
                         sta_density(sta->geometry, sta->options)};
  out.plan = build(run.mask, q_len, kv_len);
  Fields& fields = out.fields;
  fields.emplace_back("plan_order", out.sta->order);
  fields.emplace_back("plan_note",
                      std::string("sta mask: the plan shown is in tile-major order (Q/K/V "
                                  "permuted, text after the video), where every key tile is a "
                                  "run of keys"));
  fields.emplace_back("plan_mask", out.sta->run_mask.to_string());
  fields.emplace_back("mask_kept_pairs", out.sta->mask_kept_pairs);
  fields.emplace_back("mask_density", out.sta->mask_density);
  return true;
}

}  // namespace

const MethodEntry& sta_method() {
  static const MethodEntry entry{
      .info = {.name = "sta",
               .summary = "Sliding Tile Attention: 3-D windows over tiles of 6 x 8 x 8 tokens, "
                          "one window per head routed among one per temporal extent",
               .row_order = "tile-major",
               .spec = true,
               .spec_syntax = "sta:GEOM[,tile=TTxTHxTW],window=KTxKHxKW",
               .candidates = true},
      .parse = parse,
      .candidates = sta_for_density,
      .run = run,
      .plan = plan,
  };
  return entry;
}

}  // namespace tilesplash::detail
