// The batch x head loop. One kernel call covers all heads of a batch entry
// (or all entries at once when they fold), so the kernel's work list spans
// heads x q-blocks and both cores stay busy even on short sequences; the
// result is the same bits as one call per head because every (head, q-block)
// item is computed on its own.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "batched/entry_views.h"
#include "core/strided_views.h"
#include "tilesplash/batched_attention.h"

namespace tilesplash {

using detail::all_fold;
using detail::Axes;
using detail::axes_of;
using detail::EntryViews;
using detail::in_entry;

bool reads_in_place(const StridedTensor& tensor, Layout layout) {
  return detail::kernel_readable(
      detail::layout_axes(tensor.shape, tensor.strides, layout, "tensor"));
}

void layout_attention(AttentionBackend& backend, const TilePlan& plan, const LayoutArgs& args,
                      const AttentionOptions& options, const BatchProgress& progress) {
  const LayoutShape shape = check_layout_args(args);
  if (shape.q_len != plan.q_len()) {
    throw std::invalid_argument("q: sequence length " + std::to_string(shape.q_len) +
                                " does not match the plan's q_len (" +
                                std::to_string(plan.q_len()) + ")");
  }
  if (shape.kv_len != plan.kv_len()) {
    throw std::invalid_argument("k: sequence length " + std::to_string(shape.kv_len) +
                                " does not match the plan's kv_len (" +
                                std::to_string(plan.kv_len()) + ")");
  }
  if (shape.batch == 0 || shape.heads == 0) return;
  const Axes a = axes_of(args);
  if (all_fold(a)) {
    try {
      backend.forward(
          plan,
          {detail::entry_view(args.q.data, args.q.dtype, a.q, 0, shape.batch),
           detail::entry_view(args.k.data, args.k.dtype, a.k, 0, shape.batch),
           detail::entry_view(args.v.data, args.v.dtype, a.v, 0, shape.batch),
           detail::mutable_entry_view(args.out.data, args.out.dtype, a.out, 0, shape.batch),
           args.lse},
          options);
      if (progress) progress(0, shape.batch);
      return;
    } catch (const std::invalid_argument&) {
      // The kernel numbers heads within its call, batch * heads of them here.
      // Bad input is rare: rerun entry by entry so the message names the
      // batch entry and the head within it.
      if (shape.batch == 1) throw;
    }
  }
  EntryViews entry;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    in_entry(b, shape.batch, [&] {
      backend.forward(plan, entry.views(args, a, b, b * shape.heads * shape.q_len), options);
    });
    if (progress) progress(b, 1);
  }
}

}  // namespace tilesplash
