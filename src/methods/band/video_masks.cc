// The public face of the video masks: factories, introspection, exact pair
// counts, the band that meets a target density, and how a mask executes
// (shared band plan plus a sink segment).
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "masks/mask_util.h"
#include "methods/band/video_nodes.h"
#include "tilesplash/video.h"

namespace tilesplash {
namespace {

using Wide = __int128;

// Sum of j over [a, b] (0 when empty).
Wide sum_range(Wide a, Wide b) { return b < a ? 0 : (a + b) * (b - a + 1) / 2; }

// #{(u, j) : u in [0, video), j in [0, patches), |u - j * stride| <= band}:
// the part of the sink area the band already keeps. Column j keeps rows
// [max(0, j*s - W), min(L - 1, j*s + W)], and j*s <= L - 1 for every j.
Wide band_over_frame0(std::int64_t video, std::int64_t patches, std::int64_t band,
                      std::int64_t stride) {
  const Wide l = video, p = patches, w = band, s = stride;
  // Upper ends: j*s + W while that stays <= L - 1, else L - 1.
  const Wide j_upper = std::min<Wide>(p - 1, w > l - 1 ? -1 : (l - 1 - w) / s);
  const Wide upper = s * sum_range(0, j_upper) + w * (j_upper + 1) + (p - 1 - j_upper) * (l - 1);
  // Lower ends: j*s - W once positive (j > W / s), else 0.
  const Wide j_lower = w / s + 1;
  const Wide lower = j_lower > p - 1 ? 0 : s * sum_range(j_lower, p - 1) - w * (p - j_lower);
  return upper - lower + p;
}

Wide kept_pairs(VideoMaskKind kind, const VideoGeometry& g, std::int64_t band,
                VideoMaskOptions options) {
  const Wide l = g.video_tokens();
  const Wide t = g.text_tokens();
  const Wide n = l + t;
  const Wide w = std::min<Wide>(band, l - 1);
  Wide kept = l + 2 * (w * l - w * (w + 1) / 2);  // |i - j| <= W over [0, L)^2, either order
  if (options.text_full) kept += 2 * t * n - t * t;
  if (options.sink) {
    const std::int64_t stride = kind == VideoMaskKind::kSpatial ? 1 : g.frames;
    const std::int64_t p = g.tokens_per_frame();
    kept += static_cast<Wide>(p) * l -
            band_over_frame0(g.video_tokens(), p, static_cast<std::int64_t>(w), stride);
  }
  return kept;
}

void check_band(std::int64_t band) {
  if (band < 0) {
    throw std::invalid_argument("video mask: band must be >= 0 (a half-width in tokens), got " +
                                std::to_string(band));
  }
}

}  // namespace

std::string_view to_string(VideoMaskKind kind) {
  return kind == VideoMaskKind::kSpatial ? "spatial" : "temporal";
}

std::string_view to_string(TokenOrder order) {
  return order == TokenOrder::kFrameMajor ? "frame-major" : "token-major";
}

Mask video_mask(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                VideoMaskOptions options) {
  return Mask(std::make_shared<detail::VideoMaskNode>(kind, geometry, band, options));
}

std::optional<VideoMaskInfo> video_mask_info(const Mask& mask) {
  if (const auto* node = dynamic_cast<const detail::VideoMaskNode*>(&mask.node())) {
    return node->info();
  }
  return std::nullopt;
}

std::int64_t count_kept_pairs(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                              VideoMaskOptions options) {
  geometry.validate();
  check_band(band);
  return static_cast<std::int64_t>(kept_pairs(kind, geometry, band, options));
}

double video_mask_density(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                          VideoMaskOptions options) {
  const double n = static_cast<double>(geometry.tokens());
  return static_cast<double>(count_kept_pairs(kind, geometry, band, options)) / (n * n);
}

std::int64_t band_for_density(const VideoGeometry& geometry, double density,
                              VideoMaskOptions options, std::optional<VideoMaskKind> kind) {
  geometry.validate();
  if (!(density > 0.0 && density <= 1.0)) {
    throw std::invalid_argument("band_for_density: density must be in (0, 1], got " +
                                std::to_string(density));
  }
  // Both counts grow with the band (the band's area only grows and the sink
  // and text areas are fixed), so a binary search finds the crossing; the
  // answer is the crossing or the band just below it. Two kinds are compared
  // as a sum against twice the target.
  const auto count = [&](std::int64_t band) -> Wide {
    if (kind) return kept_pairs(*kind, geometry, band, options);
    return kept_pairs(VideoMaskKind::kSpatial, geometry, band, options) +
           kept_pairs(VideoMaskKind::kTemporal, geometry, band, options);
  };
  const long double n = static_cast<long double>(geometry.tokens());
  const long double target = static_cast<long double>(density) * n * n * (kind ? 1 : 2);
  std::int64_t lo = 0;
  std::int64_t hi = geometry.video_tokens() - 1;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (static_cast<long double>(count(mid)) >= target) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  if (lo > 0) {
    const long double above = static_cast<long double>(count(lo)) - target;
    const long double below = target - static_cast<long double>(count(lo - 1));
    if (below <= above) return lo - 1;
  }
  return lo;
}

std::int64_t band_for_frames(const VideoGeometry& geometry, double frames) {
  geometry.validate();
  const double band = frames * static_cast<double>(geometry.tokens_per_frame());
  if (!std::isfinite(frames) || frames < 0.0 || band > 9.0e15) {
    throw std::invalid_argument("band_for_frames: frames must be a finite number >= 0, got " +
                                std::to_string(frames));
  }
  return std::llround(band);
}

std::int64_t resolve_band(VideoMaskKind kind, const VideoGeometry& geometry, const BandForm& form,
                          VideoMaskOptions options) {
  const int forms = (form.band ? 1 : 0) + (form.band_frames ? 1 : 0) + (form.density ? 1 : 0);
  if (forms != 1) {
    std::vector<std::string> names;
    if (form.band) names.emplace_back("band");
    if (form.band_frames) names.emplace_back("band_frames");
    if (form.density) names.emplace_back("density");
    const std::string given =
        names.size() == 2 ? "both " + names[0] + " and " + names[1] : "all three";
    throw std::invalid_argument(
        std::string("band: ") + (forms == 0 ? "missing band form" : "more than one band form") +
        " (give exactly one of band=W tokens, band_frames=M frames or density=S), got " +
        (forms == 0 ? std::string("neither") : given));
  }
  if (form.band) {
    if (*form.band < 0) {
      throw std::invalid_argument("band: must be >= 0, got " + std::to_string(*form.band));
    }
    return *form.band;
  }
  if (form.band_frames) {
    if (!(std::isfinite(*form.band_frames) && *form.band_frames >= 0.0)) {
      throw std::invalid_argument("band_frames: must be a finite number >= 0, got " +
                                  std::to_string(*form.band_frames));
    }
    return band_for_frames(geometry, *form.band_frames);
  }
  if (!(*form.density > 0.0 && *form.density <= 1.0)) {
    throw std::invalid_argument("density: must be in (0, 1], got " + std::to_string(*form.density));
  }
  return band_for_density(geometry, *form.density, options, kind);
}

VideoRunMasks video_run_masks(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                              VideoMaskOptions options) {
  geometry.validate();
  check_band(band);
  VideoRunMasks run{
      kind == VideoMaskKind::kSpatial ? TokenOrder::kFrameMajor : TokenOrder::kTokenMajor,
      // text_full keeps nothing without text: left out, so that every band
      // plan of one geometry and band is one mask (one plan, one tuning key).
      spatial_mask(geometry, band, {false, options.text_full && geometry.text_tokens() > 0}),
      std::nullopt};
  if (options.sink) {
    const std::int64_t stride = kind == VideoMaskKind::kSpatial ? 1 : geometry.frames;
    run.sink = Mask(std::make_shared<detail::SinkSegmentNode>(
        geometry.video_range(), geometry.tokens_per_frame(), band, stride));
  }
  return run;
}

}  // namespace tilesplash
