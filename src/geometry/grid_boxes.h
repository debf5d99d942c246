// A run of consecutive indices of a 3-D grid in raster order (the last
// dimension fastest) is at most five boxes: the rest of the first row, the
// rest of the first slab, the whole slabs between, the start of the last
// slab, the start of the last row. Masks that are products of per-dimension
// conditions classify a tile from those boxes, never from its elements.
#pragma once

#include <array>
#include <cstdint>

namespace tilesplash::detail {

struct GridBox {
  std::array<std::int64_t, 3> lo;  // inclusive
  std::array<std::int64_t, 3> hi;  // inclusive
};

// Boxes of the raster indices [first, last] (inclusive, first <= last) of a
// grid of `dims`; returns how many (1 to 5).
inline int split_boxes(std::int64_t first, std::int64_t last,
                       const std::array<std::int64_t, 3>& dims, GridBox* out) {
  const std::int64_t row = dims[2], slab = dims[1] * dims[2];
  const std::int64_t a0 = first / slab, a1 = (first % slab) / row, a2 = first % row;
  const std::int64_t z0 = last / slab, z1 = (last % slab) / row, z2 = last % row;
  int count = 0;
  // Rows [r0, r1] of one slab s, from (r0, c0) to (r1, c1): at most three boxes.
  const auto slab_part = [&](std::int64_t s, std::int64_t r0, std::int64_t c0, std::int64_t r1,
                             std::int64_t c1) {
    if (r0 == r1) {
      out[count++] = {{s, r0, c0}, {s, r0, c1}};
      return;
    }
    std::int64_t body0 = r0, body1 = r1;
    if (c0 > 0) {
      out[count++] = {{s, r0, c0}, {s, r0, row - 1}};
      ++body0;
    }
    const bool tail = c1 < row - 1;
    if (tail) --body1;
    if (body0 <= body1) out[count++] = {{s, body0, 0}, {s, body1, row - 1}};
    if (tail) out[count++] = {{s, r1, 0}, {s, r1, c1}};
  };
  if (a0 == z0) {
    slab_part(a0, a1, a2, z1, z2);
    return count;
  }
  std::int64_t body0 = a0, body1 = z0;
  if (a1 > 0 || a2 > 0) {
    slab_part(a0, a1, a2, dims[1] - 1, row - 1);
    ++body0;
  }
  const bool tail = z1 < dims[1] - 1 || z2 < row - 1;
  if (tail) --body1;
  if (body0 <= body1) out[count++] = {{body0, 0, 0}, {body1, dims[1] - 1, row - 1}};
  if (tail) slab_part(z0, 0, 0, z1, z2);
  return count;
}

}  // namespace tilesplash::detail
