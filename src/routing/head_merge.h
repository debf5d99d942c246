// The last step of a sparse head: bring its run-order result back to the
// original order, merging the band and sink segments exactly through their
// log-sum-exps, and store it in the caller's output dtype.
#pragma once

#include <cstdint>

#include "runtime/thread_pool.h"
#include "tilesplash/candidates.h"
#include "tilesplash/tensor.h"

namespace tilesplash::detail {

// One head, run-order partial results as [tokens, dv] f32 rows with their LSEs.
struct PartialResult {
  const float* out = nullptr;
  const float* lse = nullptr;
};

// out row n and lse[n] (original order) = run-order row r = order.position(n)
// (n itself for the identity) of
//   (e^{a} O1 + e^{b} O2) / (e^{a} + e^{b}),  LSE = log(e^{a} + e^{b}),
// a, b the two LSEs; sink.out null means the band result alone. A row with
// no kept key in either gives 0 and -inf. out is a one-head view; lse may be null.
void finish_head(runtime::ThreadPool& pool, int threads, std::int64_t tokens, const RowOrder& order,
                 PartialResult band, PartialResult sink, std::int64_t dv,
                 const MutableTensorView& out, float* lse);

}  // namespace tilesplash::detail
