// The kernel reads rows through two strides (head, row) and needs each row's
// elements side by side. A transpose of another layout (bnhd <-> bhnd), a
// slice of a packed QKV buffer or a batch of heads all fit; a broadcast
// (stride 0) or reversed axis does not and is packed, one batch entry at a
// time, so the copy stays as small as the kernel call it feeds.
#include "core/strided_views.h"

#include <cstring>
#include <stdexcept>

namespace tilesplash::detail {
namespace {

[[noreturn]] void fail(const std::string& name, const std::string& message) {
  throw std::invalid_argument(name + ": " + message);
}

std::string shape_text(const std::vector<std::int64_t>& shape) { return shape_to_string(shape); }

template <typename Byte>
Byte* offset(Byte* data, std::int64_t elements, DType dtype) {
  return data + elements * size_of(dtype);
}

}  // namespace

LayoutAxes layout_axes(const std::vector<std::int64_t>& shape,
                       const std::vector<std::int64_t>& strides, Layout layout,
                       const std::string& name) {
  const std::size_t rank = layout == Layout::kHND ? 3 : 4;
  if (shape.size() != rank) {
    fail(name, "layout " + std::string(to_string(layout)) + " " +
                   std::string(layout_axes_text(layout)) + " needs a " + std::to_string(rank) +
                   "-d tensor, got shape " + shape_text(shape));
  }
  for (const std::int64_t extent : shape) {
    if (extent < 0) fail(name, "extents must be >= 0, got shape " + shape_text(shape));
  }
  std::vector<std::int64_t> s = strides;
  if (s.empty()) {
    s.assign(rank, 1);
    for (std::size_t i = rank - 1; i > 0; --i) s[i - 1] = s[i] * shape[i];
  } else if (s.size() != rank) {
    fail(name, "expected " + std::to_string(rank) + " strides, one per axis, got " +
                   std::to_string(s.size()));
  }
  LayoutAxes axes;
  switch (layout) {
    case Layout::kHND:
      axes = {1, shape[0], shape[1], shape[2], 0, s[0], s[1], s[2]};
      break;
    case Layout::kBHND:
      axes = {shape[0], shape[1], shape[2], shape[3], s[0], s[1], s[2], s[3]};
      break;
    case Layout::kBNHD:
      axes = {shape[0], shape[2], shape[1], shape[3], s[0], s[2], s[1], s[3]};
      break;
  }
  return axes;
}

bool kernel_readable(const LayoutAxes& a) {
  if (a.numel() == 0) return true;  // nothing is read; NumPy gives empty axes any stride
  if (a.dim > 1 && a.dim_stride != 1) return false;
  if (a.len > 1 && a.row_stride < a.dim) return false;
  if (a.heads > 1 && a.head_stride < 1) return false;
  return true;
}

bool batch_folds(const LayoutAxes& a) {
  return a.batch <= 1 || (a.heads >= 1 && a.batch_stride == a.heads * a.head_stride);
}

namespace {

// Strides the kernel's checks accept for axes whose stride is never used.
template <typename View>
void fill_view(View& view, const LayoutAxes& a, std::int64_t count) {
  view.heads = a.heads * count;
  view.len = a.len;
  view.dim = a.dim;
  view.row_stride = a.len > 1 ? a.row_stride : a.dim;
  view.head_stride = view.heads > 1 ? a.head_stride : a.len * a.dim;
}

}  // namespace

TensorView entry_view(const void* data, DType dtype, const LayoutAxes& axes, std::int64_t batch,
                      std::int64_t count) {
  TensorView view;
  view.data = offset(static_cast<const std::byte*>(data), batch * axes.batch_stride, dtype);
  view.dtype = dtype;
  fill_view(view, axes, count);
  return view;
}

MutableTensorView mutable_entry_view(void* data, DType dtype, const LayoutAxes& axes,
                                     std::int64_t batch, std::int64_t count) {
  MutableTensorView view;
  view.data = offset(static_cast<std::byte*>(data), batch * axes.batch_stride, dtype);
  view.dtype = dtype;
  fill_view(view, axes, count);
  return view;
}

TensorView packed_entry_view(const void* data, DType dtype, const LayoutAxes& a, std::int64_t batch,
                             std::vector<std::byte>& buffer) {
  const std::int64_t elem = size_of(dtype);
  buffer.resize(static_cast<std::size_t>(a.heads * a.len * a.dim * elem));
  const std::byte* base =
      offset(static_cast<const std::byte*>(data), batch * a.batch_stride, dtype);
  std::byte* dst = buffer.data();
  for (std::int64_t h = 0; h < a.heads; ++h) {
    for (std::int64_t n = 0; n < a.len; ++n) {
      const std::byte* row = offset(base, h * a.head_stride + n * a.row_stride, dtype);
      if (a.dim_stride == 1) {
        std::memcpy(dst, row, static_cast<std::size_t>(a.dim * elem));
        dst += a.dim * elem;
        continue;
      }
      for (std::int64_t i = 0; i < a.dim; ++i, dst += elem) {
        std::memcpy(dst, offset(row, i * a.dim_stride, dtype), static_cast<std::size_t>(elem));
      }
    }
  }
  return TensorView::contiguous(buffer.data(), dtype, a.heads, a.len, a.dim);
}

ByteExtent byte_extent(const void* data, DType dtype, const LayoutAxes& a) {
  const std::int64_t elem = size_of(dtype);
  std::int64_t low = 0, high = 0;  // element offsets of the extreme elements
  const std::int64_t extents[] = {a.batch, a.heads, a.len, a.dim};
  const std::int64_t strides[] = {a.batch_stride, a.head_stride, a.row_stride, a.dim_stride};
  for (int i = 0; i < 4; ++i) {
    const std::int64_t reach = (extents[i] - 1) * strides[i];
    (reach < 0 ? low : high) += reach;
  }
  const auto base = reinterpret_cast<std::uintptr_t>(data);
  return {base + static_cast<std::uintptr_t>(low * elem),
          base + static_cast<std::uintptr_t>((high + 1) * elem)};
}

}  // namespace tilesplash::detail
