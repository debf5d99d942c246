// Radial Attention (Li et al., "Radial Attention: O(n log n) Sparse Attention
// with Energy Decay for Long Video Generation", NeurIPS 2025) as a tilesplash
// mask: a static mask whose attention window shrinks, and whose key frames
// thin out, as the distance between query and key frames grows.
//
// On frame-major video tokens with P tokens per frame, query frame i, key
// frame j, d = |i - j| and in-frame indices r, c, the pair is kept when
//  - the key frame is frame 0 and the sink is on (Wan keeps one), or
//  - d <= 1, or
//  - |r - c| <= w(d) and d passes the subsampling rule, where bitlen(x) is
//    the number of bits of x, L(d) = 2^bitlen(P) / 2^bitlen(d) (a real
//    number), w(d) = max(L(d) * decay, B), and a frame pair with L(d) < B
//    passes only when d is a multiple of floor(B / L(d)) (L(d) >= B: always).
// Text rows and columns are kept whole. The paper's code then coarsens this
// token mask to B-token blocks by a vote (radial_block_density() reproduces
// it); tilesplash runs the token mask exactly. Tiles are classified from the
// index ranges: frame distances are grouped by bitlen(d), so a tile costs
// O(log F) checks, never a scan of its elements.
#pragma once

#include <cstdint>
#include <optional>

#include "tilesplash/candidates.h"
#include "tilesplash/mask.h"
#include "tilesplash/video.h"

namespace tilesplash {

struct RadialOptions {
  double decay = 0.2;        // Wan's default; HunyuanVideo uses 0.95. Finite, >= 0
  std::int64_t block = 128;  // B, the paper's block size (>= 1)
  bool sink = false;         // frame 0 is a key of every video query (Wan)
  friend bool operator==(const RadialOptions&, const RadialOptions&) = default;
};

// Prints as its SPEC: radial:GEOM,decay=D[,block=B][,sink] (block when not
// 128). Throws std::invalid_argument naming a bad option.
Mask radial_mask(const VideoGeometry& geometry, RadialOptions options = {});

struct RadialMaskInfo {
  VideoGeometry geometry;
  RadialOptions options;
};
std::optional<RadialMaskInfo> radial_mask_info(const Mask& mask);  // nullopt unless radial

// Exact kept pairs of radial_mask(geometry, options) over tokens x tokens, in O(F).
std::int64_t radial_kept_pairs(const VideoGeometry& geometry, const RadialOptions& options);
double radial_density(const VideoGeometry& geometry, const RadialOptions& options);

// The fraction of B x B blocks the paper's code keeps after its vote
// (gen_log_mask_shrinked with shrinkMaskStrict, radial-attention @ 72788d4):
// per frame pair, a block keeps when more than 60% of its columns with any
// kept pair have more than a third of their B rows kept; text blocks are kept
// whole. Laid out as that code lays it out (video first, text after, blocks
// of ceil(N / B) per side), whatever geometry.text_at says.
double radial_block_density(const VideoGeometry& geometry, const RadialOptions& options);

// The decay whose density is closest to `density` (in (0, 1]), the other
// options as given; 0 when even decay 0 keeps more (radial's floor: frames at
// d <= 1 and windows of B).
double radial_decay_for_density(const VideoGeometry& geometry, double density,
                                RadialOptions options = {});

// Exactly one of a decay (finite, >= 0) or the density to meet
// (radial_decay_for_density), the other options as given: the rule the SPEC
// term and the bindings share. Throws std::invalid_argument("decay: ...").
double resolve_radial_decay(const VideoGeometry& geometry, std::optional<double> decay,
                            std::optional<double> density, const RadialOptions& options = {});

// The candidate "radial": runs in the original order as it is.
MaskCandidate radial_candidate(const VideoGeometry& geometry, const RadialOptions& options);

}  // namespace tilesplash
