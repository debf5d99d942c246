// The unit feature of every video token of one head, by the head's planted
// type (the construction is documented in tilesplash/workload.h).
#pragma once

#include <cstdint>
#include <vector>

#include "tilesplash/threading.h"
#include "tilesplash/video.h"
#include "tilesplash/workload.h"

namespace tilesplash::detail {

// The object of video token `video_index` in a cluster head.
std::int64_t planted_object(std::uint64_t head_key, std::int64_t video_index, std::int64_t objects);

class PlantedFeatures {
 public:
  // head_key: the head's random key; features come from its own streams.
  // band_width: the head's band density (band kinds only).
  PlantedFeatures(const VideoGeometry& geometry, const WorkloadOptions& options, PlantedHead kind,
                  std::uint64_t head_key, ThreadingContext& context, int threads,
                  double band_width = 0.15);

  // out[0, d) = the feature of video token `video_index` (frame-major, from 0).
  void feature(std::int64_t video_index, float* out) const;

 private:
  void frame_and_patch_features(ThreadingContext& context, int threads);
  void object_features();
  void frequencies();
  void band_frequencies(double band_width);

  VideoGeometry geometry_;
  const WorkloadOptions& options_;
  std::uint64_t head_key_;
  std::int64_t d_;
  bool frame_ = false, patch_ = false, object_ = false, decay_ = false;
  bool band_ = false, band_temporal_ = false;
  std::vector<double> band_frequencies_;  // d / 2, already over the band's length
  float mix_ = 1.0f;
  std::vector<float> frame_features_, patch_features_, object_features_;
  std::vector<double> frequencies_;  // d / 2 x 3: (frame, row, column) per frequency
};

}  // namespace tilesplash::detail
