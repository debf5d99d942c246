// A synthetic video attention workload: seeded Q, K, V for every head of one
// layer of a video geometry, with each head's attention structure planted, so
// that routing and sparse attention can be judged without a model checkpoint.
// It is the default workload of the `route` demo and the benchmarks.
//
// How it is built (per head, d = head_dim, scale 1/sqrt(d)):
//  - A video token (f, p) gets a unit feature phi from its head's planted
//    type; q = a * (phi + noise * eps_q) and k = a * (phi + noise * eps_k),
//    with eps ~ N(0, I / d) per token and a^2 = sharpness * sqrt(d), so the
//    scaled score of two tokens is about sharpness * <phi_q, phi_k>.
//  - spatial (frame-local, Sparse VideoGen's spatial heads): phi = e_f, one
//    seeded Gaussian feature per frame, smoothed with its neighbours
//    (e_f ~ r_f + (r_{f-1} + r_{f+1}) / 2, normalised), so adjacent frames
//    share about two thirds of it. The weight sits on the query's own frame
//    and a little on the adjacent ones: the frame-major band holds it.
//  - temporal (same position across frames, SVG's temporal heads): phi = g_p,
//    one independent feature per patch position, nearly orthogonal in d
//    dimensions: the weight sits on the query's patch in every frame.
//  - cluster (objects with no geometric order, Sparse VideoGen 2): phi = o_m,
//    one feature per object m < objects, and every video token belongs to an
//    object drawn by a hash of (seed, head, token): the weight sits on the
//    query's object, scattered over the whole video.
//  - decay (energy decaying with distance, Radial Attention): phi(f, y, x) =
//    sqrt(2 / d) [cos(w_i . z), sin(w_i . z)] for d / 2 seeded frequency
//    vectors w_i and z = (f / decay_frames, y / decay_patches, x /
//    decay_patches), w_i multivariate Cauchy: random Fourier features, so
//    <phi(z), phi(z')> ~ exp(-|z - z'|), about 1 - |z - z'| for near tokens.
//    The score falls linearly with the scaled spatio-temporal distance and
//    the softmax weight exponentially: a ball around the query, whose
//    window in the image narrows as the frame distance grows (the radial
//    shape of Radial's energy decay).
//  - mixtures, the sum of two of the above over sqrt(2) at the full
//    sharpness, so half of each pattern's score: spatial+temporal (a cross:
//    the query's frame and its position in every frame), decay+cluster
//    (near tokens and the query's object).
//  - ambiguous: (e_f + g_p) / sqrt(2) at 0.35 x the sharpness, so the weight
//    spreads over the whole sequence (dense-ish) and no mask fits well.
//  - spatial-band / temporal-band (heads that need different densities, for
//    error targets): phi(x) = sqrt(2 / d) [cos(w_i x / l), sin(w_i x / l)]
//    with d / 2 seeded Cauchy frequencies w_i, on the token's position x in
//    frame-major order (spatial) or token-major order (temporal): the score
//    falls linearly and the weight exponentially with |x - x'|. The length l
//    is set from the head's band_widths entry b (a fraction of the keys) so
//    that the weight falls by e^-6 at the half-width W of the band of
//    density b (W = L (1 - sqrt(1 - b)) for L video tokens): the head's
//    attention sits within a band of about density b.
//  - Text tokens carry noise only (q = a * noise * eps); V is N(0, 1) for
//    every token.
// Without an explicit list, kinds are assigned to heads in the given
// proportions (rounded, the rest temporal) and shuffled by the seed; 30%
// spatial, 65% temporal and 5% ambiguous by default, close to Sparse
// VideoGen's 29 / 67 / 4 on HunyuanVideo. Every value comes from a
// counter-based generator keyed by (seed, head, tensor, row), so the data
// does not depend on the thread count, and a head's data depends only on
// its own kind.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"

namespace tilesplash {

enum class PlantedHead : std::uint8_t {
  kSpatial,
  kTemporal,
  kAmbiguous,
  kCluster,
  kDecay,
  kSpatialTemporal,
  kDecayCluster,
  kSpatialBand,
  kTemporalBand,
};
// "spatial", "temporal", "ambiguous", "cluster", "decay", "spatial+temporal",
// "decay+cluster", "spatial-band", "temporal-band"
std::string_view to_string(PlantedHead planted);
// Every structure kind (spatial ... decay+cluster), in enum order; the band
// kinds, whose attention spreads by a width of their own, are band_heads().
std::span<const PlantedHead> planted_heads();
// spatial-band, temporal-band.
std::span<const PlantedHead> band_heads();
// The kind of that name; throws std::invalid_argument listing the names.
PlantedHead parse_planted_head(std::string_view name);

struct WorkloadOptions {
  std::int64_t heads = 2;
  std::int64_t head_dim = 128;  // also the value dim
  DType dtype = DType::kBF16;
  std::uint64_t seed = 0;
  double spatial_fraction = 0.30;
  double ambiguous_fraction = 0.05;  // temporal heads are the rest
  // One entry per head when non-empty; overrides the fractions.
  std::vector<PlantedHead> planted;
  double sharpness = 12.0;    // scaled score of two tokens with the same feature (> 0)
  double noise = 0.3;         // per-token noise, relative to the unit feature (>= 0)
  std::int64_t objects = 20;  // cluster heads: objects per head (>= 1)
  // decay heads: the kernel's length scales (> 0). The weight falls by e
  // every decay_frames / sharpness frames or decay_patches / sharpness
  // patches: with the defaults, every 2 frames or 3 patches.
  double decay_frames = 24.0;
  double decay_patches = 36.0;
  // spatial-band / temporal-band heads: the density of each head's band, one
  // per head when non-empty (other kinds ignore theirs), each in (0, 1];
  // empty: 0.15 for every band head.
  std::vector<double> band_widths;
  int threads = 0;  // 0: the context's threads() (all hardware threads by default)
};

// `heads` band heads (the error-target workload): spatial-band and
// temporal-band alternating, band widths spread evenly in log scale from
// 3% to 40% of the keys, each width used by one spatial and one temporal
// head where the count allows. Other options are defaults.
WorkloadOptions planted_band_options(std::int64_t heads, std::uint64_t seed = 0);

class VideoWorkload {
 public:
  // Generates on `context` (null: default_threading_context()); the values
  // do not depend on it or on the thread count. Throws std::invalid_argument
  // naming the bad option.
  VideoWorkload(const VideoGeometry& geometry, WorkloadOptions options,
                ThreadingContext* context = nullptr);

  const VideoGeometry& geometry() const { return geometry_; }
  const WorkloadOptions& options() const { return options_; }
  std::int64_t heads() const { return options_.heads; }
  std::int64_t head_dim() const { return options_.head_dim; }
  const std::vector<PlantedHead>& planted() const { return planted_; }
  // The object of token `token` in head `head` when the head's type has
  // objects (cluster, decay+cluster) and the token is video; -1 otherwise.
  std::int64_t object(std::int64_t head, std::int64_t token) const;

  // Contiguous [heads, tokens, head_dim] in options().dtype, original order.
  TensorView q() const { return view(0); }
  TensorView k() const { return view(1); }
  TensorView v() const { return view(2); }

 private:
  TensorView view(int tensor) const;

  VideoGeometry geometry_;
  WorkloadOptions options_;
  std::vector<PlantedHead> planted_;
  std::vector<float> f32_[3];
  std::vector<std::uint16_t> bits16_[3];
};

}  // namespace tilesplash
