// A white RGB canvas the CLI's pictures are drawn on (tile_png.cc's tile
// maps, head_png.cc's per-head choices): pixels set one at a time or in
// rectangles, clipped to the image, then taken as the RgbImage write_png
// encodes.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "tile_png.h"

namespace tilesplash::cli {

using Rgb = std::array<std::uint8_t, 3>;

class Canvas {
 public:
  static constexpr Rgb kWhite = {0xff, 0xff, 0xff};

  Canvas(std::int64_t width, std::int64_t height) {
    image_.width = width;
    image_.height = height;
    image_.pixels.resize(static_cast<std::size_t>(width * height * 3));
    fill(0, 0, width, height, kWhite);
  }
  void set(std::int64_t x, std::int64_t y, const Rgb& c) {
    if (x < 0 || y < 0 || x >= image_.width || y >= image_.height) return;
    std::copy(c.begin(), c.end(), image_.pixels.begin() + (y * image_.width + x) * 3);
  }
  bool is(std::int64_t x, std::int64_t y, const Rgb& c) const {
    if (x < 0 || y < 0 || x >= image_.width || y >= image_.height) return false;
    return std::equal(c.begin(), c.end(), image_.pixels.begin() + (y * image_.width + x) * 3);
  }
  void fill(std::int64_t x0, std::int64_t y0, std::int64_t w, std::int64_t h, const Rgb& c) {
    for (std::int64_t y = y0; y < y0 + h; ++y)
      for (std::int64_t x = x0; x < x0 + w; ++x) set(x, y, c);
  }
  // A square outline of `side` pixels, its lines side / 8 thick (at least 1).
  void frame(std::int64_t x0, std::int64_t y0, std::int64_t side, const Rgb& c) {
    const std::int64_t t = std::max<std::int64_t>(1, side / 8);
    fill(x0, y0, side, t, c);
    fill(x0, y0 + side - t, side, t, c);
    fill(x0, y0, t, side, c);
    fill(x0 + side - t, y0, t, side, c);
  }
  RgbImage take() { return std::move(image_); }

 private:
  RgbImage image_;
};

}  // namespace tilesplash::cli
