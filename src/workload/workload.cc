// The synthetic video workload; the construction is documented in workload.h.
#include "tilesplash/workload.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "masks/mask_util.h"
#include "runtime/thread_pool.h"

namespace tilesplash {
namespace {

constexpr std::int64_t kChunkRows = 512;
constexpr double kAmbiguousSharpness = 0.35;
constexpr double kFrameSmoothing = 0.5;
constexpr std::uint64_t kQ = 0, kK = 1, kV = 2, kFrameStream = 3, kPatchStream = 4;

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("VideoWorkload: " + message);
}

// Standard normals from a counter: Box-Muller on two hashed uniforms.
class Gaussian {
 public:
  explicit Gaussian(std::uint64_t key) : key_(key) {}
  // Fills out[0, n) with N(0, 1) * factor.
  void fill(std::uint64_t index, float* out, std::int64_t n, double factor) const {
    constexpr double kTwoPi = 6.283185307179586;
    for (std::int64_t i = 0; i < n; i += 2) {
      const std::uint64_t x = detail::mix64(key_ ^ (index * 0x9e3779b97f4a7c15ULL + i));
      const std::uint64_t y = detail::mix64(x ^ 0x5851f42d4c957f2dULL);
      const double u1 = static_cast<double>((x >> 11) + 1) * 0x1.0p-53;  // (0, 1]
      const double u2 = static_cast<double>(y >> 11) * 0x1.0p-53;
      const double r = std::sqrt(-2.0 * std::log(u1)) * factor;
      out[i] = static_cast<float>(r * std::cos(kTwoPi * u2));
      if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
    }
  }

 private:
  std::uint64_t key_;
};

void normalise(float* x, std::int64_t n) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float inv = sum > 0.0 ? static_cast<float>(1.0 / std::sqrt(sum)) : 0.0f;
  for (std::int64_t i = 0; i < n; ++i) x[i] *= inv;
}

std::vector<PlantedHead> assign_kinds(const WorkloadOptions& o) {
  if (!o.planted.empty()) {
    if (static_cast<std::int64_t>(o.planted.size()) != o.heads) {
      fail("options.planted must have one entry per head (" + std::to_string(o.heads) + "), got " +
           std::to_string(o.planted.size()));
    }
    return o.planted;
  }
  const auto count = [&](double fraction) {
    return static_cast<std::int64_t>(std::llround(fraction * static_cast<double>(o.heads)));
  };
  const std::int64_t spatial = std::min(count(o.spatial_fraction), o.heads);
  const std::int64_t ambiguous = std::min(count(o.ambiguous_fraction), o.heads - spatial);
  std::vector<PlantedHead> kinds(static_cast<std::size_t>(o.heads), PlantedHead::kTemporal);
  std::fill_n(kinds.begin(), spatial, PlantedHead::kSpatial);
  std::fill_n(kinds.begin() + spatial, ambiguous, PlantedHead::kAmbiguous);
  std::uint64_t state = detail::mix64(o.seed ^ 0x686561647300ULL);
  for (std::int64_t i = o.heads - 1; i > 0; --i) {  // Fisher-Yates
    state = detail::mix64(state);
    const auto j =
        static_cast<std::int64_t>((static_cast<unsigned __int128>(state) * (i + 1)) >> 64);
    std::swap(kinds[static_cast<std::size_t>(i)], kinds[static_cast<std::size_t>(j)]);
  }
  return kinds;
}

void check(const VideoGeometry& geometry, const WorkloadOptions& o) {
  geometry.validate();
  if (o.heads < 1) fail("options.heads must be >= 1, got " + std::to_string(o.heads));
  if (o.head_dim < 1) fail("options.head_dim must be >= 1, got " + std::to_string(o.head_dim));
  const auto fraction = [](const char* name, double value) {
    if (!(value >= 0.0 && value <= 1.0)) {
      fail(std::string("options.") + name + " must be in [0, 1], got " + std::to_string(value));
    }
  };
  fraction("spatial_fraction", o.spatial_fraction);
  fraction("ambiguous_fraction", o.ambiguous_fraction);
  if (o.spatial_fraction + o.ambiguous_fraction > 1.0) {
    fail("options.spatial_fraction + ambiguous_fraction must be <= 1, got " +
         std::to_string(o.spatial_fraction + o.ambiguous_fraction));
  }
  if (!(o.sharpness > 0.0 && std::isfinite(o.sharpness))) {
    fail("options.sharpness must be a finite number > 0, got " + std::to_string(o.sharpness));
  }
  if (!(o.noise >= 0.0 && std::isfinite(o.noise))) {
    fail("options.noise must be a finite number >= 0, got " + std::to_string(o.noise));
  }
  const double elements = 3.0 * static_cast<double>(o.heads) *
                          static_cast<double>(geometry.tokens()) * static_cast<double>(o.head_dim);
  if (elements > 1e12) fail("heads * tokens * head_dim is too large to generate");
}

}  // namespace

std::string_view to_string(PlantedHead planted) {
  switch (planted) {
    case PlantedHead::kSpatial:
      return "spatial";
    case PlantedHead::kTemporal:
      return "temporal";
    case PlantedHead::kAmbiguous:
      return "ambiguous";
  }
  return "?";
}

