// Merging partial attention results through their log-sum-exps. Attention of
// the same queries over disjoint key sets K_1, ..., K_m, each computed with
// its LSE (attention.h), is exactly attention over their union:
//   LSE = log(sum_i exp(LSE_i)),   O = sum_i exp(LSE_i - LSE) * O_i.
// Ring attention assembles a rank's output from its ring steps this way, and
// any split of the keys (a text segment beside the video, a sink segment
// beside a band) can be run as separate plans and merged. Each row is merged
// on its own in double precision, parts in the order given, so the result is
// deterministic and does not depend on how rows are grouped. A row whose
// parts all have LSE = -inf (no kept key anywhere) gives O = 0 and LSE = -inf,
// never NaN; parts with LSE = -inf add nothing whatever their output holds.
#pragma once

#include <cstdint>
#include <span>

#include "tilesplash/tensor.h"
#include "tilesplash/tensor_layout.h"

namespace tilesplash {

struct MergeOptions {
  // Reject a NaN or Inf output value in a row whose LSE is finite (such a
  // part would carry its NaN into the merged row).
  bool check_finite = true;
};

// outputs[i]: [heads, len, dim] views, each of any dtype with its own
// strides; lses[i]: heads * len floats, [heads, len] row-major. out: the same
// heads, len and dim, any dtype; lse: heads * len floats or null. Throws
// std::invalid_argument naming the argument ("outputs[i]: ...", "lses[i]: ...",
// "out: ...", "lse: ...") when there are no parts, extents differ, a pointer
// is null, out or lse overlaps an input, an LSE is NaN or +inf (a score
// beyond the f32 range has no exact merge), or, with check_finite, an output
// value is NaN or Inf in a row that carries weight. Nothing is written then.
void merge_attention(std::span<const TensorView> outputs, std::span<const float* const> lses,
                     const MutableTensorView& out, float* lse, const MergeOptions& options = {});

// The same on whole tensors in a layout (tensor_layout.h: hnd, bhnd, bnhd,
// any element strides, the dimension axis included): outputs[i] and out
// in `layout`, lses[i] and lse [batch, heads, len] row-major ([heads, len]
// for hnd), as masked_attention() writes them.
void merge_attention(Layout layout, std::span<const StridedTensor> outputs,
                     std::span<const float* const> lses, const MutableStridedTensor& out,
                     float* lse, const MergeOptions& options = {});

}  // namespace tilesplash
