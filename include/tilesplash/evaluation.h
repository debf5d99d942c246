// Sparse against dense on the same data: the measurement behind `tilesplash
// demo` and `route --compare-dense`, and the check a binding runs before
// trusting a sparse configuration on its own activations. The video front
// door runs Q, K and V once with its routing and once with every head forced
// dense (same tiles, threads and scale), and the comparison reports both
// layers' timings and, per head, the cosine similarity of the two outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "tilesplash/routing.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"

namespace tilesplash {

struct DenseComparisonOptions {
  std::int64_t layer = 0;  // given to the warm-up policy and the router
  std::int64_t step = 0;
  bool compare_dense = true;
  // 0: one run of each side. >= 1: one untimed run (plans, workspaces), then
  // `repeats` timed runs; every time reported is the median over them.
  int repeats = 0;
  // One forward() per head instead of one per layer, calling on_head(head,
  // dense) after each: for progress bars. The outputs are the same (the
  // router's rows depend on the seed, layer and step, not on the heads).
  bool head_by_head = false;
  std::function<void(std::int64_t head, bool dense)> on_head;
  // Both sides run on this context, one after the other; null: one private
  // context for the comparison.
  std::shared_ptr<ThreadingContext> context;
};

struct DenseComparison {
  LayerReport sparse;                // per head: choice, density, seconds; per layer: the totals
  std::optional<LayerReport> dense;  // the same layer with every head dense
  std::vector<double> cosine;        // per head, sparse output vs dense; empty without dense
  std::vector<double> relative_l2;   // per head, |sparse - dense| / |dense|; likewise
  // What the sparse side's heads chose among, in the order of their MSEs
  // (for head_fields()); empty for svg2.
  std::vector<MaskCandidate> candidates;
};

// q, k, v: [heads, tokens, d] views of one layer (attention.h rules).
// Throws std::invalid_argument as VideoAttention does.
DenseComparison compare_with_dense(const VideoGeometry& geometry,
                                   const VideoAttentionOptions& options, const TensorView& q,
                                   const TensorView& k, const TensorView& v,
                                   const DenseComparisonOptions& compare = {});

// Cosine similarity of two vectors in double precision; 0 when either is zero.
double cosine_similarity(const float* a, const float* b, std::int64_t count);
// |a - b| / |b| (L2 norms) in double precision; 0 when both are zero, inf when only b is.
double relative_l2(const float* a, const float* b, std::int64_t count);

}  // namespace tilesplash
