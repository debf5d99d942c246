// Per-head feature tables of the synthetic workload: frame and patch
// features (spatial, temporal, ambiguous heads), object features and each
// token's object (cluster heads), random Fourier frequencies (decay heads).
#include "workload/planted_features.h"

#include <algorithm>
#include <cmath>

#include "runtime/thread_pool.h"
#include "workload/random_streams.h"

namespace tilesplash::detail {
namespace {

constexpr std::int64_t kChunkRows = 512;
constexpr double kFrameSmoothing = 0.5;
// Streams 0-2 are Q, K and V (workload.cc).
constexpr std::uint64_t kFrameStream = 3, kPatchStream = 4, kObjectStream = 5,
                        kMembershipStream = 6, kFrequencyStream = 7;

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
                                 PlantedHead kind, std::uint64_t head_key, int threads)
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
  }
  if (static_cast<int>(frame_) + patch_ + object_ + decay_ == 2) {
    mix_ = static_cast<float>(1.0 / std::sqrt(2.0));
  }
  if (frame_ || patch_) frame_and_patch_features(threads);
  if (object_) object_features();
  if (decay_) frequencies();
}

void PlantedFeatures::frame_and_patch_features(int threads) {
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
  runtime::ThreadPool pool;
  pool.run(threads, (patches + kChunkRows - 1) / kChunkRows, [&](std::int64_t chunk, int) {
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
