// Sparse VideoGen's band masks as methods: "spatial" and "temporal" (one
// kind each, on its own closest band) and "svg" (both on one shared band,
// routed per head). Their SPEC terms (`spatial:` / `temporal:` with a
// geometry, one band form and the sink / text_full flags), how they run
// (spatial in frame-major order, temporal token-major, the sink as its own
// key segment) and what plan_mask() reports for them.
#include <array>
#include <limits>
#include <stdexcept>
#include <string>

#include "geometry/geometry_params.h"
#include "methods/registry.h"
#include "tilesplash/video.h"

namespace tilesplash {

MaskCandidate video_candidate(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                              VideoMaskOptions options) {
  const VideoRunMasks run = video_run_masks(kind, geometry, band, options);
  MaskCandidate candidate{std::string(to_string(kind)),
                          video_mask(kind, geometry, band, options),
                          MaskRun{RowOrder(), run.band, std::nullopt},
                          video_mask_density(kind, geometry, band, options),
                          {},
                          0.0};
  if (run.order == TokenOrder::kTokenMajor) candidate.run.order = RowOrder::token_major(geometry);
  if (run.sink) {
    const std::int64_t stride = kind == VideoMaskKind::kSpatial ? 1 : geometry.frames;
    candidate.run.extra =
        KeySegment{*run.sink, geometry.video_range().begin, geometry.tokens_per_frame(), stride};
  }
  return candidate;
}

namespace detail {
namespace {

constexpr const char* kExpectedKeys =
    "preset, frames, height, width, text, text_at, band, band_frames, density, sink or text_full";

template <VideoMaskKind kKind>
Mask parse(SpecParams& params) {
  if (!params.given()) {
    params.fail("expected ':' and parameters, e.g. '" + std::string(to_string(kKind)) +
                ":preset=wan2.1-1.3b-480p,density=0.25'");
  }
  check_video_keys(params, {"band", "band_frames", "density", "sink", "text_full"}, kExpectedKeys);
  const VideoGeometry geometry = take_geometry(params);
  VideoMaskOptions options;
  options.sink = params.flag("sink");
  options.text_full = params.flag("text_full");
  BandForm form;
  form.band = params.integer("band", 0, std::numeric_limits<std::int64_t>::max(),
                             "an integer >= 0 (half-width in tokens)");
  form.band_frames =
      params.number("band_frames", 0.0, 1e9, false, "a number >= 0 (half-width in frames)");
  form.density = params.number("density", 0.0, 1.0, true, "a number in (0, 1]");
  params.reject_unused(kExpectedKeys);
  std::int64_t band = 0;
  try {
    band = resolve_band(kKind, geometry, form, options);
  } catch (const std::invalid_argument& e) {
    params.fail(e.what());
  }
  return video_mask(kKind, geometry, band, options);
}

VideoMaskOptions video_options(const MethodOptions& options) {
  return {options.sink, options.text_full};
}

// Alone, each kind gets the band closest to the density for itself.
template <VideoMaskKind kKind>
std::vector<MaskCandidate> one_kind(const VideoGeometry& geometry, const MethodOptions& options) {
  const VideoMaskOptions video = video_options(options);
  return {video_candidate(kKind, geometry,
                          band_for_density(geometry, options.density, video, kKind), video)};
}

// "svg" shares one band between the two kinds: one plan for every head. The
// band is the caller's (options.band, in tokens) or the one that meets the
// density.
std::vector<MaskCandidate> shared_band(const VideoGeometry& geometry,
                                       const MethodOptions& options) {
  const VideoMaskOptions video = video_options(options);
  const std::int64_t band =
      options.band ? *options.band : band_for_density(geometry, options.density, video);
  return {video_candidate(VideoMaskKind::kSpatial, geometry, band, video),
          video_candidate(VideoMaskKind::kTemporal, geometry, band, video)};
}

template <VideoMaskKind kKind>
std::optional<MaskRun> run(const Mask& mask) {
  const std::optional<VideoMaskInfo> info = video_mask_info(mask);
  if (!info || info->kind != kKind) return std::nullopt;
  return video_candidate(info->kind, info->geometry, info->band, info->options).run;
}

// A spatial mask plans as it is, in frame-major order.
bool plan_spatial(const Mask& mask, std::int64_t, std::int64_t, const PlanSource&, MaskPlan& out) {
  const std::optional<VideoMaskInfo> info = video_mask_info(mask);
  if (!info || info->kind != VideoMaskKind::kSpatial) return false;
  out.frame_geometry = info->geometry;
  return true;
}

// A temporal mask plans its token-major band (the plan spatial heads share)
// and the sink segment beside it.
bool plan_temporal(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                   const PlanSource& build, MaskPlan& out) {
  const std::optional<VideoMaskInfo> info = video_mask_info(mask);
  if (!info || info->kind != VideoMaskKind::kTemporal) return false;
  const std::int64_t n = info->geometry.tokens();
  if (q_len != n || kv_len != n) {
    throw std::invalid_argument(
        "q_len: a temporal mask runs permuted over all " + std::to_string(n) +
        " tokens of its geometry; expected q_len = " + "kv_len = " + std::to_string(n) + ", got " +
        std::to_string(q_len) + " x " + std::to_string(kv_len));
  }
  const VideoRunMasks run = video_run_masks(info->kind, info->geometry, info->band, info->options);
  TemporalRun temporal{run.order, run.band, std::nullopt, 0, 0, 0.0};
  if (run.sink) {
    temporal.sink_kv_len = info->geometry.tokens_per_frame();
    temporal.sink = build(*run.sink, n, temporal.sink_kv_len)->stats();
  }
  temporal.mask_kept_pairs =
      count_kept_pairs(info->kind, info->geometry, info->band, info->options);
  temporal.mask_density = video_mask_density(info->kind, info->geometry, info->band, info->options);
  out.plan = build(run.band, n, n);

  Fields& fields = out.fields;
  fields.emplace_back("plan_order", std::string(to_string(run.order)));
  fields.emplace_back(
      "plan_note",
      "temporal mask: the plan shown is its band in token-major order (Q/K/V permuted, text in "
      "place), the plan spatial heads share" +
          std::string(run.sink ? "; frame-0 keys run as the sink segment (sink_*)" : ""));
  fields.emplace_back("plan_mask", run.band.to_string());
  if (temporal.sink) {
    fields.emplace_back("sink_kv_len", temporal.sink_kv_len);
    fields.emplace_back("sink_full", temporal.sink->full);
    fields.emplace_back("sink_partial", temporal.sink->partial);
    fields.emplace_back("sink_empty", temporal.sink->empty);
    fields.emplace_back("sink_distinct_partial", temporal.sink->distinct_partial);
    fields.emplace_back("sink_kept_pairs", temporal.sink->kept_pairs);
  }
  fields.emplace_back("mask_kept_pairs", temporal.mask_kept_pairs);
  fields.emplace_back("mask_density", temporal.mask_density);
  out.temporal = std::move(temporal);
  return true;
}

}  // namespace

const MethodEntry& svg_method() {
  static constexpr std::array<std::string_view, 2> kNames = {"spatial", "temporal"};
  static const MethodEntry entry{
      .info = {.name = "svg",
               .summary = "Sparse VideoGen: each head routed to the spatial or the temporal "
                          "mask, both on one shared band",
               .row_order = "spatial heads frame-major, temporal heads token-major",
               .spec = false,
               .candidates = true,
               .mask_names = kNames,
               .takes_band = true},
      .candidates = shared_band,
  };
  return entry;
}

const MethodEntry& spatial_method() {
  static constexpr std::array<std::string_view, 1> kNames = {"spatial"};
  static const MethodEntry entry{
      .info = {.name = "spatial",
               .summary = "Sparse VideoGen's spatial mask for every head: a band |q - k| <= W "
                          "over frame-major tokens (the query's frame and its neighbours)",
               .row_order = "frame-major",
               .spec = true,
               .spec_syntax = "spatial:GEOM,band=W|band_frames=M|density=S[,sink][,text_full]",
               .candidates = true,
               .mask_names = kNames},
      .parse = parse<VideoMaskKind::kSpatial>,
      .candidates = one_kind<VideoMaskKind::kSpatial>,
      .run = run<VideoMaskKind::kSpatial>,
      .plan = plan_spatial,
  };
  return entry;
}

const MethodEntry& temporal_method() {
  static constexpr std::array<std::string_view, 1> kNames = {"temporal"};
  static const MethodEntry entry{
      .info = {.name = "temporal",
               .summary = "Sparse VideoGen's temporal mask for every head: the same band over "
                          "token-major tokens (the query's position in every frame)",
               .row_order = "token-major",
               .spec = true,
               .spec_syntax = "temporal:GEOM,band=W|band_frames=M|density=S[,sink][,text_full]",
               .candidates = true,
               .mask_names = kNames},
      .parse = parse<VideoMaskKind::kTemporal>,
      .candidates = one_kind<VideoMaskKind::kTemporal>,
      .run = run<VideoMaskKind::kTemporal>,
      .plan = plan_temporal,
  };
  return entry;
}

}  // namespace detail
}  // namespace tilesplash
