// How a strided tensor in a layout becomes the kernel's [heads, N, d] views:
// the axes read through the layout, whether the kernel can read an entry in
// place, and the packed copy when it cannot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tilesplash/tensor.h"
#include "tilesplash/tensor_layout.h"

namespace tilesplash::detail {

// Extents and element strides in (batch, heads, len, dim) order.
struct LayoutAxes {
  std::int64_t batch = 1;
  std::int64_t heads = 0;
  std::int64_t len = 0;
  std::int64_t dim = 0;
  std::int64_t batch_stride = 0;
  std::int64_t head_stride = 0;
  std::int64_t row_stride = 0;
  std::int64_t dim_stride = 1;

  std::int64_t numel() const { return batch * heads * len * dim; }
};

// Throws std::invalid_argument("<name>: ...") on a rank that does not fit the
// layout, a negative extent or a stride list of the wrong length.
LayoutAxes layout_axes(const std::vector<std::int64_t>& shape,
                       const std::vector<std::int64_t>& strides, Layout layout,
                       const std::string& name);

// True when every batch entry can be one TensorView the kernel accepts.
bool kernel_readable(const LayoutAxes& axes);
// True when all batch entries together are one view (heads of consecutive
// entries one head stride apart).
bool batch_folds(const LayoutAxes& axes);

// Entry `batch` (or, with fold, entries [batch, batch + count)) in place;
// needs kernel_readable().
TensorView entry_view(const void* data, DType dtype, const LayoutAxes& axes, std::int64_t batch,
                      std::int64_t count = 1);
MutableTensorView mutable_entry_view(void* data, DType dtype, const LayoutAxes& axes,
                                     std::int64_t batch, std::int64_t count = 1);

// Entry `batch` copied into `buffer` as a contiguous [heads, len, dim] view.
TensorView packed_entry_view(const void* data, DType dtype, const LayoutAxes& axes,
                             std::int64_t batch, std::vector<std::byte>& buffer);

// Lowest and one-past-highest byte address a non-empty tensor touches.
struct ByteExtent {
  std::uintptr_t begin = 0;
  std::uintptr_t end = 0;
  bool overlaps(const ByteExtent& other) const { return begin < other.end && other.begin < end; }
};
ByteExtent byte_extent(const void* data, DType dtype, const LayoutAxes& axes);

}  // namespace tilesplash::detail
