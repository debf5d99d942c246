// Masked attention over whole tensors as callers hold them. Q, K, V and the
// output come in one of the layouts of tensor_layout.h (hnd [H, N, d], bhnd
// [B, H, N, d] as PyTorch's SDPA, bnhd [B, N, H, d] as diffusers and
// FlashAttention), each with its own element strides: a NumPy or PyTorch
// view, a transpose of another layout, a slice of a packed QKV buffer. This
// is the batch x head loop that the CLI's `attend` and the Python bindings
// share (routing_layout.h runs the video front door the same way): every batch
// entry becomes one strided [heads, N, d] view per tensor and one kernel call
// over all of its heads (all entries in one call when their heads are one
// stride apart), reading the caller's memory in place wherever the kernel's
// stride rules allow: elements of a row contiguous, rows at least a row apart,
// heads at least one element apart. Anything else (a broadcast or reversed
// axis) is packed into a contiguous copy first. Zero-size tensors follow one
// rule: no batch entries, heads or queries give an empty result; no keys
// give 0 with LSE = -inf, the kernel's answer for a row that keeps no key.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "tilesplash/attention.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tilesplash/plan_cache.h"
#include "tilesplash/tensor.h"
#include "tilesplash/tensor_layout.h"

namespace tilesplash {

// out has q's shape with v's head dim, dtype f32 or q's, and must meet the
// kernel's stride rules itself (it is written in place, never packed); lse,
// when not null, receives batch * heads * q_len floats, [batch, heads, q_len]
// in row-major order. Neither may overlap an input.
struct LayoutArgs {
  Layout layout = Layout::kBHND;
  StridedTensor q;
  StridedTensor k;
  StridedTensor v;
  MutableStridedTensor out;
  float* lse = nullptr;
};

// Whether the kernel reads `tensor` in place (every batch entry one strided
// view); otherwise each batch entry is packed into a contiguous copy first.
// Throws std::invalid_argument when the rank does not fit the layout.
bool reads_in_place(const StridedTensor& tensor, Layout layout);

// Extents read through the layout; batch is 1 for hnd.
struct LayoutShape {
  std::int64_t batch = 1;
  std::int64_t heads = 0;
  std::int64_t q_len = 0;
  std::int64_t kv_len = 0;
  std::int64_t head_dim = 0;
  std::int64_t v_dim = 0;
};

// Checks ranks, extents, dtypes and head dims (multiples of 8 in [8, 256])
// of every tensor against q and the layout, and that out and lse overlap no
// input. Throws std::invalid_argument whose message starts with the argument
// ("q: ", "k: ", "v: ", "out: ", "lse: ") and says what was expected.
LayoutShape check_layout_args(const LayoutArgs& args);

// Called after each kernel call with the batch entries [first, first + count) done.
using BatchProgress = std::function<void(std::int64_t first, std::int64_t count)>;

// Runs the plan on every head of every batch entry. The plan's lengths must
// match q_len and kv_len (so both are >= 1). Same bits as one kernel call per
// head, for any stride or thread count.
void layout_attention(AttentionBackend& backend, const TilePlan& plan, const LayoutArgs& args,
                      const AttentionOptions& options = {}, const BatchProgress& progress = {});

struct MaskedAttentionOptions {
  AttentionOptions attention;
  // Tiles; unset sides come from cached_block_choice() (tuning.h).
  std::optional<std::int64_t> block_q;
  std::optional<std::int64_t> block_kv;
  PlanCache* plans = nullptr;  // null: PlanCache::shared()
  BatchProgress progress;      // after each kernel call
};

struct MaskedAttentionResult {
  BlockSizes blocks;
  bool blocks_tuned = false;             // from the tuning cache rather than the heuristic
  std::shared_ptr<const TilePlan> plan;  // null when there was nothing to compute
  double plan_seconds = 0.0;             // plan built by this call (0 when cached)
};

// The mask on whole tensors: checks the arguments (and the mask's own length,
// for video masks), takes the plan from the cache and runs it, applying the
// zero-size rule above when a length, batch or head count is 0.
MaskedAttentionResult masked_attention(AttentionBackend& backend, const Mask& mask,
                                       const LayoutArgs& args,
                                       const MaskedAttentionOptions& options = {});

}  // namespace tilesplash
