// Layout adapters: how hnd, bhnd and bnhd tensors become the kernel's strided
// [heads, len, dim] views without copies, and the Q/K/V agreement checks that
// must pass before a kernel call so that file problems surface as InputError
// naming the file rather than as a kernel argument error.
#include "io/io_common.h"

namespace tilesplash {
namespace {

// Element offsets of (batch entry, head, row) and the strides within a batch entry.
struct Strides {
  std::int64_t batch = 0;
  std::int64_t head = 0;
  std::int64_t row = 0;
};

Strides strides_of(Layout layout, const LayoutDims& dims) {
  if (layout == Layout::kBNHD) {
    return {dims.len * dims.heads * dims.dim, dims.dim, dims.heads * dims.dim};
  }
  return {dims.heads * dims.len * dims.dim, dims.len * dims.dim, dims.dim};
}

template <typename View, typename TensorRef>
View make_view(TensorRef& tensor, Layout layout, std::int64_t batch, std::string_view name,
               bool fold_batch) {
  const LayoutDims dims = layout_dims(tensor, layout, name);
  const Strides strides = strides_of(layout, dims);
  View view;
  view.dtype = tensor.dtype;
  view.len = dims.len;
  view.dim = dims.dim;
  view.head_stride = strides.head;
  view.row_stride = strides.row;
  if (fold_batch) {
    if (layout == Layout::kBNHD && dims.batch > 1) {
      io::fail(name, "layout bnhd with batch " + std::to_string(dims.batch) +
                         " cannot be one [heads, N, d] view (heads of different batch entries "
                         "are not one stride apart); use batch_view per batch entry");
    }
    view.heads = dims.batch * dims.heads;
    view.data = tensor.data.data();
  } else {
    if (batch < 0 || batch >= dims.batch) {
      io::fail(name, "batch entry " + std::to_string(batch) + " out of range [0, " +
                         std::to_string(dims.batch) + ")");
    }
    view.heads = dims.heads;
    view.data = tensor.data.data() + batch * strides.batch * size_of(tensor.dtype);
  }
  return view;
}

}  // namespace

std::string_view to_string(Layout layout) {
  switch (layout) {
    case Layout::kHND:
      return "hnd";
    case Layout::kBHND:
      return "bhnd";
    case Layout::kBNHD:
      return "bnhd";
  }
  return "?";
}

std::string_view layout_axes_text(Layout layout) {
  switch (layout) {
    case Layout::kHND:
      return "[heads, N, d]";
    case Layout::kBHND:
      return "[batch, heads, N, d]";
    case Layout::kBNHD:
      return "[batch, N, heads, d]";
  }
  return "?";
}

std::optional<Layout> parse_layout(std::string_view text) {
  if (text == "hnd") return Layout::kHND;
  if (text == "bhnd") return Layout::kBHND;
  if (text == "bnhd") return Layout::kBNHD;
  return std::nullopt;
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

TensorView layout_view(const Tensor& tensor, Layout layout, std::string_view name) {
  return make_view<TensorView>(tensor, layout, 0, name, true);
}

MutableTensorView mutable_layout_view(Tensor& tensor, Layout layout, std::string_view name) {
  return make_view<MutableTensorView>(tensor, layout, 0, name, true);
}

TensorView batch_view(const Tensor& tensor, Layout layout, std::int64_t batch,
                      std::string_view name) {
  return make_view<TensorView>(tensor, layout, batch, name, false);
}

MutableTensorView mutable_batch_view(Tensor& tensor, Layout layout, std::int64_t batch,
                                     std::string_view name) {
  return make_view<MutableTensorView>(tensor, layout, batch, name, false);
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
