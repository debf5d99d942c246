// The band plan as the one mask a video layer is planned and tuned by.
#include "tilesplash/tuning.h"
#include "tilesplash/video_plan.h"

namespace tilesplash {

Mask video_band_mask(const VideoGeometry& geometry, std::int64_t band,
                     const VideoMaskOptions& options) {
  return video_run_masks(VideoMaskKind::kSpatial, geometry, band, options).band;
}

PresetBand preset_band(const VideoPreset& preset, double density) {
  const VideoGeometry& g = preset.geometry;
  VideoMaskOptions options;
  options.text_full = g.text_tokens() > 0;
  const std::int64_t band = band_for_density(g, density, options, VideoMaskKind::kSpatial);
  return {video_band_mask(g, band, options), band, g.tokens()};
}

BlockChoice choose_video_blocks(const VideoGeometry& geometry, std::int64_t band,
                                const VideoMaskOptions& options, std::int64_t head_dim, DType dtype,
                                int threads) {
  // text_full means nothing without text; dropping it keeps the mask's text
  // (and so the tuning key) equal to the one `tune --preset` stores.
  VideoMaskOptions normalised = options;
  normalised.text_full = options.text_full && geometry.text_tokens() > 0;
  normalised.sink = false;  // the sink runs as its own segment, not in the band plan
  const std::int64_t n = geometry.tokens();
  return cached_block_choice(video_band_mask(geometry, band, normalised), n, n, head_dim, dtype,
                             threads);
}

}  // namespace tilesplash
