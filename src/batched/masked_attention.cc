// Whole tensors under a mask: the zero-size rule, the tiles (given, or the
// tuned choice remembered per shape, tuning.h), the plan from the cache, then
// the batch x head loop of layout_attention.cc.
#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "core/strided_views.h"
#include "tilesplash/batched_attention.h"
#include "tilesplash/tuning.h"

namespace tilesplash {
namespace {

void fill_no_keys(const LayoutArgs& args, const LayoutShape& shape) {
  const detail::LayoutAxes out =
      detail::layout_axes(args.out.shape, args.out.strides, args.layout, "out");
  const std::int64_t row_bytes = out.dim * size_of(args.out.dtype);
  for (std::int64_t b = 0; b < out.batch; ++b) {
    const MutableTensorView view =
        detail::mutable_entry_view(args.out.data, args.out.dtype, out, b);
    for (std::int64_t h = 0; h < view.heads; ++h) {
      for (std::int64_t n = 0; n < view.len; ++n) {
        std::memset(static_cast<std::byte*>(view.data) +
                        (h * view.head_stride + n * view.row_stride) * size_of(view.dtype),
                    0, static_cast<std::size_t>(row_bytes));
      }
    }
  }
  if (args.lse != nullptr) {
    std::fill(args.lse, args.lse + shape.batch * shape.heads * shape.q_len,
              -std::numeric_limits<float>::infinity());
  }
}

}  // namespace

MaskedAttentionResult masked_attention(AttentionBackend& backend, const Mask& mask,
                                       const LayoutArgs& args,
                                       const MaskedAttentionOptions& options) {
  const LayoutShape shape = check_layout_args(args);
  check_block_sizes(options.block_q, options.block_kv);
  MaskedAttentionResult result;
  if (shape.batch == 0 || shape.heads == 0 || shape.q_len == 0) {
    mask.check_lengths(shape.q_len, shape.kv_len);
    return result;
  }
  if (shape.kv_len == 0) {
    mask.check_lengths(shape.q_len, shape.kv_len);
    fill_no_keys(args, shape);
    return result;
  }
  result.blocks = {options.block_q.value_or(0), options.block_kv.value_or(0)};
  AttentionOptions attention = options.attention;
  if (!options.block_q || !options.block_kv || !attention.variant) {
    // The tuned tiles (and loop variant) of the thread count this call runs with.
    const BlockChoice choice = cached_block_choice(
        mask, shape.q_len, shape.kv_len, shape.head_dim, args.q.dtype,
        backend.threads(options.attention.threads), options.attention.precision);
    if (!options.block_q) result.blocks.block_q = choice.blocks.block_q;
    if (!options.block_kv) result.blocks.block_kv = choice.blocks.block_kv;
    if (!attention.variant) attention.variant = choice.variant;
    result.blocks_tuned = choice.from_cache && (!options.block_q || !options.block_kv);
  }
  PlanCache& plans = options.plans != nullptr ? *options.plans : PlanCache::shared();
  result.plan = plans.get(mask, shape.q_len, shape.kv_len, result.blocks, &result.plan_seconds);
  layout_attention(backend, *result.plan, args, attention, options.progress);
  return result;
}

}  // namespace tilesplash
