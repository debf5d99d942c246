// The row permutations behind permute_to_token_major / permute_to_frame_major
// and the candidates' run orders, on a caller's threading context, so the
// front door runs them on its own.
#pragma once

#include "tilesplash/candidates.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"

namespace tilesplash::detail {

// dst gets src's rows in order `to` (src is in the other order). Validates
// shapes; throws std::invalid_argument naming the argument.
void permute_rows(ThreadingContext& context, int threads, const VideoGeometry& geometry,
                  TokenOrder to, const TensorView& src, const MutableTensorView& dst);

// dst row r = src row order.source(r), for every head: rows gathered into run
// order. src and dst share dtype, heads and dim; len == order.size() (a
// non-identity order). Throws std::invalid_argument naming the argument.
void gather_rows(ThreadingContext& context, int threads, const RowOrder& order,
                 const TensorView& src, const MutableTensorView& dst);

}  // namespace tilesplash::detail
