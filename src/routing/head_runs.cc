// How one head runs: dense, a candidate (Q/K/V gathered into its order, its
// plan, an optional second key segment merged through the LSEs, the output
// scattered back; plans cached by mask, so spatial and temporal heads share
// one band plan), Sparse VideoGen 2's clusters (k-means warm-started from
// the same layer's previous call, a plan built for this head and step), or
// its own pooled key tiles (pooled.h, a plan built for this head and step,
// run like a candidate in its selection's row order).
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "clusters/cluster_internal.h"
#include "clusters/cluster_nodes.h"
#include "geometry/permute.h"
#include "routing/front_door.h"
#include "routing/head_merge.h"

namespace tilesplash {
namespace {

using detail::Clock;
using detail::since;

template <typename View>
View head_view(const View& view, std::int64_t head) {
  View one = view;
  using Byte =
      std::conditional_t<std::is_same_v<View, TensorView>, const unsigned char, unsigned char>;
  one.data = static_cast<Byte*>(view.data) + head * view.head_stride * size_of(view.dtype);
  one.heads = 1;
  return one;
}

// Pairs inside the tiles a plan visits (full and partial, ragged edges
// counted in range): the kernel's work in pairs.
double visited_pairs(const TilePlan& plan) {
  double pairs = 0.0;
  for (std::int64_t qb = 0; qb < plan.num_q_blocks(); ++qb) {
    const double rows = static_cast<double>(plan.q_range(qb).size());
    for (const PlanTile& tile : plan.tiles(qb)) {
      pairs += rows * static_cast<double>(plan.kv_range(tile.kv_block).size());
    }
  }
  return pairs;
}

}  // namespace

TensorView VideoAttention::Impl::permuted(const TensorView& src, const RowOrder& order,
                                          std::vector<unsigned char>& buffer) {
  buffer.resize(static_cast<std::size_t>(src.len * src.dim * size_of(src.dtype)));
  const MutableTensorView dst =
      MutableTensorView::contiguous(buffer.data(), src.dtype, 1, src.len, src.dim);
  detail::gather_rows(*context, threads, order, src, dst);
  return TensorView::contiguous(buffer.data(), src.dtype, 1, src.len, src.dim);
}

double VideoAttention::Impl::run_sparse(const AttentionArgs& head, const MaskRun& run,
                                        const TilePlan& plan, HeadReport& report,
                                        double* plan_seconds, std::int64_t key_limit) {
  const std::int64_t n = geometry.tokens();
  const std::int64_t dv = head.v.dim;
  const RowOrder& kv_order = run.kv_order ? *run.kv_order : run.order;
  const double map = static_cast<double>(n) * static_cast<double>(n);
  report.tiles_visited = visited_pairs(plan) / map;
  report.order = std::string(run.order.name());
  double kept = report.tiles_visited;
  TensorView q = head.q, k = head.k, v = head.v;
  if (!run.order.is_identity() || !kv_order.is_identity()) {
    const auto start = Clock::now();
    if (!run.order.is_identity()) q = permuted(head.q, run.order, q_perm);
    if (!kv_order.is_identity()) {
      k = permuted(head.k, kv_order, k_perm);
      v = permuted(head.v, kv_order, v_perm);
    }
    report.permute_seconds += since(start);
  }
  if (run.order.is_identity() && !run.extra && !options.compensate) {
    backend->forward(plan, {q, k, v, head.out, head.lse}, attention_options(options.check_finite));
    return kept;
  }
  band_out.resize(static_cast<std::size_t>(n * dv));
  band_lse.resize(static_cast<std::size_t>(n));
  const MutableTensorView band =
      MutableTensorView::contiguous(band_out.data(), DType::kF32, 1, n, dv);
  backend->forward(plan, {q, k, v, band, band_lse.data()}, attention_options(options.check_finite));
  if (options.compensate)
    compensate_band(run, plan, {q, k, v, band, band_lse.data()}, key_limit, report);
  detail::PartialResult extra{};
  if (run.extra) {
    // The segment's keys (frame 0 for the sink: contiguous in frame-major
    // order, every F-th row in token-major order) as a strided view, no copy.
    const KeySegment& segment = *run.extra;
    const auto keys = [&](TensorView view) {
      view.data = static_cast<const unsigned char*>(view.data) +
                  segment.first * view.row_stride * size_of(view.dtype);
      view.len = segment.count;
      view.row_stride *= segment.stride;
      return view;
    };
    sink_out.resize(static_cast<std::size_t>(n * dv));
    sink_lse.resize(static_cast<std::size_t>(n));
    Mask segment_mask = segment.mask;
    if (options.granularity == Granularity::kTile) {
      // Rounded out, less what the rounded band keeps: the two merge disjoint.
      segment_mask =
          segment_minus(tile_granular_mask(segment.mask, n, segment.count, options.blocks),
                        plan.mask(), segment.first, segment.stride);
    }
    const TilePlan& extra_plan =
        *plans.get(segment_mask, n, segment.count, options.blocks, plan_seconds);
    report.tiles_visited += visited_pairs(extra_plan) / map;
    // Under "tile" the segment's tiles where the band already keeps a sink key
    // stay partial: the kernel visits them, the head keeps only their own pairs.
    kept += static_cast<double>(extra_plan.stats().kept_pairs) / map;
    backend->forward(
        extra_plan,
        {q, keys(k), keys(v), MutableTensorView::contiguous(sink_out.data(), DType::kF32, 1, n, dv),
         sink_lse.data()},
        attention_options(false));
    extra = {sink_out.data(), sink_lse.data()};
  }
  const auto start = Clock::now();
  detail::finish_head(*context, threads, n, run.order, {band_out.data(), band_lse.data()}, extra,
                      dv, head.out, head.lse);
  if (!run.order.is_identity()) report.permute_seconds += since(start);
  return kept;
}

void VideoAttention::Impl::compensate_band(const MaskRun& run, const TilePlan& plan,
                                           const AttentionArgs& band, std::int64_t key_limit,
                                           HeadReport& report) {
  const auto start = Clock::now();
  compensation::KeyFilter filter{.limit = key_limit};
  if (run.extra) {  // the segment attends its keys exactly: they stay out of the means
    filter.first = run.extra->first;
    filter.count = run.extra->count;
    filter.stride = run.extra->stride;
  }
  const float scale = options.scale.value_or(1.0f / std::sqrt(static_cast<float>(band.q.dim)));
  compensation::pool_tiles(*context, threads, band.k, band.v, plan.blocks().block_kv, filter,
                           pooled);
  report.compensated =
      compensation::compensate(*context, threads, plan, band.q, pooled, scale, band.out, band.lse,
                               choose_product_path().path == ProductPath::kDot)
          .front();
  report.compensation_seconds = since(start);
}

Mask VideoAttention::Impl::at_granularity(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                                          BlockSizes blocks) const {
  return mask_at_granularity(mask, q_len, kv_len, blocks, options.granularity);
}

Mask VideoAttention::Impl::padded_run_mask(const MaskRun& run,
                                           const detail::KeyPadding& keys) const {
  const RowOrder& kv_order = run.kv_order ? *run.kv_order : run.order;
  if (!kv_order.is_identity()) {
    for (std::int64_t row = keys.limit; row < geometry.tokens(); ++row) {
      if (kv_order.position(row) != row) {
        detail::front_door_fail("key_limit: the " + std::string(kv_order.name()) +
                                " order moves padded key " + std::to_string(row) +
                                " (only orders that keep trailing text in place can drop it)");
      }
    }
  }
  return run.mask & keys.mask;
}

void VideoAttention::Impl::run_clusters(const AttentionArgs& args, const AttentionArgs& head,
                                        std::int64_t h, std::int64_t layer,
                                        const std::optional<detail::KeyPadding>& keys,
                                        HeadReport& report) {
  const ClusterOptions& o = *options.clusters;
  const auto key = std::make_pair(layer, h);
  const auto previous = warm.find(key);
  auto start = Clock::now();
  HeadClusters clusters =
      detail::cluster_head_on(*context, threads, geometry, args.q, args.k, h, o,
                              previous == warm.end() ? nullptr : &previous->second);
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(double(head.q.dim));
  const std::vector<std::uint8_t> kept = select_cluster_pairs(geometry, clusters, scale, o);
  report.cluster_seconds = since(start);
  start = Clock::now();
  ClusterMasks masks = cluster_masks(geometry, clusters, kept);
  const std::int64_t n = geometry.tokens();
  masks.run.mask = at_granularity(masks.run.mask, n, n, o.blocks);
  // head_mask(): what the head ran, on the original order; rounded in the run
  // order under "tile", which the cluster mask alone does not say.
  Mask ran = options.granularity == Granularity::kTile
                 ? Mask(std::make_shared<detail::RunOrderNode>(masks.run.mask, masks.run.order,
                                                               *masks.run.kv_order, n))
                 : masks.mask;
  if (keys) masks.run.mask = padded_run_mask(masks.run, *keys);
  const TilePlan plan = TilePlan::build(masks.run.mask, n, n, o.blocks);
  report.plan_seconds = since(start);
  const double rounded =
      run_sparse(head, masks.run, plan, report, nullptr, keys ? keys->limit : -1);
  report.density = options.granularity == Granularity::kTile ? rounded : masks.density;
  warm[key] = std::move(clusters);
  head_masks[static_cast<std::size_t>(h)] = std::move(ran);
}

void VideoAttention::Impl::run_pooled(const AttentionArgs& args, const AttentionArgs& head,
                                      std::int64_t h, const std::optional<detail::KeyPadding>& keys,
                                      HeadReport& report) {
  PooledOptions o = *options.pooled;
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(double(head.q.dim));
  auto start = Clock::now();
  PooledSelection selection;
  std::optional<PooledSelection>* routed =
      static_cast<std::size_t>(h) < routed_pooled.size() ? &routed_pooled[std::size_t(h)] : nullptr;
  if (routed != nullptr && routed->has_value()) {
    // The router chose it among the candidates (decide_with_pooled).
    selection = std::move(**routed);
    routed->reset();
  } else if (options.error && !sampled.empty()) {
    // The error target's ladder, p in each row order: the sparsest rung whose
    // sampled error meets it, else the rung of lowest error (the widest p).
    std::vector<PooledSelection> rungs =
        pooled_ladder_selections(geometry, args.q, args.k, h, scale, o, threads, context.get());
    const std::vector<double> errors = pooled_sampled_errors(
        args.q, args.k, args.v, h, scale, sampled, rungs, keys ? keys->limit : -1);
    std::size_t pick = 0;
    for (std::size_t i = 1; i < rungs.size(); ++i) {
      const bool met = errors[i] <= *options.error, pick_met = errors[pick] <= *options.error;
      if (met && pick_met ? rungs[i].kept_pairs < rungs[pick].kept_pairs
                          : met || (!pick_met && errors[i] < errors[pick])) {
        pick = i;
      }
    }
    report.error = errors[pick];
    report.target_met = errors[pick] <= *options.error;
    selection = std::move(rungs[pick]);
  } else if (!sampled.empty()) {
    // The row order whose selection has the lower error on the sampled rows
    // (frame-major on a tie): pooled masses in two orders are two estimates,
    // the sampled rows one measure.
    std::vector<PooledSelection> orders =
        pooled_order_selections(geometry, args.q, args.k, h, scale, o, threads, context.get());
    std::size_t pick = 0;
    if (orders.size() > 1) {
      const std::vector<double> errors = pooled_sampled_errors(
          args.q, args.k, args.v, h, scale, sampled, orders, keys ? keys->limit : -1);
      for (std::size_t i = 1; i < orders.size(); ++i) {
        if (errors[i] < errors[pick]) pick = i;
      }
    }
    selection = std::move(orders[pick]);
  } else {
    selection = pooled_select(geometry, args.q, args.k, h, scale, o, threads, context.get());
  }
  report.cluster_seconds = since(start);
  start = Clock::now();
  const std::int64_t n = geometry.tokens();
  // The selection's tiles are over its run order: the head runs there, as a
  // candidate does (run_sparse gathers Q, K, V and scatters the output back).
  MaskRun run(selection.order, pooled_mask(selection));
  if (keys) run.mask = padded_run_mask(run, *keys);
  const TilePlan plan = TilePlan::build(run.mask, n, n, o.blocks);
  report.plan_seconds = since(start);
  run_sparse(head, run, plan, report, nullptr, keys ? keys->limit : -1);
  report.density = selection.density;
  report.family = detail::kPooledChoice.name();
  // An error target's rung is the p of the ladder that met it.
  report.rung = options.error ? selection.p : 0.0;
  head_masks[static_cast<std::size_t>(h)] = pooled_original_mask(selection);
}

const TilePlan& VideoAttention::Impl::candidate_plan(const MaskCandidate& candidate,
                                                     const std::optional<detail::KeyPadding>& keys,
                                                     double* plan_seconds) {
  const std::int64_t n = geometry.tokens();
  MaskRun run = candidate.run;
  run.mask = at_granularity(run.mask, n, n, options.blocks);
  const Mask run_mask = keys ? padded_run_mask(run, *keys) : run.mask;
  return *plans.get(run_mask, n, n, options.blocks, plan_seconds);
}

detail::CompensationTerms VideoAttention::Impl::compensation_terms(
    const TensorView& q, const TensorView& k, const TensorView& v,
    const std::vector<std::int64_t>& rows, const std::optional<detail::KeyPadding>& keys) {
  std::vector<detail::CompensatedRun> runs;
  for (const MaskCandidate& candidate : candidates) {
    detail::CompensatedRun run{
        &candidate_plan(candidate, keys, nullptr),
        candidate.run.order,
        candidate.run.kv_order ? *candidate.run.kv_order : candidate.run.order,
        {.limit = keys ? keys->limit : -1}};
    if (const std::optional<KeySegment>& extra = candidate.run.extra) {
      run.filter.first = extra->first;
      run.filter.count = extra->count;
      run.filter.stride = extra->stride;
    }
    runs.push_back(std::move(run));
  }
  const float scale = options.scale.value_or(1.0f / std::sqrt(static_cast<float>(q.dim)));
  return detail::compensation_terms(*context, threads, q, k, v, runs, rows, scale);
}

HeadReport VideoAttention::Impl::run_head(const AttentionArgs& args, std::int64_t h,
                                          const HeadMask& choice, std::int64_t layer,
                                          const std::optional<detail::KeyPadding>& keys,
                                          double* plan_seconds) {
  const auto start = Clock::now();
  const std::int64_t n = geometry.tokens();
  const AttentionArgs head{head_view(args.q, h), head_view(args.k, h), head_view(args.v, h),
                           head_view(args.out, h), args.lse ? args.lse + h * n : nullptr};
  HeadReport report;
  report.head = h;
  report.choice = choice;
  if (choice == HeadMask::kDense) {
    const TilePlan& plan =
        *plans.get(keys ? keys->mask : Mask::dense(), n, n, options.blocks, plan_seconds);
    backend->forward(plan, head, attention_options(options.check_finite));
    report.density = 1.0;
    report.tiles_visited = keys ? visited_pairs(plan) / (double(n) * double(n)) : 1.0;
  } else if (choice == detail::kClusterChoice) {
    report.family = choice.name();
    run_clusters(args, head, h, layer, keys, report);
  } else if (choice == detail::kPooledChoice && options.pooled) {
    run_pooled(args, head, h, keys, report);
  } else {
    const MaskCandidate& candidate = find(choice);
    report.family = candidate_families[static_cast<std::size_t>(&candidate - candidates.data())];
    report.rung = candidate.rung;
    const TilePlan& plan = candidate_plan(candidate, keys, plan_seconds);
    const double kept =
        run_sparse(head, candidate.run, plan, report, plan_seconds, keys ? keys->limit : -1);
    // Tile-granular: the rounded masks' density, the pairs they keep.
    report.density = options.granularity == Granularity::kTile ? kept : candidate.density;
  }
  report.seconds = since(start);
  return report;
}

}  // namespace tilesplash
