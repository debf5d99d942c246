// The row permutation behind permute_to_token_major / permute_to_frame_major,
// on a caller's thread pool, so the front door reuses its own workers.
#pragma once

#include "runtime/thread_pool.h"
#include "tilesplash/video.h"

namespace tilesplash::detail {

// dst gets src's rows in order `to` (src is in the other order). Validates
// shapes; throws std::invalid_argument naming the argument.
void permute_rows(runtime::ThreadPool& pool, int threads, const VideoGeometry& geometry,
                  TokenOrder to, const TensorView& src, const MutableTensorView& dst);

}  // namespace tilesplash::detail
