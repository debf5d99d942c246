// What the video commands (route, demo, compare) resolve first, the same way:
// the model shape, head dim and dtype, one threading context for the
// workload and the runners, and the seeded synthetic workload they run on.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "options.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"
#include "tilesplash/workload.h"

namespace tilesplash::cli {

struct VideoSetup {
  VideoShape shape;
  std::int64_t head_dim = 0;
  DType dtype = DType::kBF16;
  std::shared_ptr<ThreadingContext> context;
  int threads = 1;
};

// --preset / --geometry resolved; head_dim 0 takes the shape's; threads 0
// all hardware threads.
VideoSetup resolve_video(const ShapeOptions& shape, std::int64_t head_dim, const std::string& dtype,
                         std::int64_t threads);

// The seeded workload of `heads` heads; `planted` empty: the generator's mix.
std::unique_ptr<VideoWorkload> make_workload(const VideoSetup& setup, std::int64_t heads,
                                             std::uint64_t seed,
                                             std::vector<PlantedHead> planted = {});
// The workload of `options` (heads, seed, kinds as given) on the setup's shape,
// head dim, dtype and threads.
std::unique_ptr<VideoWorkload> make_workload(const VideoSetup& setup, WorkloadOptions options);

// The preset's name, or null for a custom geometry.
nlohmann::ordered_json preset_name(const VideoShape& shape);

}  // namespace tilesplash::cli
