// Pictures of a tile plan: one pixel block per tile, coloured by its kind, so
// that the shape of a mask (and how much of it the kernel skips) can be seen
// at a glance in docs and reports. Written as PNG with libspng.
//
// Colours: empty tiles light grey, partial tiles orange, full tiles dark blue.
// Grids up to max_side tiles per side are drawn with square cells of 1 to 16
// pixels; larger grids are downsampled, and a pixel then shows the most
// important kind among the tiles it covers: partial > full > empty (a partial
// tile anywhere in a cell means the kernel does mask work there). For a video
// geometry, frame boundaries are drawn as ticks in a margin on the top and
// left and as faint lines across the empty area; text tokens are marked in
// the margin in green. A legend of three boxes (empty, partial, full, left to
// right) sits below the map.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tilesplash/plan.h"
#include "tilesplash/video.h"

namespace tilesplash::cli {

struct RgbImage {
  std::int64_t width = 0;
  std::int64_t height = 0;
  std::vector<std::uint8_t> pixels;  // width * height * 3, row-major RGB
};

struct TileMapOptions {
  std::int64_t max_side = 1024;           // tiles per side drawn at full resolution
  std::optional<VideoGeometry> geometry;  // frame boundaries on both axes (rows and keys)
};

RgbImage render_tile_map(const TilePlan& plan, const TileMapOptions& options = {});

// Encodes `image` as an 8-bit RGB PNG and writes it atomically (a temporary
// file beside `path`, renamed over it). Throws std::runtime_error naming the
// path on failure.
void write_png(const std::string& path, const RgbImage& image);

}  // namespace tilesplash::cli
