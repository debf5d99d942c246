// The synthetic video workload; the construction is documented in workload.h.
#include "tilesplash/workload.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "masks/mask_util.h"
#include "workload/planted_features.h"
#include "workload/random_streams.h"

namespace tilesplash {
namespace {

constexpr std::int64_t kChunkRows = 512;
constexpr double kAmbiguousSharpness = 0.35;
constexpr std::uint64_t kQ = 0, kK = 1, kV = 2;  // features use streams 3 on
constexpr std::array<PlantedHead, 7> kKinds = {
    PlantedHead::kSpatial,     PlantedHead::kTemporal, PlantedHead::kAmbiguous,
    PlantedHead::kCluster,     PlantedHead::kDecay,    PlantedHead::kSpatialTemporal,
    PlantedHead::kDecayCluster};
constexpr std::array<PlantedHead, 2> kBandKinds = {PlantedHead::kSpatialBand,
                                                   PlantedHead::kTemporalBand};
constexpr double kDefaultBandWidth = 0.15;

using detail::Gaussian;

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("VideoWorkload: " + message);
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
  if (!o.band_widths.empty() && static_cast<std::int64_t>(o.band_widths.size()) != o.heads) {
    fail("options.band_widths must have one entry per head (" + std::to_string(o.heads) +
         ") or none, got " + std::to_string(o.band_widths.size()));
  }
  for (std::size_t h = 0; h < o.band_widths.size(); ++h) {
    if (!(o.band_widths[h] > 0.0 && o.band_widths[h] <= 1.0)) {
      fail("options.band_widths[" + std::to_string(h) + "] must be in (0, 1], got " +
           std::to_string(o.band_widths[h]));
    }
  }
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
  if (o.objects < 1) fail("options.objects must be >= 1, got " + std::to_string(o.objects));
  for (const auto& [name, value] :
       {std::pair{"decay_frames", o.decay_frames}, std::pair{"decay_patches", o.decay_patches}}) {
    if (!(value > 0.0 && std::isfinite(value))) {
      fail(std::string("options.") + name + " must be a finite number > 0, got " +
           std::to_string(value));
    }
  }
  const double elements = 3.0 * static_cast<double>(o.heads) *
                          static_cast<double>(geometry.tokens()) * static_cast<double>(o.head_dim);
  if (elements > 1e12) fail("heads * tokens * head_dim is too large to generate");
}

}  // namespace

std::string_view to_string(PlantedHead planted) {
  switch (planted) {
    case PlantedHead::kSpatial:  // planted for that mask: named as it
      return to_string(VideoMaskKind::kSpatial);
    case PlantedHead::kTemporal:
      return to_string(VideoMaskKind::kTemporal);
    case PlantedHead::kAmbiguous:
      return "ambiguous";
    case PlantedHead::kCluster:
      return "cluster";
    case PlantedHead::kDecay:
      return "decay";
    case PlantedHead::kSpatialTemporal:
      return "spatial+temporal";
    case PlantedHead::kDecayCluster:
      return "decay+cluster";
    case PlantedHead::kSpatialBand:
      return "spatial-band";
    case PlantedHead::kTemporalBand:
      return "temporal-band";
  }
  return "?";
}

std::span<const PlantedHead> planted_heads() { return kKinds; }
std::span<const PlantedHead> band_heads() { return kBandKinds; }

PlantedHead parse_planted_head(std::string_view name) {
  std::string names;
  for (const auto& kinds :
       {std::span<const PlantedHead>(kKinds), std::span<const PlantedHead>(kBandKinds)}) {
    for (const PlantedHead kind : kinds) {
      if (to_string(kind) == name) return kind;
      names += (names.empty() ? "" : ", ") + std::string(to_string(kind));
    }
  }
  throw std::invalid_argument("unknown planted head type '" + std::string(name) + "' (expected " +
                              names + ")");
}

