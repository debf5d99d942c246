// The picture of what every head of a routed layer chose (`route --png`):
// three strips, one cell per head, left to right: the density each head ran
// with (dark = sparse, light = dense), its mask family (one colour per
// family: spatial, temporal, radial, sta, dense, ...), and its sampled error
// against dense (black = 0, red = the largest error of the layer; grey when
// the head was not routed). A head whose error target was missed has a yellow
// frame in the error strip. Written as PNG through tile_png.h's write_png.
#pragma once

#include <string>
#include <vector>

#include "tile_png.h"
#include "tilesplash/routing.h"

namespace tilesplash::cli {

// Cells are `cell` pixels square; strips are separated by `cell / 4` pixels.
RgbImage render_head_choices(const LayerReport& report, std::int64_t cell = 24);

}  // namespace tilesplash::cli
