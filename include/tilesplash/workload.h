// A synthetic video attention workload: seeded Q, K, V for every head of one
// layer of a video geometry, with each head's attention structure planted, so
// that routing and sparse attention can be judged without a model checkpoint.
// It is the default workload of the `route` demo and the benchmarks.
//
// How it is built (per head, d = head_dim, scale 1/sqrt(d)):
//  - Unit features: one per frame, e_f, and one per patch position, g_p, from
//    seeded Gaussians. Frame features are smoothed with their neighbours
//    (e_f ~ r_f + (r_{f-1} + r_{f+1}) / 2, normalised), so adjacent frames
//    share about two thirds of a frame feature; patch features are
//    independent (nearly orthogonal in d dimensions).
//  - A video token (f, p) gets the head's feature phi: e_f for a spatial head,
//    g_p for a temporal head, (e_f + g_p) / sqrt(2) for an ambiguous head.
//    q = a * (phi + noise * eps_q) and k = a * (phi + noise * eps_k), with
//    eps ~ N(0, I / d) per token and a^2 = sharpness * sqrt(d), so the scaled
//    score of two tokens is about sharpness * <phi_q, phi_k>.
//  - Spatial heads therefore put their weight on the query's own frame (and a
//    little on the adjacent frames): the frame-major band of the spatial mask
//    holds it while W >= P. Temporal heads put it on the query's patch in
//    every frame: the token-major band holds it while W >= F. Ambiguous heads
//    run at 0.35 x the sharpness on the mixed feature, so their weight spreads
//    over the whole sequence (dense-ish) and neither mask fits well.
//  - Text tokens carry noise only (q = a * noise * eps); V is N(0, 1) for
//    every token.
// The kinds are assigned to heads in the given proportions (rounded, the
// rest temporal) and shuffled by the seed; 30% spatial, 65% temporal and 5%
// ambiguous by default, close to Sparse VideoGen's 29 / 67 / 4 on HunyuanVideo.
// Every value comes from a counter-based generator keyed by (seed, head,
// tensor, row), so the data does not depend on the thread count.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tilesplash/tensor.h"
#include "tilesplash/video.h"

namespace tilesplash {

enum class PlantedHead : std::uint8_t { kSpatial, kTemporal, kAmbiguous };
std::string_view to_string(PlantedHead planted);  // "spatial", "temporal", "ambiguous"

struct WorkloadOptions {
  std::int64_t heads = 2;
  std::int64_t head_dim = 128;  // also the value dim
  DType dtype = DType::kBF16;
  std::uint64_t seed = 0;
  double spatial_fraction = 0.30;
  double ambiguous_fraction = 0.05;  // temporal heads are the rest
  // One entry per head when non-empty; overrides the fractions.
  std::vector<PlantedHead> planted;
  double sharpness = 12.0;  // scaled score of two tokens with the same feature (> 0)
  double noise = 0.3;       // per-token noise, relative to the unit feature (>= 0)
  int threads = 0;          // 0: all hardware threads
};

class VideoWorkload {
 public:
  // Throws std::invalid_argument naming the bad option.
  VideoWorkload(const VideoGeometry& geometry, WorkloadOptions options);

  const VideoGeometry& geometry() const { return geometry_; }
  const WorkloadOptions& options() const { return options_; }
  std::int64_t heads() const { return options_.heads; }
  std::int64_t head_dim() const { return options_.head_dim; }
  const std::vector<PlantedHead>& planted() const { return planted_; }

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
