// Per-head feature tables of the synthetic workload: frame and patch
// features (spatial, temporal, ambiguous heads), object features and each
// token's object (cluster heads), random Fourier frequencies (decay and
// band heads).
#include "workload/planted_features.h"

#include <algorithm>
#include <cmath>

#include "workload/random_streams.h"

namespace tilesplash::detail {
namespace {

constexpr std::int64_t kChunkRows = 512;
constexpr double kFrameSmoothing = 0.5;
// Streams 0-2 are Q, K and V (workload.cc).
constexpr std::uint64_t kFrameStream = 3, kPatchStream = 4, kObjectStream = 5,
                        kMembershipStream = 6, kFrequencyStream = 7, kBandStream = 8;
// Band heads: the weight falls by e^-kBandDecay at the band's half-width.
constexpr double kBandDecay = 6.0;

void normalise(float* x, std::int64_t n) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float inv = sum > 0.0 ? static_cast<float>(1.0 / std::sqrt(sum)) : 0.0f;
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

std::int64_t planted_object(std::uint64_t head_key, std::int64_t video_index,
                            std::int64_t objects) {
  return static_cast<std::int64_t>(hashed_word(hash_combine(head_key, kMembershipStream),
                                               static_cast<std::uint64_t>(video_index)) %
                                   static_cast<std::uint64_t>(objects));
}

PlantedFeatures::PlantedFeatures(const VideoGeometry& geometry, const WorkloadOptions& options,
                                 PlantedHead kind, std::uint64_t head_key,
                                 ThreadingContext& context, int threads, double band_width)
    : geometry_(geometry), options_(options), head_key_(head_key), d_(options.head_dim) {
  switch (kind) {
    case PlantedHead::kSpatial:
      frame_ = true;
      break;
    case PlantedHead::kTemporal:
      patch_ = true;
      break;
    case PlantedHead::kAmbiguous:
    case PlantedHead::kSpatialTemporal:
      frame_ = patch_ = true;
      break;
    case PlantedHead::kCluster:
      object_ = true;
      break;
    case PlantedHead::kDecay:
      decay_ = true;
      break;
    case PlantedHead::kDecayCluster:
      decay_ = object_ = true;
      break;
    case PlantedHead::kSpatialBand:
    case PlantedHead::kTemporalBand:
      band_ = true;
      band_temporal_ = kind == PlantedHead::kTemporalBand;
      band_frequencies(band_width);
      break;
  }
  if (static_cast<int>(frame_) + patch_ + object_ + decay_ == 2) {
    mix_ = static_cast<float>(1.0 / std::sqrt(2.0));
  }
  if (frame_ || patch_) frame_and_patch_features(context, threads);
  if (object_) object_features();
  if (decay_) frequencies();
}

void PlantedFeatures::frame_and_patch_features(ThreadingContext& context, int threads) {
  const std::int64_t frames = geometry_.frames, patches = geometry_.tokens_per_frame(), d = d_;
  const auto stream = [&](std::uint64_t s) { return Gaussian(hash_combine(head_key_, s)); };
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<float> raw(static_cast<std::size_t>(frames * d));
  frame_features_.resize(static_cast<std::size_t>(frames * d));
  patch_features_.resize(static_cast<std::size_t>(patches * d));
  for (std::int64_t f = 0; f < frames; ++f) {
    stream(kFrameStream).fill(static_cast<std::uint64_t>(f), &raw[f * d], d, inv_sqrt_d);
  }
  for (std::int64_t f = 0; f < frames; ++f) {
    float* e = &frame_features_[f * d];
    for (std::int64_t c = 0; c < d; ++c) {
      float value = raw[f * d + c];
      if (f > 0) value += kFrameSmoothing * raw[(f - 1) * d + c];
      if (f + 1 < frames) value += kFrameSmoothing * raw[(f + 1) * d + c];
      e[c] = value;
    }
    normalise(e, d);
  }
  context.run(threads, (patches + kChunkRows - 1) / kChunkRows, [&](std::int64_t chunk, int) {
    for (std::int64_t p = chunk * kChunkRows; p < std::min(patches, (chunk + 1) * kChunkRows);
         ++p) {
      stream(kPatchStream).fill(static_cast<std::uint64_t>(p), &patch_features_[p * d], d, 1.0);
      normalise(&patch_features_[p * d], d);
    }
  });
}

void PlantedFeatures::object_features() {
  const std::int64_t objects = options_.objects, d = d_;
  object_features_.resize(static_cast<std::size_t>(objects * d));
  const Gaussian stream(hash_combine(head_key_, kObjectStream));
  for (std::int64_t m = 0; m < objects; ++m) {
    stream.fill(static_cast<std::uint64_t>(m), &object_features_[m * d], d, 1.0);
    normalise(&object_features_[m * d], d);
  }
}

void PlantedFeatures::frequencies() {
  // Multivariate Cauchy vectors, a Gaussian vector over the absolute value
  // of one more Gaussian: the Fourier transform of exp(-|scaled distance|).
  const Gaussian stream(hash_combine(head_key_, kFrequencyStream));
  const double scale[3] = {1.0 / options_.decay_frames, 1.0 / options_.decay_patches,
                           1.0 / options_.decay_patches};
  const std::int64_t count = std::max<std::int64_t>(1, d_ / 2);
  frequencies_.resize(static_cast<std::size_t>(count * 3));
  float g[4];
  for (std::int64_t i = 0; i < count; ++i) {
    stream.fill(static_cast<std::uint64_t>(i), g, 4, 1.0);
    const double radius = std::max(std::abs(static_cast<double>(g[3])), 1e-12);
    for (int axis = 0; axis < 3; ++axis) {
      frequencies_[static_cast<std::size_t>(3 * i + axis)] = scale[axis] * g[axis] / radius;
    }
  }
}

void PlantedFeatures::band_frequencies(double band_width) {
  // Scores are sharpness * exp(-|x - x'| / l) ~ sharpness * (1 - |x - x'| / l):
  // the weight falls by e^-kBandDecay at |x - x'| = W when l = sharpness * W / kBandDecay.
  const double video = static_cast<double>(geometry_.video_tokens());
  const double half_width = std::max(1.0, video * (1.0 - std::sqrt(1.0 - band_width)));
  const double length = options_.sharpness * half_width / kBandDecay;
  const Gaussian stream(hash_combine(head_key_, kBandStream));
  const std::int64_t count = std::max<std::int64_t>(1, d_ / 2);
  band_frequencies_.resize(static_cast<std::size_t>(count));
  float g[2];
  for (std::int64_t i = 0; i < count; ++i) {
    stream.fill(static_cast<std::uint64_t>(i), g, 2, 1.0);
    const double radius = std::max(std::abs(static_cast<double>(g[1])), 1e-12);
    band_frequencies_[static_cast<std::size_t>(i)] = g[0] / radius / length;
  }
}

void PlantedFeatures::feature(std::int64_t video_index, float* out) const {
  const std::int64_t d = d_, patches = geometry_.tokens_per_frame();
  const std::int64_t f = video_index / patches, p = video_index % patches;
  std::fill(out, out + d, 0.0f);
  for (std::int64_t c = 0; c < d; ++c) {
    if (frame_) out[c] += mix_ * frame_features_[f * d + c];
    if (patch_) out[c] += mix_ * patch_features_[p * d + c];
  }
  if (object_) {
    const std::int64_t m =
        static_cast<std::int64_t>(hashed_word(hash_combine(head_key_, kMembershipStream),
                                              static_cast<std::uint64_t>(video_index)) %
                                  static_cast<std::uint64_t>(options_.objects));
    for (std::int64_t c = 0; c < d; ++c) out[c] += mix_ * object_features_[m * d + c];
  }
  if (band_) {
    const double x = static_cast<double>(band_temporal_ ? p * geometry_.frames + f : video_index);
    const std::int64_t count = static_cast<std::int64_t>(band_frequencies_.size());
    const double amplitude = std::sqrt(1.0 / static_cast<double>(count));
    for (std::int64_t i = 0; i < count && 2 * i < d; ++i) {
      const double phase = band_frequencies_[static_cast<std::size_t>(i)] * x;
      out[2 * i] += static_cast<float>(amplitude * std::cos(phase));
      if (2 * i + 1 < d) out[2 * i + 1] += static_cast<float>(amplitude * std::sin(phase));
    }
  }
  if (decay_) {
    const double z[3] = {static_cast<double>(f), static_cast<double>(p / geometry_.width),
                         static_cast<double>(p % geometry_.width)};
    const std::int64_t count = static_cast<std::int64_t>(frequencies_.size()) / 3;
    const double amplitude = mix_ * std::sqrt(1.0 / static_cast<double>(count));
    for (std::int64_t i = 0; i < count && 2 * i < d; ++i) {
      const double* w = &frequencies_[static_cast<std::size_t>(3 * i)];
      const double phase = w[0] * z[0] + w[1] * z[1] + w[2] * z[2];
      out[2 * i] += static_cast<float>(amplitude * std::cos(phase));
      if (2 * i + 1 < d) out[2 * i + 1] += static_cast<float>(amplitude * std::sin(phase));
    }
  }
}

}  // namespace tilesplash::detail