VideoWorkload::VideoWorkload(const VideoGeometry& geometry, WorkloadOptions options)
    : geometry_(geometry), options_(std::move(options)) {
  check(geometry_, options_);
  planted_ = assign_kinds(options_);
  const std::int64_t heads = options_.heads, d = options_.head_dim, n = geometry_.tokens();
  const std::int64_t frames = geometry_.frames, patches = geometry_.tokens_per_frame();
  const std::size_t total = static_cast<std::size_t>(heads * n * d);
  for (int t = 0; t < 3; ++t) {
    if (options_.dtype == DType::kF32) {
      f32_[t].resize(total);
    } else {
      bits16_[t].resize(total);
    }
  }
  runtime::ThreadPool pool;
  const int threads =
      options_.threads > 0 ? options_.threads : runtime::ThreadPool::hardware_threads();
  const IndexRange video = geometry_.video_range();
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<float> frame_raw(static_cast<std::size_t>(frames * d));
  std::vector<float> frame_features(static_cast<std::size_t>(frames * d));
  std::vector<float> patch_features(static_cast<std::size_t>(patches * d));

  for (std::int64_t h = 0; h < heads; ++h) {
    const std::uint64_t head_key =
        detail::hash_combine(options_.seed, static_cast<std::uint64_t>(h));
    const auto stream = [&](std::uint64_t s) {
      return Gaussian(detail::hash_combine(head_key, s));
    };
    for (std::int64_t f = 0; f < frames; ++f) {
      stream(kFrameStream).fill(static_cast<std::uint64_t>(f), &frame_raw[f * d], d, inv_sqrt_d);
    }
    for (std::int64_t f = 0; f < frames; ++f) {
      float* e = &frame_features[f * d];
      for (std::int64_t c = 0; c < d; ++c) {
        float value = frame_raw[f * d + c];
        if (f > 0) value += kFrameSmoothing * frame_raw[(f - 1) * d + c];
        if (f + 1 < frames) value += kFrameSmoothing * frame_raw[(f + 1) * d + c];
        e[c] = value;
      }
      normalise(e, d);
    }
    pool.run(threads, (patches + kChunkRows - 1) / kChunkRows, [&](std::int64_t chunk, int) {
      for (std::int64_t p = chunk * kChunkRows; p < std::min(patches, (chunk + 1) * kChunkRows);
           ++p) {
        stream(kPatchStream).fill(static_cast<std::uint64_t>(p), &patch_features[p * d], d, 1.0);
        normalise(&patch_features[p * d], d);
      }
    });

    const PlantedHead kind = planted_[static_cast<std::size_t>(h)];
    const double sharpness =
        options_.sharpness * (kind == PlantedHead::kAmbiguous ? kAmbiguousSharpness : 1.0);
    const float amplitude =
        static_cast<float>(std::sqrt(sharpness * std::sqrt(static_cast<double>(d))));
    const double noise = options_.noise * inv_sqrt_d;
    const float mix =
        kind == PlantedHead::kAmbiguous ? static_cast<float>(1.0 / std::sqrt(2.0)) : 1.0f;
    pool.run(threads, (n + kChunkRows - 1) / kChunkRows, [&](std::int64_t chunk, int) {
      std::vector<float> row(static_cast<std::size_t>(d));
      std::vector<float> feature(static_cast<std::size_t>(d));
      for (std::int64_t r = chunk * kChunkRows; r < std::min(n, (chunk + 1) * kChunkRows); ++r) {
        std::fill(feature.begin(), feature.end(), 0.0f);
        if (geometry_.is_video(r)) {
          const std::int64_t f = (r - video.begin) / patches, p = (r - video.begin) % patches;
          for (std::int64_t c = 0; c < d; ++c) {
            if (kind != PlantedHead::kTemporal) feature[c] += mix * frame_features[f * d + c];
            if (kind != PlantedHead::kSpatial) feature[c] += mix * patch_features[p * d + c];
          }
        }
        const std::size_t offset = static_cast<std::size_t>((h * n + r) * d);
        for (int t = 0; t < 3; ++t) {
          if (t == 2) {
            stream(kV).fill(static_cast<std::uint64_t>(r), row.data(), d, 1.0);
          } else {
            stream(t == 0 ? kQ : kK).fill(static_cast<std::uint64_t>(r), row.data(), d, noise);
            for (std::int64_t c = 0; c < d; ++c) row[c] = amplitude * (feature[c] + row[c]);
          }
          if (options_.dtype == DType::kF32) {
            std::copy(row.begin(), row.end(),
                      f32_[t].begin() + static_cast<std::ptrdiff_t>(offset));
          } else {
            std::uint16_t* dst = bits16_[t].data() + offset;
            for (std::int64_t c = 0; c < d; ++c) {
              dst[c] =
                  options_.dtype == DType::kBF16 ? float_to_bf16(row[c]) : float_to_f16(row[c]);
            }
          }
        }
      }
    });
  }
}

TensorView VideoWorkload::view(int tensor) const {
  const void* data = options_.dtype == DType::kF32
                         ? static_cast<const void*>(f32_[tensor].data())
                         : static_cast<const void*>(bits16_[tensor].data());
  return TensorView::contiguous(data, options_.dtype, options_.heads, geometry_.tokens(),
                                options_.head_dim);
}

}  // namespace tilesplash
