// LSE merge of partial attention results (merge.h). Every operand is read
// through the four strides of a LayoutAxes, so the per-head views of the
// kernel and whole tensors in any layout share one loop. All checks run
// before the first write, so a rejected call leaves out and lse untouched.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/strided_views.h"
#include "tilesplash/merge.h"

namespace tilesplash {
namespace {

using detail::LayoutAxes;

struct Operand {
  const void* data;
  DType dtype;
  LayoutAxes axes;
  const float* lse;
};

struct Target {
  void* data;
  DType dtype;
  LayoutAxes axes;
};

[[noreturn]] void fail(const std::string& name, const std::string& message) {
  throw std::invalid_argument(name + ": " + message);
}

std::string part_name(const char* what, std::size_t i) {
  return std::string(what) + "[" + std::to_string(i) + "]";
}

std::string extents_text(const LayoutAxes& a) {
  return "batch " + std::to_string(a.batch) + ", heads " + std::to_string(a.heads) + ", len " +
         std::to_string(a.len) + ", dim " + std::to_string(a.dim);
}

bool same_extents(const LayoutAxes& a, const LayoutAxes& b) {
  return a.batch == b.batch && a.heads == b.heads && a.len == b.len && a.dim == b.dim;
}

LayoutAxes view_axes(std::int64_t heads, std::int64_t len, std::int64_t dim,
                     std::int64_t head_stride, std::int64_t row_stride) {
  return {1, heads, len, dim, 0, head_stride, row_stride, 1};
}

double load(const void* data, DType dtype, std::int64_t index) {
  switch (dtype) {
    case DType::kF32:
      return static_cast<const float*>(data)[index];
    case DType::kBF16:
      return bf16_to_float(static_cast<const std::uint16_t*>(data)[index]);
    case DType::kF16:
      return f16_to_float(static_cast<const std::uint16_t*>(data)[index]);
  }
  return 0.0;
}

void store(void* data, DType dtype, std::int64_t index, double value) {
  const auto f = static_cast<float>(value);
  switch (dtype) {
    case DType::kF32:
      static_cast<float*>(data)[index] = f;
      break;
    case DType::kBF16:
      static_cast<std::uint16_t*>(data)[index] = float_to_bf16(f);
      break;
    case DType::kF16:
      static_cast<std::uint16_t*>(data)[index] = float_to_f16(f);
      break;
  }
}

std::int64_t element(const LayoutAxes& a, std::int64_t b, std::int64_t h, std::int64_t n,
                     std::int64_t c) {
  return b * a.batch_stride + h * a.head_stride + n * a.row_stride + c * a.dim_stride;
}

detail::ByteExtent lse_extent(const float* lse, const LayoutAxes& a) {
  const auto begin = reinterpret_cast<std::uintptr_t>(lse);
  return {begin, begin + static_cast<std::uintptr_t>(a.batch * a.heads * a.len) * sizeof(float)};
}

void check_no_broadcast(const LayoutAxes& a) {
  const std::int64_t extents[] = {a.batch, a.heads, a.len, a.dim};
  const std::int64_t strides[] = {a.batch_stride, a.head_stride, a.row_stride, a.dim_stride};
  for (int i = 0; i < 4; ++i) {
    if (extents[i] > 1 && strides[i] == 0) {
      fail("out", "an axis with stride 0 would write several values to one place");
    }
  }
}

// Every check of merge.h, before anything is written.
void check(const std::vector<Operand>& parts, const Target& out, float* lse,
           const MergeOptions& options) {
  if (parts.empty()) fail("outputs", "need at least one part to merge, got none");
  const LayoutAxes& a = out.axes;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (!same_extents(parts[i].axes, parts[0].axes)) {
      fail(part_name("outputs", i), "expected the extents of outputs[0] (" +
                                        extents_text(parts[0].axes) + "), got " +
                                        extents_text(parts[i].axes));
    }
  }
  if (!same_extents(parts[0].axes, a)) {
    fail("out", "expected the outputs' extents (" + extents_text(parts[0].axes) + "), got " +
                    extents_text(a));
  }
  if (a.batch * a.heads * a.len == 0) return;  // no rows: nothing is read or written
  check_no_broadcast(a);
  if (a.numel() > 0 && out.data == nullptr) fail("out", "data is null");
  const detail::ByteExtent out_bytes =
      a.numel() == 0 ? detail::ByteExtent{} : detail::byte_extent(out.data, out.dtype, a);
  const detail::ByteExtent lse_bytes = lse == nullptr ? detail::ByteExtent{} : lse_extent(lse, a);
  if (out_bytes.overlaps(lse_bytes)) fail("lse", "overlaps out");
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const Operand& part = parts[i];
    if (part.lse == nullptr) fail(part_name("lses", i), "is null");
    if (a.numel() > 0 && part.data == nullptr) fail(part_name("outputs", i), "data is null");
    const detail::ByteExtent in_bytes =
        a.numel() == 0 ? detail::ByteExtent{} : detail::byte_extent(part.data, part.dtype, a);
    const detail::ByteExtent in_lse = lse_extent(part.lse, a);
    if (out_bytes.overlaps(in_bytes) || out_bytes.overlaps(in_lse)) {
      fail("out", "overlaps outputs[" + std::to_string(i) + "] or lses[" + std::to_string(i) +
                      "]; the merge never overwrites its inputs");
    }
    if (lse_bytes.overlaps(in_bytes) || lse_bytes.overlaps(in_lse)) {
      fail("lse", "overlaps outputs[" + std::to_string(i) + "] or lses[" + std::to_string(i) +
                      "]; the merge never overwrites its inputs");
    }
    for (std::int64_t b = 0; b < a.batch; ++b) {
      for (std::int64_t h = 0; h < a.heads; ++h) {
        for (std::int64_t n = 0; n < a.len; ++n) {
          const float value = part.lse[(b * a.heads + h) * a.len + n];
          const auto where = [&] {
            return "batch " + std::to_string(b) + ", head " + std::to_string(h) + ", row " +
                   std::to_string(n);
          };
          if (std::isnan(value)) fail(part_name("lses", i), "NaN at " + where());
          if (value == std::numeric_limits<float>::infinity()) {
            fail(part_name("lses", i),
                 "+inf at " + where() + " (a score beyond the f32 range cannot be merged exactly)");
          }
          if (!options.check_finite || value == -std::numeric_limits<float>::infinity()) continue;
          for (std::int64_t c = 0; c < a.dim; ++c) {
            if (!std::isfinite(load(part.data, part.dtype, element(part.axes, b, h, n, c)))) {
              fail(part_name("outputs", i), "NaN or Inf at " + where() + ", whose LSE is finite (" +
                                                std::to_string(value) + ")");
            }
          }
        }
      }
    }
  }
}

