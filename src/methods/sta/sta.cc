// The public face of Sliding Tile Attention: factories, exact counts, the
// tile-major order and run, the candidates that meet a density.
#include "tilesplash/sta.h"

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/sta/sta_node.h"

namespace tilesplash {
namespace {

using Wide = __int128;

// Kept (query token, key token) pairs along one dimension: the sum over kept
// tile pairs of their extents' product, the key extents summed in O(1).
Wide dimension_pairs(const detail::StaGrid& grid, int dim) {
  const std::int64_t n = grid.count[dim], t = grid.tile[dim], size = grid.dims[dim];
  const auto extents = [&](std::int64_t lo, std::int64_t hi) -> Wide {  // sum over [lo, hi]
    return static_cast<Wide>(hi - lo + 1) * t - (hi == n - 1 ? static_cast<Wide>(n) * t - size : 0);
  };
  Wide total = 0;
  for (std::int64_t q = 0; q < n; ++q) {
    const std::array<std::int64_t, 2> keys = grid.reach(dim, q, q);
    total += grid.extent(dim, q) * extents(keys[0], keys[1]);
  }
  return total;
}

Wide kept_pairs(const VideoGeometry& g, const StaOptions& o) {
  const detail::StaGrid grid(g, o);
  const Wide video = dimension_pairs(grid, 0) * dimension_pairs(grid, 1) * dimension_pairs(grid, 2);
  const Wide t = g.text_tokens(), n = g.tokens();
  return video + 2 * t * n - t * t;
}

}  // namespace

Mask sta_mask(const VideoGeometry& geometry, StaOptions options) {
  return Mask(std::make_shared<detail::StaNode>(geometry, options));
}

std::optional<StaMaskInfo> sta_mask_info(const Mask& mask) {
  if (const auto* node = dynamic_cast<const detail::StaNode*>(&mask.node())) return node->info();
  return std::nullopt;
}

std::array<std::int64_t, 3> sta_tile_counts(const VideoGeometry& geometry,
                                            const StaOptions& options) {
  return detail::StaGrid(geometry, options).count;
}

std::int64_t sta_kept_pairs(const VideoGeometry& geometry, const StaOptions& options) {
  return static_cast<std::int64_t>(kept_pairs(geometry, options));
}

double sta_density(const VideoGeometry& geometry, const StaOptions& options) {
  const double n = static_cast<double>(geometry.tokens());
  return static_cast<double>(sta_kept_pairs(geometry, options)) / (n * n);
}

RowOrder sta_tile_major_order(const VideoGeometry& geometry, const StaOptions& options) {
  const detail::StaGrid grid(geometry, options);
  const IndexRange video = geometry.video_range(), text = geometry.text_range();
  std::vector<std::int64_t> source;
  source.reserve(static_cast<std::size_t>(geometry.tokens()));
  for (std::int64_t r = 0; r < video.size(); ++r) source.push_back(video.begin + grid.source(r));
  for (std::int64_t n = text.begin; n < text.end; ++n) source.push_back(n);
  return RowOrder(std::move(source), "tile-major");
}

Mask sta_run_mask(const VideoGeometry& geometry, const StaOptions& options) {
  return Mask(std::make_shared<detail::StaRunNode>(geometry, options));
}

MaskRun sta_run(const VideoGeometry& geometry, const StaOptions& options) {
  return {sta_tile_major_order(geometry, options), sta_run_mask(geometry, options), std::nullopt};
}

MaskCandidate sta_candidate(const VideoGeometry& geometry, const StaOptions& options) {
  const std::array<std::int64_t, 3>& w = options.window;
  return {"sta:" + std::to_string(w[0]) + "x" + std::to_string(w[1]) + "x" + std::to_string(w[2]),
          sta_mask(geometry, options),
          sta_run(geometry, options),
          sta_density(geometry, options),
          {},
          0.0};
}

namespace detail {

std::vector<MaskCandidate> sta_for_density(const VideoGeometry& geometry,
                                           const MethodOptions& options) {
  const StaOptions base;
  const StaGrid grid(geometry, base);
  // Distinct windows per dimension: odd widths below the tile count (an even
  // width covers as much as the next odd one), then the whole dimension.
  std::array<std::vector<std::int64_t>, 3> widths;
  std::array<std::vector<Wide>, 3> pairs;
  for (int d = 0; d < 3; ++d) {
    for (std::int64_t k = 1;; k += 2) {
      const std::int64_t width = std::min(k, grid.count[d]);
      StaOptions o = base;
      o.window[d] = width;
      widths[d].push_back(width);
      pairs[d].push_back(dimension_pairs(StaGrid(geometry, o), d));
      if (width == grid.count[d]) break;
    }
  }
  const double n = static_cast<double>(geometry.tokens());
  const Wide t = geometry.text_tokens();
  const Wide text = 2 * t * geometry.tokens() - t * t;
  // One candidate per temporal extent: the spatial window closest to the
  // density, so the router can choose between long-and-narrow and
  // short-and-wide windows per head.
  std::vector<MaskCandidate> list;
  for (std::size_t i = 0; i < widths[0].size(); ++i) {
    double best_gap = 2.0;
    StaOptions best = base;
    for (std::size_t j = 0; j < widths[1].size(); ++j) {
      for (std::size_t k = 0; k < widths[2].size(); ++k) {
        const Wide kept = pairs[0][i] * pairs[1][j] * pairs[2][k] + text;
        const double gap = std::abs(static_cast<double>(kept) / (n * n) - options.density);
        if (gap < best_gap) {
          best_gap = gap;
          best.window = {widths[0][i], widths[1][j], widths[2][k]};
        }
      }
    }
    list.push_back(sta_candidate(geometry, best));
  }
  return list;
}

}  // namespace detail
}  // namespace tilesplash
