// Rasterises a TilePlan into an RGB picture (tile kinds, frame ticks, legend)
// and encodes it with libspng; see tile_png.h for the conventions.
#include "tile_png.h"

#include <fmt/format.h>
#include <spng.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>

#include "canvas.h"
#include "tilesplash/output_set.h"

namespace tilesplash::cli {
namespace {

constexpr Rgb kEmpty = {0xee, 0xee, 0xee};
constexpr Rgb kPartial = {0xf2, 0x8e, 0x2b};
constexpr Rgb kFull = {0x1f, 0x4e, 0x9c};
constexpr Rgb kTick = {0x55, 0x55, 0x55};
constexpr Rgb kGuide = {0xc8, 0xc8, 0xc8};
constexpr Rgb kText = {0x2c, 0xa0, 0x2c};
constexpr Rgb kBorder = {0x33, 0x33, 0x33};

constexpr std::int64_t kMargin = 10;  // tick margin on the top and left
constexpr std::int64_t kLegendBox = 12;

// Importance used when several tiles share one pixel: partial > full > empty.
std::uint8_t rank(TileKind kind) {
  switch (kind) {
    case TileKind::kPartial:
      return 2;
    case TileKind::kFull:
      return 1;
    default:
      return 0;
  }
}

}  // namespace

RgbImage render_tile_map(const TilePlan& plan, const TileMapOptions& options) {
  const std::int64_t rows = plan.num_q_blocks(), cols = plan.num_kv_blocks();
  const std::int64_t longest = std::max(rows, cols);
  const std::int64_t max_side = std::max<std::int64_t>(options.max_side, 16);
  // Tiles per pixel (down) or pixels per tile (up), never both above 1.
  const std::int64_t down = (longest + max_side - 1) / max_side;
  const std::int64_t up =
      down > 1 ? 1 : std::clamp<std::int64_t>(512 / std::max<std::int64_t>(longest, 1), 1, 16);
  const std::int64_t map_w = (cols + down - 1) / down * up;
  const std::int64_t map_h = (rows + down - 1) / down * up;

  // Most important kind per pixel cell; tiles absent from the plan are empty.
  const std::int64_t cell_w = (cols + down - 1) / down, cell_h = (rows + down - 1) / down;
  std::vector<std::uint8_t> cells(static_cast<std::size_t>(cell_w * cell_h), 0);
  for (std::int64_t qb = 0; qb < rows; ++qb) {
    for (const PlanTile& tile : plan.tiles(qb)) {
      auto& cell = cells[static_cast<std::size_t>((qb / down) * cell_w + tile.kv_block / down)];
      cell = std::max(cell, rank(tile.is_full() ? TileKind::kFull : TileKind::kPartial));
    }
  }

  const std::int64_t legend_h = kLegendBox + 8;
  Canvas canvas(kMargin + map_w + 2, kMargin + map_h + 2 + legend_h);
  const std::int64_t x0 = kMargin + 1, y0 = kMargin + 1;
  canvas.fill(x0 - 1, y0 - 1, map_w + 2, map_h + 2, kBorder);
  for (std::int64_t cy = 0; cy < cell_h; ++cy) {
    for (std::int64_t cx = 0; cx < cell_w; ++cx) {
      const std::uint8_t r = cells[static_cast<std::size_t>(cy * cell_w + cx)];
      canvas.fill(x0 + cx * up, y0 + cy * up, up, up, r == 2 ? kPartial : r == 1 ? kFull : kEmpty);
    }
  }

  if (options.geometry) {
    const VideoGeometry& g = *options.geometry;
    // Token index -> pixel offset along an axis of `blocks` tiles of `block` tokens.
    const auto to_px = [&](std::int64_t token, std::int64_t block) {
      return token * up / (block * down);
    };
    const std::int64_t bq = plan.blocks().block_q, bk = plan.blocks().block_kv;
    const std::int64_t spacing = to_px(g.tokens_per_frame(), std::max(bq, bk));
    for (std::int64_t f = 0; f <= g.frames; ++f) {
      const std::int64_t token = g.video_range().begin + f * g.tokens_per_frame();
      const std::int64_t px = to_px(token, bk), py = to_px(token, bq);
      const bool major = f == 0 || f == g.frames || spacing >= 3;
      if (!major) continue;
      canvas.fill(x0 + px, 2, 1, kMargin - 3, kTick);
      canvas.fill(2, y0 + py, kMargin - 3, 1, kTick);
      // Faint guides across the map, over empty tiles only.
      for (std::int64_t y = 0; y < map_h; ++y) {
        if (canvas.is(x0 + px, y0 + y, kEmpty)) canvas.set(x0 + px, y0 + y, kGuide);
      }
      for (std::int64_t x = 0; x < map_w; ++x) {
        if (canvas.is(x0 + x, y0 + py, kEmpty)) canvas.set(x0 + x, y0 + py, kGuide);
      }
    }
    const IndexRange text = g.text_range();
    if (text.size() > 0) {
      const std::int64_t tx = to_px(text.begin, bk),
                         tw = std::max<std::int64_t>(1, to_px(text.end, bk) - tx);
      const std::int64_t ty = to_px(text.begin, bq),
                         th = std::max<std::int64_t>(1, to_px(text.end, bq) - ty);
      canvas.fill(x0 + tx, kMargin - 3, tw, 2, kText);
      canvas.fill(kMargin - 3, y0 + ty, 2, th, kText);
    }
  }

  // Legend: empty, partial, full.
  const std::int64_t ly = y0 + map_h + 6;
  std::int64_t lx = x0;
  for (const Rgb& c : {kEmpty, kPartial, kFull}) {
    canvas.fill(lx, ly, kLegendBox, kLegendBox, kBorder);
    canvas.fill(lx + 1, ly + 1, kLegendBox - 2, kLegendBox - 2, c);
    lx += kLegendBox + 6;
  }
  return canvas.take();
}

void write_png(const std::string& path, const RgbImage& image) {
  std::unique_ptr<spng_ctx, decltype(&spng_ctx_free)> ctx(spng_ctx_new(SPNG_CTX_ENCODER),
                                                          &spng_ctx_free);
  if (!ctx) throw std::runtime_error(fmt::format("{}: cannot create a PNG encoder", path));
  spng_set_option(ctx.get(), SPNG_ENCODE_TO_BUFFER, 1);
  spng_ihdr ihdr{};
  ihdr.width = static_cast<std::uint32_t>(image.width);
  ihdr.height = static_cast<std::uint32_t>(image.height);
  ihdr.bit_depth = 8;
  ihdr.color_type = SPNG_COLOR_TYPE_TRUECOLOR;
  int err = spng_set_ihdr(ctx.get(), &ihdr);
  if (err == 0) {
    err = spng_encode_image(ctx.get(), image.pixels.data(), image.pixels.size(), SPNG_FMT_PNG,
                            SPNG_ENCODE_FINALIZE);
  }
  std::size_t size = 0;
  void* buffer = err == 0 ? spng_get_png_buffer(ctx.get(), &size, &err) : nullptr;
  std::unique_ptr<void, decltype(&std::free)> owned(buffer, &std::free);
  if (err != 0 || buffer == nullptr) {
    throw std::runtime_error(fmt::format("{}: PNG encoding failed: {}", path, spng_strerror(err)));
  }

  write_file_atomically(path, std::string_view(static_cast<const char*>(buffer), size));
}

}  // namespace tilesplash::cli