void merge(const std::vector<Operand>& parts, const Target& out, float* lse,
           const MergeOptions& options) {
  check(parts, out, lse, options);
  const LayoutAxes& a = out.axes;
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  std::vector<double> acc(static_cast<std::size_t>(a.dim));
  for (std::int64_t b = 0; b < a.batch; ++b) {
    for (std::int64_t h = 0; h < a.heads; ++h) {
      for (std::int64_t n = 0; n < a.len; ++n) {
        const std::int64_t row = (b * a.heads + h) * a.len + n;
        double m = kNegInf;
        for (const Operand& part : parts) m = std::max(m, static_cast<double>(part.lse[row]));
        std::fill(acc.begin(), acc.end(), 0.0);
        double total = 0.0;
        if (m != kNegInf) {
          for (std::size_t i = 0; i < parts.size(); ++i) {
            // exp(-inf) is 0: a part without kept keys adds nothing, even
            // if its output row holds garbage.
            const double w = std::exp(static_cast<double>(parts[i].lse[row]) - m);
            total += w;
            if (w == 0.0) continue;
            for (std::int64_t c = 0; c < a.dim; ++c) {
              acc[c] += w * load(parts[i].data, parts[i].dtype, element(parts[i].axes, b, h, n, c));
            }
          }
        }
        // total >= 1 whenever m is finite (the largest part has weight 1).
        const double inv = m == kNegInf ? 0.0 : 1.0 / total;
        for (std::int64_t c = 0; c < a.dim; ++c) {
          store(out.data, out.dtype, element(a, b, h, n, c), acc[c] * inv);
        }
        if (lse != nullptr) lse[row] = static_cast<float>(m == kNegInf ? m : m + std::log(total));
      }
    }
  }
}

}  // namespace

void merge_attention(std::span<const TensorView> outputs, std::span<const float* const> lses,
                     const MutableTensorView& out, float* lse, const MergeOptions& options) {
  if (lses.size() != outputs.size()) {
    fail("lses", "expected one LSE per output (" + std::to_string(outputs.size()) + "), got " +
                     std::to_string(lses.size()));
  }
  std::vector<Operand> parts;
  parts.reserve(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const TensorView& v = outputs[i];
    parts.push_back(
        {v.data, v.dtype, view_axes(v.heads, v.len, v.dim, v.head_stride, v.row_stride), lses[i]});
  }
  const Target target{out.data, out.dtype,
                      view_axes(out.heads, out.len, out.dim, out.head_stride, out.row_stride)};
  merge(parts, target, lse, options);
}

void merge_attention(Layout layout, std::span<const StridedTensor> outputs,
                     std::span<const float* const> lses, const MutableStridedTensor& out,
                     float* lse, const MergeOptions& options) {
  if (lses.size() != outputs.size()) {
    fail("lses", "expected one LSE per output (" + std::to_string(outputs.size()) + "), got " +
                     std::to_string(lses.size()));
  }
  std::vector<Operand> parts;
  parts.reserve(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const StridedTensor& t = outputs[i];
    parts.push_back({t.data, t.dtype,
                     detail::layout_axes(t.shape, t.strides, layout, part_name("outputs", i)),
                     lses[i]});
  }
  const Target target{out.data, out.dtype,
                      detail::layout_axes(out.shape, out.strides, layout, "out")};
  merge(parts, target, lse, options);
}

}  // namespace tilesplash
