// Everything one attention call needs, validated and resolved (scale, thread
// count), in one plain struct: the FlashAttention `Flash_fwd_params` idea. The
// per-ISA kernels see only this, the workspace and the threading context.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/aligned_buffer.h"
#include "tilesplash/attention.h"
#include "tilesplash/threading.h"

namespace tilesplash::kernel {

struct ForwardParams {
  const TilePlan* plan = nullptr;
  TensorView q, k, v;
  MutableTensorView out;
  float* lse = nullptr;  // heads * q_len, or null
  float scale = 1.0f;
  MaskMode mask_mode = MaskMode::kTile;
  int threads = 1;
  bool check_finite = true;
  Precision precision = Precision::kDefault;
  // bf16 inputs through the target's bf16 dot product (ProductPath resolved:
  // choose_product_path(), attention.h); false: widened to f32.
  bool bf16_dot = false;
  KernelVariant variant;
  Int8Report* int8_report = nullptr;  // Precision::kInt8: where the tile counts go
};

// Memory that survives across calls of one runner.
struct Workspace {
  runtime::AlignedBuffer packed_k;
  runtime::AlignedBuffer packed_v;
  std::vector<runtime::AlignedBuffer> per_worker;  // one per worker thread
  runtime::AlignedBuffer all_ones_bits;            // the bitmask of a full tile, for kBitmask
  std::vector<std::int64_t> item_order;
};

using ForwardFn = void (*)(const ForwardParams&, Workspace&, ThreadingContext&);

// Validates args against the plan and resolves defaults (options.threads 0:
// default_threads, the runner's context's; the product path for bf16; the
// loop variant); throws std::invalid_argument naming the offending argument.
ForwardParams make_forward_params(const TilePlan& plan, const AttentionArgs& args,
                                  const AttentionOptions& options, int default_threads);

// Work items (head, q_block) in the order workers should take them: costliest
// first (cost = visited tiles), ties by index, so balance does not depend on luck.
void order_work_items(const TilePlan& plan, std::int64_t heads, std::vector<std::int64_t>& order);

}  // namespace tilesplash::kernel
