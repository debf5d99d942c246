#include "video_setup.h"

#include <utility>

namespace tilesplash::cli {

VideoSetup resolve_video(const ShapeOptions& shape, std::int64_t head_dim, const std::string& dtype,
                         std::int64_t threads) {
  VideoSetup setup{shape.resolve(), 0, DType::kBF16, nullptr, 1};
  setup.head_dim = head_dim > 0 ? head_dim : setup.shape.head_dim();
  setup.dtype = *parse_dtype(dtype);
  setup.context = std::make_shared<ThreadingContext>(static_cast<int>(threads));
  setup.threads = setup.context->threads();
  return setup;
}

std::unique_ptr<VideoWorkload> make_workload(const VideoSetup& setup, std::int64_t heads,
                                             std::uint64_t seed, std::vector<PlantedHead> planted) {
  WorkloadOptions options;
  options.heads = heads;
  options.seed = seed;
  if (!planted.empty()) options.planted = std::move(planted);
  return make_workload(setup, std::move(options));
}

std::unique_ptr<VideoWorkload> make_workload(const VideoSetup& setup, WorkloadOptions options) {
  options.head_dim = setup.head_dim;
  options.dtype = setup.dtype;
  options.threads = setup.threads;
  return std::make_unique<VideoWorkload>(setup.shape.geometry, options, setup.context.get());
}

nlohmann::ordered_json preset_name(const VideoShape& shape) {
  return shape.preset ? nlohmann::ordered_json(std::string(shape.preset->name))
                      : nlohmann::ordered_json(nullptr);
}

}  // namespace tilesplash::cli
