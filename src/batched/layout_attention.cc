// The batch x head loop. One kernel call covers all heads of a batch entry
// (or all entries at once when they fold), so the kernel's work list spans
// heads x q-blocks and both cores stay busy even on short sequences; the
// result is the same bits as one call per head because every (head, q-block)
// item is computed on its own.
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

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

// The zero-key rule: every row keeps no key, so 0 and LSE = -inf.
void fill_no_keys(const LayoutArgs& args, const Axes& a) {
  const std::int64_t row_bytes = a.out.dim * size_of(args.out.dtype);
  for (std::int64_t b = 0; b < a.out.batch; ++b) {
    const MutableTensorView view =
        detail::mutable_entry_view(args.out.data, args.out.dtype, a.out, b);
    for (std::int64_t h = 0; h < view.heads; ++h) {
      for (std::int64_t n = 0; n < view.len; ++n) {
        std::memset(static_cast<std::byte*>(view.data) +
                        (h * view.head_stride + n * view.row_stride) * size_of(view.dtype),
                    0, static_cast<std::size_t>(row_bytes));
      }
    }
  }
  if (args.lse != nullptr) {
    std::fill(args.lse, args.lse + a.q.batch * a.q.heads * a.q.len,
              -std::numeric_limits<float>::infinity());
  }
}

void check_blocks(const std::optional<std::int64_t>& block_q,
                  const std::optional<std::int64_t>& block_kv) {
  if (block_q && (*block_q < 1 || *block_q > 4096)) {
    throw std::invalid_argument("block_q: must be in [1, 4096], got " + std::to_string(*block_q));
  }
  if (block_kv && (*block_kv < 64 || *block_kv > 1024 || *block_kv % 64 != 0)) {
    throw std::invalid_argument("block_kv: must be a multiple of 64 in [64, 1024], got " +
                                std::to_string(*block_kv));
  }
}

struct ChoiceKey {
  Mask mask;
  std::int64_t q_len, kv_len, head_dim;
  DType dtype;
  int threads;
  friend bool operator==(const ChoiceKey&, const ChoiceKey&) = default;
};

struct ChoiceKeyHash {
  std::size_t operator()(const ChoiceKey& key) const noexcept {
    std::size_t h = key.mask.hash();
    for (const std::int64_t value :
         {key.q_len, key.kv_len, key.head_dim, static_cast<std::int64_t>(key.dtype),
          static_cast<std::int64_t>(key.threads)}) {
      h ^= std::hash<std::int64_t>{}(value) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    }
    return h;
  }
};

}  // namespace

void layout_attention(AttentionRunner& runner, const TilePlan& plan, const LayoutArgs& args,
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
    runner.forward(
        plan,
        {detail::entry_view(args.q.data, args.q.dtype, a.q, 0, shape.batch),
         detail::entry_view(args.k.data, args.k.dtype, a.k, 0, shape.batch),
         detail::entry_view(args.v.data, args.v.dtype, a.v, 0, shape.batch),
         detail::mutable_entry_view(args.out.data, args.out.dtype, a.out, 0, shape.batch),
         args.lse},
        options);
    if (progress) progress(0, shape.batch);
    return;
  }
  EntryViews entry;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    runner.forward(plan, entry.views(args, a, b, b * shape.heads * shape.q_len), options);
    if (progress) progress(b, 1);
  }
}

BlockChoice cached_block_choice(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                                std::int64_t head_dim, DType dtype, int threads) {
  static std::mutex mutex;
  static std::unordered_map<ChoiceKey, BlockChoice, ChoiceKeyHash> choices;
  ChoiceKey key{mask, q_len, kv_len, head_dim, dtype, threads};
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto found = choices.find(key);
    if (found != choices.end()) return found->second;
  }
  BlockChoice choice = choose_blocks(mask, q_len, kv_len, head_dim, dtype, threads);
  std::lock_guard<std::mutex> lock(mutex);
  return choices.emplace(std::move(key), std::move(choice)).first->second;
}

MaskedAttentionResult masked_attention(AttentionRunner& runner, const Mask& mask,
                                       const LayoutArgs& args,
                                       const MaskedAttentionOptions& options) {
  const LayoutShape shape = check_layout_args(args);
  check_blocks(options.block_q, options.block_kv);
  MaskedAttentionResult result;
  if (shape.batch == 0 || shape.heads == 0 || shape.q_len == 0) {
    mask.check_lengths(shape.q_len, shape.kv_len);
    return result;
  }
  if (shape.kv_len == 0) {
    mask.check_lengths(shape.q_len, shape.kv_len);
    fill_no_keys(args, axes_of(args));
    return result;
  }
  result.blocks = {options.block_q.value_or(0), options.block_kv.value_or(0)};
  if (!options.block_q || !options.block_kv) {
    const BlockChoice choice = cached_block_choice(mask, shape.q_len, shape.kv_len, shape.head_dim,
                                                   args.q.dtype, options.attention.threads);
    if (!options.block_q) result.blocks.block_q = choice.blocks.block_q;
    if (!options.block_kv) result.blocks.block_kv = choice.blocks.block_kv;
    result.blocks_tuned = choice.from_cache;
  }
  PlanCache& plans = options.plans != nullptr ? *options.plans : PlanCache::shared();
  result.plan = plans.get(mask, shape.q_len, shape.kv_len, result.blocks, &result.plan_seconds);
  layout_attention(runner, *result.plan, args, options.attention, options.progress);
  return result;
}

std::vector<LayerReport> layout_video_attention(VideoAttention& attention, const LayoutArgs& args,
                                                std::int64_t layer, std::int64_t step,
                                                const BatchProgress& progress) {
  const LayoutShape shape = check_layout_args(args);
  std::vector<LayerReport> reports;
  if (shape.batch == 0 || shape.heads == 0) return reports;
  const Axes a = axes_of(args);
  EntryViews entry;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    reports.push_back(
        attention.forward(entry.views(args, a, b, b * shape.heads * shape.q_len), layer, step));
    if (progress) progress(b, 1);
  }
  return reports;
}

}  // namespace tilesplash
