// The public face of the Radial Attention mask: factory, exact pair counts,
// the paper's block vote, the decay that meets a density, the candidate.
#include "tilesplash/radial.h"

#include <bit>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/radial/radial_node.h"

namespace tilesplash {
namespace {

using Wide = __int128;

int bit_length(std::int64_t x) { return std::bit_width(static_cast<std::uint64_t>(x)); }

// Pairs (r, c) in [0, P)^2 with |r - c| <= w.
Wide band_pairs(std::int64_t p, std::int64_t w) {
  if (w < 0) return 0;
  if (w >= p - 1) return static_cast<Wide>(p) * p;
  return p + 2 * (static_cast<Wide>(w) * p - static_cast<Wide>(w) * (w + 1) / 2);
}

// Kept pairs of one frame distance d >= 2 under the rules.
Wide frame_pair_kept(const detail::RadialRule& rule, std::int64_t d, std::int64_t p) {
  return d % rule.stride == 0 ? band_pairs(p, rule.window) : 0;
}

Wide kept_pairs(const VideoGeometry& g, const RadialOptions& o) {
  const std::int64_t f = g.frames, p = g.tokens_per_frame();
  const Wide whole = static_cast<Wide>(p) * p;
  // Frame pairs (i, j) by distance d; with the sink, column j = 0 is kept
  // whole and the other columns are counted by distance.
  Wide video = 0;
  if (o.sink) video += f * whole;
  for (std::int64_t d = 0; d < f; ++d) {
    const std::int64_t pairs =
        o.sink ? (d == 0 ? f - 1 : (f - 1 - d) + (f - d)) : (d == 0 ? f : 2 * (f - d));
    if (pairs <= 0) continue;
    const Wide each =
        d <= 1 ? whole : frame_pair_kept(detail::radial_rule(g, o, bit_length(d)), d, p);
    video += pairs * each;
  }
  const Wide t = g.text_tokens(), n = g.tokens();
  return video + 2 * t * n - t * t;
}

void validate(const VideoGeometry& geometry, const RadialOptions& options) {
  geometry.validate();
  detail::check_radial_options(options);
}

}  // namespace

Mask radial_mask(const VideoGeometry& geometry, RadialOptions options) {
  return Mask(std::make_shared<detail::RadialNode>(geometry, options));
}

std::optional<RadialMaskInfo> radial_mask_info(const Mask& mask) {
  if (const auto* node = dynamic_cast<const detail::RadialNode*>(&mask.node())) {
    return node->info();
  }
  return std::nullopt;
}

std::int64_t radial_kept_pairs(const VideoGeometry& geometry, const RadialOptions& options) {
  validate(geometry, options);
  return static_cast<std::int64_t>(kept_pairs(geometry, options));
}

double radial_density(const VideoGeometry& geometry, const RadialOptions& options) {
  const double n = static_cast<double>(geometry.tokens());
  return static_cast<double>(radial_kept_pairs(geometry, options)) / (n * n);
}

double radial_block_density(const VideoGeometry& geometry, const RadialOptions& options) {
  validate(geometry, options);
  const std::int64_t f = geometry.frames, p = geometry.tokens_per_frame(), b = options.block;
  const std::int64_t n = geometry.tokens(), video = geometry.video_tokens();
  const std::int64_t grid = (n + b - 1) / b;  // blocks per side of the padded sequence
  if (grid > (std::int64_t{1} << 16)) {
    throw std::invalid_argument("radial_block_density: " + std::to_string(grid) +
                                " blocks per side is too many to vote on (at most 65536)");
  }
  std::vector<std::uint8_t> kept(static_cast<std::size_t>(grid * grid), 0);
  // Text after the video, as the paper's code lays it out: whole block rows
  // and columns from the video/text border on.
  const std::int64_t border = video / b;
  for (std::int64_t i = 0; i < grid; ++i) {
    for (std::int64_t j = 0; j < grid; ++j) {
      if (i >= border || j >= border) kept[static_cast<std::size_t>(i * grid + j)] = 1;
    }
  }
  const std::int64_t side = (p - 1) / b + 1;  // blocks of one frame pair's padded mask
  std::vector<detail::RadialRule> rules(64);
  for (int bits = 2; bits < 64; ++bits)
    rules[static_cast<std::size_t>(bits)] = detail::radial_rule(geometry, options, bits);
  for (std::int64_t i = 0; i < f; ++i) {
    for (std::int64_t j = 0; j < f; ++j) {
      const std::int64_t d = std::llabs(i - j);
      std::int64_t w = p;  // kept whole
      if (d > 1 && !(options.sink && j == 0)) {
        const detail::RadialRule& rule = rules[static_cast<std::size_t>(bit_length(d))];
        w = d % rule.stride == 0 ? rule.window : -1;
      }
      if (w < 0) continue;
      const std::int64_t rem_row = (i * p) % b, rem_col = (j * p) % b;
      for (std::int64_t bi = 0; bi < side; ++bi) {
        // Local rows of this block row (the padded mask is cut at side * B).
        const std::int64_t r0 = std::max<std::int64_t>(bi * b, rem_row) - rem_row;
        const std::int64_t r1 = std::min((bi + 1) * b, rem_row + p) - rem_row;
        for (std::int64_t bj = 0; bj < side; ++bj) {
          std::int64_t nonzero = 0, high = 0;
          for (std::int64_t col = bj * b; col < (bj + 1) * b; ++col) {
            const std::int64_t c = col - rem_col;
            if (c < 0 || c >= p || r1 <= r0) continue;
            const std::int64_t lo = std::max(r0, c - w), hi = std::min(r1, c + w + 1);
            const std::int64_t count = std::max<std::int64_t>(0, hi - lo);
            nonzero += count > 0;
            high += 3 * count > b;  // col density > 1/3
          }
          const double fraction = static_cast<double>(high) / (static_cast<double>(nonzero) + 1e-9);
          if (fraction > 0.6) {
            const std::int64_t row = (i * p) / b + bi, col = (j * p) / b + bj;
            if (row < grid && col < grid) kept[static_cast<std::size_t>(row * grid + col)] = 1;
          }
        }
      }
    }
  }
  std::int64_t count = 0;
  for (const std::uint8_t k : kept) count += k;
  return static_cast<double>(count) / (static_cast<double>(grid) * static_cast<double>(grid));
}

double radial_decay_for_density(const VideoGeometry& geometry, double density,
                                RadialOptions options) {
  validate(geometry, options);
  if (!(density > 0.0 && density <= 1.0)) {
    throw std::invalid_argument("radial_decay_for_density: density must be in (0, 1], got " +
                                std::to_string(density));
  }
  const auto at = [&](double decay) {
    options.decay = decay;
    return radial_density(geometry, options);
  };
  // Density never falls as decay grows; at decay = 2^bitlen(P) + 1 every
  // window covers its frame.
  double lo = 0.0, hi = std::ldexp(1.0, bit_length(geometry.tokens_per_frame())) + 1.0;
  if (at(lo) >= density) return lo;
  if (at(hi) <= density) return hi;
  for (int step = 0; step < 64; ++step) {
    const double mid = 0.5 * (lo + hi);
    (at(mid) < density ? lo : hi) = mid;
  }
  return density - at(lo) <= at(hi) - density ? lo : hi;
}

double resolve_radial_decay(const VideoGeometry& geometry, std::optional<double> decay,
                            std::optional<double> density, const RadialOptions& options) {
  if (decay.has_value() == density.has_value()) {
    throw std::invalid_argument(
        std::string("decay: ") + (decay ? "both" : "neither") +
        " of 'decay' and 'density' (give exactly one: decay=D, e.g. 0.2 for Wan and 0.95 for "
        "HunyuanVideo, or density=S)");
  }
  if (decay) {
    if (!(std::isfinite(*decay) && *decay >= 0.0)) {
      throw std::invalid_argument("decay: must be a finite number >= 0, got " +
                                  std::to_string(*decay));
    }
    return *decay;
  }
  if (!(*density > 0.0 && *density <= 1.0)) {
    throw std::invalid_argument("density: must be in (0, 1], got " + std::to_string(*density));
  }
  return radial_decay_for_density(geometry, *density, options);
}

MaskCandidate radial_candidate(const VideoGeometry& geometry, const RadialOptions& options) {
  const Mask mask = radial_mask(geometry, options);
  return {
      "radial", mask, MaskRun{RowOrder(), mask, std::nullopt}, radial_density(geometry, options),
      {},       0.0};
}

}  // namespace tilesplash
