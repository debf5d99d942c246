// Tensors read from files in a layout: their extents, the StridedTensor the
// whole-tensor entry points take, and the Q/K/V agreement checks that must
// pass before a kernel call so that file problems surface as InputError
// naming the file rather than as a kernel argument error. The deprecated
// per-entry views go through the library's one set of strided views.
#include <type_traits>

#include "core/strided_views.h"
#include "io/io_common.h"

namespace tilesplash {
namespace {

// One batch entry (or, folded, all of them) through the library's strided
// views (core/strided_views.h); their argument errors become InputError
// naming the file.
template <typename View, typename TensorRef>
View entry(TensorRef& tensor, Layout layout, std::int64_t batch, std::string_view name, bool fold) {
  const std::string label(name);
  detail::LayoutAxes axes;
  try {
    axes = detail::layout_axes(tensor.shape, {}, layout, label);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  if (fold && !detail::batch_folds(axes)) {
    io::fail(name, "layout bnhd with batch " + std::to_string(axes.batch) +
                       " cannot be one [heads, N, d] view (heads of different batch entries "
                       "are not one stride apart); use batch_view per batch entry");
  }
  if (!fold && (batch < 0 || batch >= axes.batch)) {
    io::fail(name, "batch entry " + std::to_string(batch) + " out of range [0, " +
                       std::to_string(axes.batch) + ")");
  }
  if constexpr (std::is_same_v<View, TensorView>) {
    return detail::entry_view(tensor.data.data(), tensor.dtype, axes, fold ? 0 : batch,
                              fold ? axes.batch : 1);
  } else {
    return detail::mutable_entry_view(tensor.data.data(), tensor.dtype, axes, fold ? 0 : batch,
                                      fold ? axes.batch : 1);
  }
}

}  // namespace

StridedTensor strided(const Tensor& tensor) {
  return {tensor.data.data(), tensor.dtype, tensor.shape, {}};
}

MutableStridedTensor mutable_strided(Tensor& tensor) {
  return {tensor.data.data(), tensor.dtype, tensor.shape, {}};
}

TensorView layout_view(const Tensor& tensor, Layout layout, std::string_view name) {
  return entry<TensorView>(tensor, layout, 0, name, true);
}

MutableTensorView mutable_layout_view(Tensor& tensor, Layout layout, std::string_view name) {
  return entry<MutableTensorView>(tensor, layout, 0, name, true);
}

TensorView batch_view(const Tensor& tensor, Layout layout, std::int64_t batch,
                      std::string_view name) {
  return entry<TensorView>(tensor, layout, batch, name, false);
}

MutableTensorView mutable_batch_view(Tensor& tensor, Layout layout, std::int64_t batch,
                                     std::string_view name) {
  return entry<MutableTensorView>(tensor, layout, batch, name, false);
}

LayoutDims layout_dims(const Tensor& tensor, Layout layout, std::string_view name) {
  const std::size_t rank = layout == Layout::kHND ? 3 : 4;
  if (tensor.shape.size() != rank) {
    io::fail(name, "layout " + std::string(to_string(layout)) + " " +
                       std::string(layout_axes_text(layout)) + " needs a " + std::to_string(rank) +
                       "-d tensor, got shape " + shape_to_string(tensor.shape));
  }
  const auto& s = tensor.shape;
  switch (layout) {
    case Layout::kHND:
      return {1, s[0], s[1], s[2]};
    case Layout::kBHND:
      return {s[0], s[1], s[2], s[3]};
    case Layout::kBNHD:
      return {s[0], s[2], s[1], s[3]};
  }
  return {};
}

std::vector<std::int64_t> layout_shape(Layout layout, const LayoutDims& dims) {
  switch (layout) {
    case Layout::kHND:
      return {dims.heads, dims.len, dims.dim};
    case Layout::kBHND:
      return {dims.batch, dims.heads, dims.len, dims.dim};
    case Layout::kBNHD:
      return {dims.batch, dims.len, dims.heads, dims.dim};
  }
  return {};
}

void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v, Layout layout,
               const std::array<std::string, 3>& names) {
  // Plain references: clang 14 cannot capture structured bindings in lambdas.
  const std::string& q_name = names[0];
  const std::string& k_name = names[1];
  const std::string& v_name = names[2];
  const LayoutDims qd = layout_dims(q, layout, q_name);
  const LayoutDims kd = layout_dims(k, layout, k_name);
  const LayoutDims vd = layout_dims(v, layout, v_name);
  const auto mismatch = [&](const std::string& file, const std::string& what, std::int64_t got,
                            const std::string& other, std::int64_t want) {
    io::fail(file, what + " " + std::to_string(got) + " does not match " + quoted_name(other) +
                       " (" + std::to_string(want) + ") in layout " +
                       std::string(to_string(layout)) + " " +
                       std::string(layout_axes_text(layout)));
  };
  const auto same_dtype = [&](const std::string& file, const Tensor& tensor) {
    if (tensor.dtype != q.dtype) {
      io::fail(file, "dtype " + std::string(to_string(tensor.dtype)) + " does not match " +
                         quoted_name(q_name) + " (" + std::string(to_string(q.dtype)) + ")");
    }
  };
  // An empty axis has no attention to compute; say which file and axis.
  const auto non_empty = [&](const std::string& file, const LayoutDims& d) {
    const std::pair<const char*, std::int64_t> axes[] = {
        {"batch", d.batch}, {"heads", d.heads}, {"sequence length", d.len}, {"head dim", d.dim}};
    for (const auto& [axis, extent] : axes) {
      if (extent < 1) {
        io::fail(file, std::string(axis) + " is 0 in layout " + std::string(to_string(layout)) +
                           " " + std::string(layout_axes_text(layout)) + "; expected at least 1");
      }
    }
  };
  non_empty(q_name, qd);
  non_empty(k_name, kd);
  non_empty(v_name, vd);
  same_dtype(k_name, k);
  same_dtype(v_name, v);
  if (kd.batch != qd.batch) mismatch(k_name, "batch", kd.batch, q_name, qd.batch);
  if (vd.batch != qd.batch) mismatch(v_name, "batch", vd.batch, q_name, qd.batch);
  if (kd.heads != qd.heads) mismatch(k_name, "heads", kd.heads, q_name, qd.heads);
  if (vd.heads != qd.heads) mismatch(v_name, "heads", vd.heads, q_name, qd.heads);
  if (kd.dim != qd.dim) mismatch(k_name, "head dim", kd.dim, q_name, qd.dim);
  if (vd.len != kd.len) mismatch(v_name, "sequence length", vd.len, k_name, kd.len);
}

}  // namespace tilesplash
