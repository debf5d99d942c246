// A tensor read from a file as the kernel's [heads, len, dim] views, through
// the library's one set of strided views (core/strided_views.h): the views
// the whole-tensor entry points build from strided(tensor).
#pragma once

#include <cstdint>

#include "core/strided_views.h"
#include "tilesplash/tensor_io.h"

namespace tilesplash::test {

// Batch entries [batch, batch + count) as one view (count > 1 needs heads of
// consecutive entries one stride apart: not bnhd).
inline TensorView entry_of(const Tensor& tensor, Layout layout, std::int64_t batch = 0,
                           std::int64_t count = 1) {
  const detail::LayoutAxes axes = detail::layout_axes(tensor.shape, {}, layout, "tensor");
  return detail::entry_view(tensor.data.data(), tensor.dtype, axes, batch, count);
}

inline MutableTensorView mutable_entry_of(Tensor& tensor, Layout layout, std::int64_t batch = 0,
                                          std::int64_t count = 1) {
  const detail::LayoutAxes axes = detail::layout_axes(tensor.shape, {}, layout, "tensor");
  return detail::mutable_entry_view(tensor.data.data(), tensor.dtype, axes, batch, count);
}

}  // namespace tilesplash::test
