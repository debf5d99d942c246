// The views of one batch entry of a call on whole tensors (LayoutArgs), read
// in place where the kernel allows and packed otherwise: shared by the masked
// attention loop (layout_attention.cc) and the video front door on whole
// tensors (routing/layout_routing.cc). Internal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/strided_views.h"
#include "tilesplash/batched_attention.h"

namespace tilesplash::detail {

struct Axes {
  LayoutAxes q, k, v, out;
};

inline Axes axes_of(const LayoutArgs& args) {
  return {layout_axes(args.q.shape, args.q.strides, args.layout, "q"),
          layout_axes(args.k.shape, args.k.strides, args.layout, "k"),
          layout_axes(args.v.shape, args.v.strides, args.layout, "v"),
          layout_axes(args.out.shape, args.out.strides, args.layout, "out")};
}

// Views of one batch entry, packed where the kernel cannot read in place.
struct EntryViews {
  std::vector<std::byte> q_copy, k_copy, v_copy;

  AttentionArgs views(const LayoutArgs& args, const Axes& a, std::int64_t b, std::int64_t lse_row) {
    const auto input = [&](const StridedTensor& t, const LayoutAxes& axes,
                           std::vector<std::byte>& copy) {
      return kernel_readable(axes) ? entry_view(t.data, t.dtype, axes, b)
                                   : packed_entry_view(t.data, t.dtype, axes, b, copy);
    };
    return {input(args.q, a.q, q_copy), input(args.k, a.k, k_copy), input(args.v, a.v, v_copy),
            mutable_entry_view(args.out.data, args.out.dtype, a.out, b),
            args.lse ? args.lse + lse_row : nullptr};
  }
};

inline bool all_fold(const Axes& a) {
  for (const LayoutAxes* axes : {&a.q, &a.k, &a.v, &a.out}) {
    if (!kernel_readable(*axes) || !batch_folds(*axes)) return false;
  }
  return true;
}

// One batch entry's call; with several entries, a data error (NaN, overflow)
// says which entry, since the kernel numbers heads within its own call.
template <typename Call>
auto in_entry(std::int64_t b, std::int64_t batch, const Call& call) {
  try {
    return call();
  } catch (const std::invalid_argument& error) {
    if (batch == 1) throw;
    throw std::invalid_argument(std::string(error.what()) + " in batch entry " + std::to_string(b));
  }
}

}  // namespace tilesplash::detail
