// render_head_choices(): see head_png.h.
#include "head_png.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

namespace tilesplash::cli {
namespace {

using Rgb = std::array<std::uint8_t, 3>;

// Colour-blind safe (Paul Tol's bright scheme), by family in order of appearance.
constexpr std::array<Rgb, 7> kFamilies = {{{68, 119, 170},
                                           {238, 102, 119},
                                           {34, 136, 51},
                                           {204, 187, 68},
                                           {102, 204, 238},
                                           {170, 51, 119},
                                           {187, 187, 187}}};
constexpr Rgb kBackground = {255, 255, 255};
constexpr Rgb kMissing = {200, 200, 200};
constexpr Rgb kMissed = {255, 221, 0};  // yellow, seen on any red

std::uint8_t level(double x) {
  return static_cast<std::uint8_t>(std::lround(255.0 * std::clamp(x, 0.0, 1.0)));
}

class Canvas {
 public:
  Canvas(std::int64_t width, std::int64_t height) {
    image_.width = width;
    image_.height = height;
    image_.pixels.resize(static_cast<std::size_t>(width * height * 3));
    fill(0, 0, width, height, kBackground);
  }
  void fill(std::int64_t x0, std::int64_t y0, std::int64_t w, std::int64_t h, const Rgb& c) {
    for (std::int64_t y = y0; y < y0 + h; ++y) {
      for (std::int64_t x = x0; x < x0 + w; ++x) {
        std::copy(c.begin(), c.end(), image_.pixels.begin() + (y * image_.width + x) * 3);
      }
    }
  }
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

}  // namespace

std::string mask_family(const std::string& choice) {
  const std::string name = choice.substr(0, choice.find('@'));
  return name.substr(0, name.find(':'));
}

RgbImage render_head_choices(const LayerReport& report, std::int64_t cell) {
  const std::int64_t heads =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(report.heads.size()));
  const std::int64_t gap = std::max<std::int64_t>(1, cell / 4);
  Canvas canvas(heads * cell, 3 * cell + 2 * gap);
  double worst = 0.0;
  for (const HeadReport& h : report.heads) {
    if (h.routed && std::isfinite(h.error)) worst = std::max(worst, h.error);
  }
  std::map<std::string, std::size_t> families;
  for (std::size_t i = 0; i < report.heads.size(); ++i) {
    const HeadReport& h = report.heads[i];
    const std::int64_t x = static_cast<std::int64_t>(i) * cell;
    const std::uint8_t d = level(h.density);
    canvas.fill(x, 0, cell, cell, {d, d, d});
    const std::string family = mask_family(h.choice.name());
    const std::size_t index = families.emplace(family, families.size()).first->second;
    canvas.fill(x, cell + gap, cell, cell, kFamilies[std::min(index, kFamilies.size() - 1)]);
    const std::int64_t y = 2 * (cell + gap);
    if (h.routed && std::isfinite(h.error)) {
      canvas.fill(x, y, cell, cell, {level(worst > 0 ? h.error / worst : 0.0), 0, 0});
      if (!h.target_met) canvas.frame(x, y, cell, kMissed);
    } else {
      canvas.fill(x, y, cell, cell, kMissing);
    }
  }
  return canvas.take();
}

}  // namespace tilesplash::cli
