// Candidate builders and the method -> candidate list table.
#include "tilesplash/candidates.h"

#include <array>
#include <stdexcept>
#include <string>

#include "tilesplash/plan.h"
#include "tilesplash/radial.h"
#include "tilesplash/sta.h"
#include "video/video_candidates.h"

namespace tilesplash {
namespace {

constexpr std::array<std::string_view, 6> kMethods = {"svg",    "spatial", "temporal",
                                                      "radial", "sta",     "mix"};

void check_density(double density) {
  if (!(density > 0.0 && density <= 1.0)) {
    throw std::invalid_argument("method_candidates: options.density must be in (0, 1], got " +
                                std::to_string(density));
  }
}

// Radial keeps text whole and has no band: its decay meets the density.
MaskCandidate radial_for_density(const VideoGeometry& geometry, const MethodOptions& options) {
  RadialOptions radial;
  radial.sink = options.sink;
  radial.decay = radial_decay_for_density(geometry, options.density, radial);
  return radial_candidate(geometry, radial);
}

}  // namespace

MaskCandidate video_candidate(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                              VideoMaskOptions options) {
  const VideoRunMasks run = video_run_masks(kind, geometry, band, options);
  MaskCandidate candidate{std::string(to_string(kind)), video_mask(kind, geometry, band, options),
                          MaskRun{RowOrder(), run.band, std::nullopt},
                          video_mask_density(kind, geometry, band, options)};
  if (run.order == TokenOrder::kTokenMajor) candidate.run.order = RowOrder::token_major(geometry);
  if (run.sink) {
    const std::int64_t stride = kind == VideoMaskKind::kSpatial ? 1 : geometry.frames;
    candidate.run.extra =
        KeySegment{*run.sink, geometry.video_range().begin, geometry.tokens_per_frame(), stride};
  }
  return candidate;
}

MaskCandidate plain_candidate(std::string name, const Mask& mask, std::int64_t tokens) {
  const TilePlan plan = TilePlan::build(mask, tokens, tokens, {256, 256});
  return {std::move(name), mask, MaskRun{RowOrder(), mask, std::nullopt}, plan.stats().density};
}

std::span<const std::string_view> method_names() { return kMethods; }

std::vector<MaskCandidate> method_candidates(std::string_view method, const VideoGeometry& geometry,
                                             const MethodOptions& options) {
  geometry.validate();
  check_density(options.density);
  const VideoMaskOptions video_options{options.sink, options.text_full};
  const auto band_candidate = [&](VideoMaskKind kind, bool shared) {
    // "svg" shares one band between the two kinds (one plan); alone, each
    // kind gets the band closest to the density for itself.
    const std::int64_t band =
        shared ? band_for_density(geometry, options.density, video_options)
               : band_for_density(geometry, options.density, video_options, kind);
    return video_candidate(kind, geometry, band, video_options);
  };
  std::vector<MaskCandidate> list;
  if (method == "svg") {
    list.push_back(band_candidate(VideoMaskKind::kSpatial, true));
    list.push_back(band_candidate(VideoMaskKind::kTemporal, true));
  } else if (method == "spatial" || method == "temporal") {
    list.push_back(band_candidate(
        method == "spatial" ? VideoMaskKind::kSpatial : VideoMaskKind::kTemporal, false));
  } else if (method == "radial") {
    list.push_back(radial_for_density(geometry, options));
  } else if (method == "sta") {
    list = detail::sta_for_density(geometry, options);
  } else if (method == "mix") {
    list.push_back(band_candidate(VideoMaskKind::kSpatial, false));
    list.push_back(band_candidate(VideoMaskKind::kTemporal, false));
    list.push_back(radial_for_density(geometry, options));
    for (MaskCandidate& sta : detail::sta_for_density(geometry, options)) {
      list.push_back(std::move(sta));
    }
  } else if (method == "svg2") {
    throw std::invalid_argument(
        "method_candidates: method 'svg2' has no candidate list: its masks come from each "
        "head's data (use method_attention_options in routing.h)");
  } else {
    std::string names;
    for (std::size_t i = 0; i < kMethods.size(); ++i) {
      names += (i == 0 ? "" : i + 1 == kMethods.size() ? " or " : ", ") + std::string(kMethods[i]);
    }
    throw std::invalid_argument("method_candidates: unknown method '" + std::string(method) +
                                "' (expected " + names + ")");
  }
  return list;
}

MaskRun mask_run(const Mask& mask, std::int64_t tokens) {
  mask.check_lengths(tokens, tokens);
  if (const std::optional<VideoMaskInfo> info = video_mask_info(mask)) {
    return video_candidate(info->kind, info->geometry, info->band, info->options).run;
  }
  if (const std::optional<StaMaskInfo> info = sta_mask_info(mask)) {
    return sta_run(info->geometry, info->options);
  }
  return MaskRun{RowOrder(), mask, std::nullopt};
}

}  // namespace tilesplash
