// Both sides run through VideoAttention, so the dense side pays exactly the
// front door's overheads too and the ratio compares kernels, not wrappers.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "tilesplash/evaluation.h"

namespace tilesplash {
namespace {

template <typename View>
View head_of(View view, std::int64_t head) {
  using Byte =
      std::conditional_t<std::is_same_v<View, TensorView>, const unsigned char, unsigned char>;
  view.data = static_cast<Byte*>(view.data) + head * view.head_stride * size_of(view.dtype);
  view.heads = 1;
  return view;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// A report whose per-head and per-layer times are medians over the runs.
LayerReport median_report(const std::vector<LayerReport>& runs) {
  LayerReport result = runs.front();
  const auto pick = [&](auto field) {
    std::vector<double> values;
    for (const LayerReport& run : runs) values.push_back(field(run));
    return median(std::move(values));
  };
  result.routing_seconds = pick([](const LayerReport& r) { return r.routing_seconds; });
  result.plan_seconds = pick([](const LayerReport& r) { return r.plan_seconds; });
  result.permute_seconds = pick([](const LayerReport& r) { return r.permute_seconds; });
  result.attention_seconds = pick([](const LayerReport& r) { return r.attention_seconds; });
  result.total_seconds = pick([](const LayerReport& r) { return r.total_seconds; });
  for (std::size_t h = 0; h < result.heads.size(); ++h) {
    result.heads[h].seconds = pick([h](const LayerReport& r) { return r.heads[h].seconds; });
    result.heads[h].permute_seconds =
        pick([h](const LayerReport& r) { return r.heads[h].permute_seconds; });
  }
  return result;
}

// One layer: a single forward, or one per head summed into one report.
LayerReport run_once(VideoAttention& attention, const AttentionArgs& args,
                     const DenseComparisonOptions& compare, bool dense) {
  if (!compare.head_by_head) return attention.forward(args, compare.layer, compare.step);
  LayerReport total;
  const std::int64_t n = args.q.len;
  for (std::int64_t h = 0; h < args.q.heads; ++h) {
    const LayerReport one =
        attention.forward({head_of(args.q, h), head_of(args.k, h), head_of(args.v, h),
                           head_of(args.out, h), args.lse ? args.lse + h * n : nullptr},
                          compare.layer, compare.step);
    HeadReport head = one.heads.front();
    head.head = h;
    total.heads.push_back(head);
    total.band = one.band;
    total.warmup = one.warmup;
    total.routing_seconds += one.routing_seconds;
    total.plan_seconds += one.plan_seconds;
    total.permute_seconds += one.permute_seconds;
    total.attention_seconds += one.attention_seconds;
    total.total_seconds += one.total_seconds;
    if (compare.on_head) compare.on_head(h, dense);
  }
  return total;
}

LayerReport run_side(const VideoGeometry& geometry, const VideoAttentionOptions& options,
                     const AttentionArgs& args, const DenseComparisonOptions& compare, bool dense,
                     const std::shared_ptr<ThreadingContext>& context,
                     std::vector<MaskCandidate>* candidates = nullptr) {
  VideoAttention attention(geometry, options, context);
  if (candidates != nullptr) *candidates = attention.candidates();
  if (compare.repeats < 1) return run_once(attention, args, compare, dense);
  run_once(attention, args, compare, dense);
  std::vector<LayerReport> runs;
  for (int r = 0; r < compare.repeats; ++r)
    runs.push_back(run_once(attention, args, compare, dense));
  return median_report(runs);
}

}  // namespace

double cosine_similarity(const float* a, const float* b, std::int64_t count) {
  double dot = 0.0, aa = 0.0, bb = 0.0;
  for (std::int64_t i = 0; i < count; ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return aa > 0.0 && bb > 0.0 ? dot / std::sqrt(aa * bb) : 0.0;
}

double relative_l2(const float* a, const float* b, std::int64_t count) {
  double diff = 0.0, bb = 0.0;
  for (std::int64_t i = 0; i < count; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    diff += d * d;
    bb += static_cast<double>(b[i]) * b[i];
  }
  if (bb > 0.0) return std::sqrt(diff / bb);
  return diff > 0.0 ? std::numeric_limits<double>::infinity() : 0.0;
}

DenseComparison compare_with_dense(const VideoGeometry& geometry,
                                   const VideoAttentionOptions& options, const TensorView& q,
                                   const TensorView& k, const TensorView& v,
                                   const DenseComparisonOptions& compare) {
  const std::int64_t heads = q.heads, n = q.len, dv = v.dim;
  const std::size_t count = static_cast<std::size_t>(std::max<std::int64_t>(heads * n * dv, 0));
  std::vector<float> sparse_out(count);
  DenseComparison result;
  const std::shared_ptr<ThreadingContext> context =
      compare.context ? compare.context : std::make_shared<ThreadingContext>();
  result.sparse = run_side(
      geometry, options,
      {q, k, v, MutableTensorView::contiguous(sparse_out.data(), DType::kF32, heads, n, dv)},
      compare, false, context, &result.candidates);
  if (!compare.compare_dense) return result;
  std::vector<float> dense_out(count);
  VideoAttentionOptions dense_options = options;
  dense_options.force = HeadMask::kDense;
  result.dense = run_side(
      geometry, dense_options,
      {q, k, v, MutableTensorView::contiguous(dense_out.data(), DType::kF32, heads, n, dv)},
      compare, true, context);
  for (std::int64_t h = 0; h < heads; ++h) {
    result.cosine.push_back(
        cosine_similarity(sparse_out.data() + h * n * dv, dense_out.data() + h * n * dv, n * dv));
    result.relative_l2.push_back(
        relative_l2(sparse_out.data() + h * n * dv, dense_out.data() + h * n * dv, n * dv));
  }
  return result;
}

}  // namespace tilesplash
