// render_head_choices(): see head_png.h.
#include "head_png.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "canvas.h"

namespace tilesplash::cli {
namespace {

// Colour-blind safe (Paul Tol's bright scheme), by family in order of appearance.
constexpr std::array<Rgb, 7> kFamilies = {{{68, 119, 170},
                                           {238, 102, 119},
                                           {34, 136, 51},
                                           {204, 187, 68},
                                           {102, 204, 238},
                                           {170, 51, 119},
                                           {187, 187, 187}}};
constexpr Rgb kMissing = {200, 200, 200};
constexpr Rgb kMissed = {255, 221, 0};  // yellow, seen on any red

std::uint8_t level(double x) {
  return static_cast<std::uint8_t>(std::lround(255.0 * std::clamp(x, 0.0, 1.0)));
}

}  // namespace

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
    const std::string& family = h.family;
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