VideoWorkload::VideoWorkload(const VideoGeometry& geometry, WorkloadOptions options,
                             ThreadingContext* context)
    : geometry_(geometry), options_(std::move(options)) {
  check(geometry_, options_);
  planted_ = assign_kinds(options_);
  const std::int64_t heads = options_.heads, d = options_.head_dim, n = geometry_.tokens();
  const std::size_t total = static_cast<std::size_t>(heads * n * d);
  for (int t = 0; t < 3; ++t) {
    if (options_.dtype == DType::kF32) {
      f32_[t].resize(total);
    } else {
      bits16_[t].resize(total);
    }
  }
  ThreadingContext& threading = context != nullptr ? *context : *default_threading_context();
  const int threads = threading.resolve(options_.threads);
  const IndexRange video = geometry_.video_range();
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d));

  for (std::int64_t h = 0; h < heads; ++h) {
    const std::uint64_t head_key =
        detail::hash_combine(options_.seed, static_cast<std::uint64_t>(h));
    const auto stream = [&](std::uint64_t s) {
      return Gaussian(detail::hash_combine(head_key, s));
    };
    const PlantedHead kind = planted_[static_cast<std::size_t>(h)];
    const double band_width = options_.band_widths.empty()
                                  ? kDefaultBandWidth
                                  : options_.band_widths[static_cast<std::size_t>(h)];
    const detail::PlantedFeatures features(geometry_, options_, kind, head_key, threading, threads,
                                           band_width);
    const double sharpness =
        options_.sharpness * (kind == PlantedHead::kAmbiguous ? kAmbiguousSharpness : 1.0);
    const float amplitude =
        static_cast<float>(std::sqrt(sharpness * std::sqrt(static_cast<double>(d))));
    const double noise = options_.noise * inv_sqrt_d;
    threading.run(threads, (n + kChunkRows - 1) / kChunkRows, [&](std::int64_t chunk, int) {
      std::vector<float> row(static_cast<std::size_t>(d));
      std::vector<float> feature(static_cast<std::size_t>(d));
      for (std::int64_t r = chunk * kChunkRows; r < std::min(n, (chunk + 1) * kChunkRows); ++r) {
        if (geometry_.is_video(r)) {
          features.feature(r - video.begin, feature.data());
        } else {
          std::fill(feature.begin(), feature.end(), 0.0f);
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

WorkloadOptions planted_band_options(std::int64_t heads, std::uint64_t seed) {
  if (heads < 1) fail("planted_band_options: heads must be >= 1, got " + std::to_string(heads));
  WorkloadOptions options;
  options.heads = heads;
  options.seed = seed;
  const std::int64_t widths = std::max<std::int64_t>(1, (heads + 1) / 2);
  for (std::int64_t h = 0; h < heads; ++h) {
    options.planted.push_back(h % 2 == 0 ? PlantedHead::kSpatialBand : PlantedHead::kTemporalBand);
    const double t =
        widths == 1 ? 0.0 : static_cast<double>(h / 2) / static_cast<double>(widths - 1);
    options.band_widths.push_back(0.03 * std::pow(0.40 / 0.03, t));
  }
  return options;
}

std::int64_t VideoWorkload::object(std::int64_t head, std::int64_t token) const {
  if (head < 0 || head >= options_.heads) {
    fail("object: head must be in [0, " + std::to_string(options_.heads) + "), got " +
         std::to_string(head));
  }
  const PlantedHead kind = planted_[static_cast<std::size_t>(head)];
  if ((kind != PlantedHead::kCluster && kind != PlantedHead::kDecayCluster) ||
      !geometry_.is_video(token)) {
    return -1;
  }
  return detail::planted_object(
      detail::hash_combine(options_.seed, static_cast<std::uint64_t>(head)),
      token - geometry_.video_range().begin, options_.objects);
}

TensorView VideoWorkload::view(int tensor) const {
  const void* data = options_.dtype == DType::kF32
                         ? static_cast<const void*>(f32_[tensor].data())
                         : static_cast<const void*>(bits16_[tensor].data());
  return TensorView::contiguous(data, options_.dtype, options_.heads, geometry_.tokens(),
                                options_.head_dim);
}

}  // namespace tilesplash
