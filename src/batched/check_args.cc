// Every problem with whole-tensor arguments is reported before any work,
// naming the argument as the caller knows it (q, k, v, out, lse), because
// these messages reach Python users as ValueError text.
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/strided_views.h"
#include "tilesplash/batched_attention.h"
#include "tilesplash/kernel_limits.h"

namespace tilesplash {
namespace {

using detail::LayoutAxes;

[[noreturn]] void fail(const std::string& name, const std::string& message) {
  throw std::invalid_argument(name + ": " + message);
}

std::string str(std::int64_t value) { return std::to_string(value); }
std::string dtype_text(DType dtype) { return std::string(to_string(dtype)); }

void check_head_dim(const std::string& name, const char* what, std::int64_t dim) {
  if (!kernel_limits::valid_head_dim(dim)) {
    fail(name,
         std::string(what) + " must be " + kernel_limits::head_dim_rule() + ", got " + str(dim));
  }
}

void check_data(const std::string& name, const void* data, const LayoutAxes& axes) {
  if (axes.numel() > 0 && data == nullptr) fail(name, "data must not be null");
}

}  // namespace

LayoutShape check_layout_args(const LayoutArgs& args) {
  const Layout layout = args.layout;
  const std::string where =
      " in layout " + std::string(to_string(layout)) + " " + std::string(layout_axes_text(layout));
  const LayoutAxes q = detail::layout_axes(args.q.shape, args.q.strides, layout, "q");
  const LayoutAxes k = detail::layout_axes(args.k.shape, args.k.strides, layout, "k");
  const LayoutAxes v = detail::layout_axes(args.v.shape, args.v.strides, layout, "v");
  const LayoutAxes out = detail::layout_axes(args.out.shape, args.out.strides, layout, "out");
  check_data("q", args.q.data, q);
  check_data("k", args.k.data, k);
  check_data("v", args.v.data, v);
  check_data("out", args.out.data, out);

  if (args.k.dtype != args.q.dtype) {
    fail("k", "dtype " + dtype_text(args.k.dtype) + " does not match q (" +
                  dtype_text(args.q.dtype) + ")");
  }
  if (args.v.dtype != args.q.dtype) {
    fail("v", "dtype " + dtype_text(args.v.dtype) + " does not match q (" +
                  dtype_text(args.q.dtype) + ")");
  }
  const auto same = [&](const char* name, const char* axis, std::int64_t got, const char* other,
                        std::int64_t want) {
    if (got != want) {
      fail(name, std::string(axis) + " " + str(got) + " does not match " + other + " (" +
                     str(want) + ")" + where);
    }
  };
  same("k", "batch", k.batch, "q", q.batch);
  same("v", "batch", v.batch, "q", q.batch);
  same("k", "heads", k.heads, "q", q.heads);
  same("v", "heads", v.heads, "q", q.heads);
  same("k", "head dim", k.dim, "q", q.dim);
  same("v", "sequence length", v.len, "k", k.len);
  check_head_dim("q", "head dim", q.dim);
  check_head_dim("v", "head dim", v.dim);

  same("out", "batch", out.batch, "q", q.batch);
  same("out", "heads", out.heads, "q", q.heads);
  same("out", "sequence length", out.len, "q", q.len);
  same("out", "head dim", out.dim, "v", v.dim);
  if (args.out.dtype != DType::kF32 && args.out.dtype != args.q.dtype) {
    fail("out", "dtype must be f32 or q's (" + dtype_text(args.q.dtype) + "), got " +
                    dtype_text(args.out.dtype));
  }
  if (!detail::kernel_readable(out)) {
    fail("out",
         "needs contiguous rows (last stride 1), rows at least d apart and heads at "
         "least one element apart; got strides that do not");
  }

  // Outputs never overwrite inputs: out and lse may share no byte with q, k or v.
  std::vector<std::pair<std::string, detail::ByteExtent>> inputs;
  for (const auto& [name, tensor, axes] :
       {std::tuple{"q", &args.q, &q}, std::tuple{"k", &args.k, &k}, std::tuple{"v", &args.v, &v}}) {
    if (axes->numel() > 0) {
      inputs.emplace_back(name, detail::byte_extent(tensor->data, tensor->dtype, *axes));
    }
  }
  if (out.numel() > 0) {
    const detail::ByteExtent bytes = detail::byte_extent(args.out.data, args.out.dtype, out);
    for (const auto& [name, input] : inputs) {
      if (bytes.overlaps(input)) fail("out", "must not overlap the input " + name);
    }
    inputs.emplace_back("out", bytes);
  }
  const std::int64_t lse_count = q.batch * q.heads * q.len;
  if (args.lse != nullptr && lse_count > 0) {
    const auto begin = reinterpret_cast<std::uintptr_t>(args.lse);
    const detail::ByteExtent bytes{begin,
                                   begin + static_cast<std::uintptr_t>(lse_count) * sizeof(float)};
    for (const auto& [name, other] : inputs) {
      if (bytes.overlaps(other)) fail("lse", "must not overlap " + name);
    }
  }
  return {q.batch, q.heads, q.len, k.len, q.dim, v.dim};
}

}  // namespace tilesplash
