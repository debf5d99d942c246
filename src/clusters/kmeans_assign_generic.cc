// The portable k-means assignment loop.
#include "clusters/kmeans_assign-inl.h"

namespace tilesplash::detail {

void assign_nearest_generic(const float* points, std::int64_t d, std::int64_t begin,
                            std::int64_t end, const float* panels, const float* norms,
                            std::int64_t k_padded, std::int32_t* labels) {
  assign_nearest_body(points, d, begin, end, panels, norms, k_padded, labels);
}

}  // namespace tilesplash::detail
