// Attention over whole tensors as callers hold them. Q, K, V and the output
// come in one of the layouts of tensor_io.h (hnd [H, N, d], bhnd [B, H, N, d]
// as PyTorch's SDPA, bnhd [B, N, H, d] as diffusers and FlashAttention), each
// with its own element strides: a NumPy or PyTorch view, a transpose of
// another layout, a slice of a packed QKV buffer. This is the batch x head
// loop that the CLI's `attend` and the Python bindings share: every batch
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
#include <span>
#include <vector>

#include "tilesplash/attention.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tilesplash/plan_cache.h"
#include "tilesplash/routing.h"
#include "tilesplash/tensor.h"
#include "tilesplash/tensor_io.h"
#include "tilesplash/tuning.h"

namespace tilesplash {

// A tensor in a layout: rank 3 for hnd, 4 for bhnd and bnhd.
struct StridedTensor {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements, one per axis (may be negative); empty: C order
};

struct MutableStridedTensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

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
  // Tiles; unset sides come from cached_block_choice().
  std::optional<std::int64_t> block_q;
  std::optional<std::int64_t> block_kv;
  PlanCache* plans = nullptr;  // null: PlanCache::shared()
  BatchProgress progress;      // after each kernel call
};

// Tile sizes a caller asked for, against the kernel's limits (block_q 1 to
// 4096, block_kv a multiple of 64 up to 1024); std::invalid_argument naming
// block_q or block_kv otherwise. Unset sides pass.
void check_block_sizes(std::optional<std::int64_t> block_q, std::optional<std::int64_t> block_kv);

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

// choose_blocks(), remembered per (mask, lengths, head dim, dtype, threads)
// for the life of the process: choose_blocks reads the tuning file, which a
// call per layer and step should not. A `tilesplash tune` run during the
// process is seen by the next process.
BlockChoice cached_block_choice(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                                std::int64_t head_dim, DType dtype, int threads);

// The video front door on whole tensors: one forward() per batch entry, all
// heads of that entry routed together. q_len and kv_len must equal the
// geometry's tokens. key_limits: empty (no padding) or one per batch entry,
// that entry's VideoAttention::forward() key_limit (prompts of different
// lengths padded to one text length). One report per batch entry; none
// without batch entries or heads.
std::vector<LayerReport> layout_video_attention(VideoAttention& attention, const LayoutArgs& args,
                                                std::int64_t layer = 0, std::int64_t step = 0,
                                                const BatchProgress& progress = {},
                                                std::span<const std::int64_t> key_limits = {});

}  // namespace tilesplash
