// The batch x head loop. One kernel call covers all heads of a batch entry
// (or all entries at once when they fold), so the kernel's work list spans
// heads x q-blocks and both cores stay busy even on short sequences; the
// result is the same bits as one call per head because every (head, q-block)
// item is computed on its own.
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "batched/strided_views.h"
#include "tilesplash/batched_attention.h"

namespace tilesplash {
namespace {

using detail::LayoutAxes;

struct Axes {
  LayoutAxes q, k, v, out;
};

Axes axes_of(const LayoutArgs& args) {
  return {detail::layout_axes(args.q.shape, args.q.strides, args.layout, "q"),
          detail::layout_axes(args.k.shape, args.k.strides, args.layout, "k"),
          detail::layout_axes(args.v.shape, args.v.strides, args.layout, "v"),
          detail::layout_axes(args.out.shape, args.out.strides, args.layout, "out")};
}

// Views of one batch entry, packed where the kernel cannot read in place.
struct EntryViews {
  std::vector<std::byte> q_copy, k_copy, v_copy;

  AttentionArgs views(const LayoutArgs& args, const Axes& a, std::int64_t b, std::int64_t lse_row) {
    const auto input = [&](const StridedTensor& t, const LayoutAxes& axes,
                           std::vector<std::byte>& copy) {
      return detail::kernel_readable(axes)
                 ? detail::entry_view(t.data, t.dtype, axes, b)
                 : detail::packed_entry_view(t.data, t.dtype, axes, b, copy);
    };
    return {input(args.q, a.q, q_copy), input(args.k, a.k, k_copy), input(args.v, a.v, v_copy),
            detail::mutable_entry_view(args.out.data, args.out.dtype, a.out, b),
            args.lse ? args.lse + lse_row : nullptr};
  }
};

bool all_fold(const Axes& a) {
  for (const LayoutAxes* axes : {&a.q, &a.k, &a.v, &a.out}) {
    if (!detail::kernel_readable(*axes) || !detail::batch_folds(*axes)) return false;
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

}  // namespace

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

std::vector<LayerReport> layout_video_attention(VideoAttention& attention, const LayoutArgs& args,
                                                std::int64_t layer, std::int64_t step,
                                                const BatchProgress& progress,
                                                std::span<const std::int64_t> key_limits) {
  const LayoutShape shape = check_layout_args(args);
  if (!key_limits.empty() && static_cast<std::int64_t>(key_limits.size()) != shape.batch) {
    throw std::invalid_argument("key_limits: expected one per batch entry (" +
                                std::to_string(shape.batch) + "), got " +
                                std::to_string(key_limits.size()));
  }
  // Lengths first, for every batch entry at once (and for none), so that a
  // per-entry error below can only be about that entry's data.
  const std::int64_t tokens = attention.geometry().tokens();
  for (const auto& [name, len] : {std::pair{"q", shape.q_len}, std::pair{"k", shape.kv_len}}) {
    if (len != tokens) {
      throw std::invalid_argument(std::string(name) + ": sequence length " + std::to_string(len) +
                                  " does not match the geometry's tokens (" +
                                  std::to_string(tokens) + ")");
    }
  }
  std::vector<LayerReport> reports;
  if (shape.batch == 0 || shape.heads == 0) return reports;
  const Axes a = axes_of(args);
  EntryViews entry;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    reports.push_back(in_entry(b, shape.batch, [&] {
      const std::optional<std::int64_t> limit =
          key_limits.empty() ? std::nullopt
                             : std::optional<std::int64_t>(key_limits[static_cast<std::size_t>(b)]);
      return attention.forward(entry.views(args, a, b, b * shape.heads * shape.q_len), layer, step,
                               limit);
    }));
    if (progress) progress(b, 1);
  }
  return reports;
}

}  // namespace tilesplash
