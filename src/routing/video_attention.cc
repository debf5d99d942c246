// The front door: warm-up policy, routing, then per head either the dense
// plan, or the shared band plan in the head's run order (temporal heads
// permuted to token-major and back) with the sink as a second key segment
// merged through the LSEs. Heads run one at a time: each call is a whole
// sequence, plenty of q-blocks to keep every core busy, and scratch stays one
// head large.
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "routing/head_merge.h"
#include "routing/plan_cache.h"
#include "routing/router.h"
#include "runtime/thread_pool.h"
#include "tilesplash/routing.h"
#include "video/permute.h"

namespace tilesplash {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("VideoAttention: " + message);
}

std::string str(std::int64_t value) { return std::to_string(value); }

template <typename View>
View head_view(const View& view, std::int64_t head) {
  View one = view;
  using Byte =
      std::conditional_t<std::is_same_v<View, TensorView>, const unsigned char, unsigned char>;
  one.data = static_cast<Byte*>(view.data) + head * view.head_stride * size_of(view.dtype);
  one.heads = 1;
  return one;
}

template <typename View>
void check_tokens(const char* name, const View& view, std::int64_t tokens, std::int64_t heads) {
  if (view.data == nullptr) fail(std::string(name) + ".data must not be null");
  if (view.len != tokens) {
    fail(std::string(name) + ".len must equal the geometry's tokens (" + str(tokens) + "), got " +
         str(view.len));
  }
  if (view.heads != heads) {
    fail(std::string(name) + ".heads must equal q.heads (" + str(heads) + "), got " +
         str(view.heads));
  }
}

void check_options(const VideoAttentionOptions& o) {
  if (o.band && *o.band < 0) fail("options.band must be >= 0, got " + str(*o.band));
  if (!o.band && !(o.density > 0.0 && o.density <= 1.0)) {
    fail("options.density must be in (0, 1], got " + std::to_string(o.density));
  }
  if (o.router.samples < 1) {
    fail("options.router.samples must be >= 1, got " + str(o.router.samples));
  }
  if (o.threads < 0) fail("options.threads must be >= 0 (0 = all cores), got " + str(o.threads));
  if (o.warmup.dense_layers < 0 || o.warmup.dense_steps < 0) {
    fail("options.warmup counts must be >= 0, got " + str(o.warmup.dense_layers) + " layers, " +
         str(o.warmup.dense_steps) + " steps");
  }
}

}  // namespace

std::string_view to_string(HeadMask mask) {
  switch (mask) {
    case HeadMask::kDense:
      return "dense";
    case HeadMask::kSpatial:
      return "spatial";
    case HeadMask::kTemporal:
      return "temporal";
  }
  return "?";
}

struct VideoAttention::Impl {
  Impl(const VideoGeometry& g, VideoAttentionOptions o)
      : geometry((g.validate(), g)),
        options((check_options(o), std::move(o))),
        mask_options{options.sink, options.text_full},
        band(options.band ? *options.band
                          : band_for_density(geometry, options.density, mask_options)),
        spatial(spatial_mask(geometry, band, mask_options)),
        temporal(temporal_mask(geometry, band, mask_options)),
        spatial_run(video_run_masks(VideoMaskKind::kSpatial, geometry, band, mask_options)),
        temporal_run(video_run_masks(VideoMaskKind::kTemporal, geometry, band, mask_options)),
        threads(options.threads > 0 ? options.threads : runtime::ThreadPool::hardware_threads()) {}

  AttentionOptions attention_options(bool check_finite) const {
    AttentionOptions o;
    o.scale = options.scale;
    o.threads = threads;
    o.check_finite = check_finite;
    return o;
  }

  void check_args(const TensorView& q, const TensorView& k, const TensorView& v) const {
    const std::int64_t n = geometry.tokens();
    if (q.heads < 1) fail("q.heads must be >= 1, got " + str(q.heads));
    check_tokens("q", q, n, q.heads);
    check_tokens("k", k, n, q.heads);
    check_tokens("v", v, n, q.heads);
  }

  HeadReport run_head(const AttentionArgs& args, std::int64_t h, HeadMask choice,
                      double* plan_seconds);
  void run_sparse(const AttentionArgs& head, const VideoRunMasks& run, HeadReport& report,
                  double* plan_seconds);
  TensorView permuted(const TensorView& src, std::vector<unsigned char>& buffer);

  VideoGeometry geometry;
  VideoAttentionOptions options;
  VideoMaskOptions mask_options;
  std::int64_t band;
  Mask spatial;
  Mask temporal;
  VideoRunMasks spatial_run;
  VideoRunMasks temporal_run;
  int threads;
  AttentionRunner runner;
  runtime::ThreadPool pool;
  detail::PlanCache plans;
  detail::Router router;
  std::vector<unsigned char> q_perm, k_perm, v_perm;          // one head, token-major, input dtype
  std::vector<float> band_out, band_lse, sink_out, sink_lse;  // one head, run order
};

TensorView VideoAttention::Impl::permuted(const TensorView& src,
                                          std::vector<unsigned char>& buffer) {
  buffer.resize(static_cast<std::size_t>(src.len * src.dim * size_of(src.dtype)));
  const MutableTensorView dst =
      MutableTensorView::contiguous(buffer.data(), src.dtype, 1, src.len, src.dim);
  detail::permute_rows(pool, threads, geometry, TokenOrder::kTokenMajor, src, dst);
  return TensorView::contiguous(buffer.data(), src.dtype, 1, src.len, src.dim);
}

void VideoAttention::Impl::run_sparse(const AttentionArgs& head, const VideoRunMasks& run,
                                      HeadReport& report, double* plan_seconds) {
  const std::int64_t n = geometry.tokens();
  const std::int64_t dv = head.v.dim;
  const bool token_major = run.order == TokenOrder::kTokenMajor;
  TensorView q = head.q, k = head.k, v = head.v;
  if (token_major) {
    const auto start = Clock::now();
    q = permuted(head.q, q_perm);
    k = permuted(head.k, k_perm);
    v = permuted(head.v, v_perm);
    report.permute_seconds += since(start);
  }
  const TilePlan& band_plan = plans.get(run.band, n, n, options.blocks, plan_seconds);
  if (!token_major && !run.sink) {
    runner.forward(band_plan, {q, k, v, head.out, head.lse},
                   attention_options(options.check_finite));
    return;
  }
  band_out.resize(static_cast<std::size_t>(n * dv));
  band_lse.resize(static_cast<std::size_t>(n));
  runner.forward(band_plan,
                 {q, k, v, MutableTensorView::contiguous(band_out.data(), DType::kF32, 1, n, dv),
                  band_lse.data()},
                 attention_options(options.check_finite));
  detail::PartialResult sink{};
  if (run.sink) {
    // Frame 0's keys: contiguous in frame-major order, every F-th row in
    // token-major order; a strided view, no copy.
    const std::int64_t p = geometry.tokens_per_frame();
    const std::int64_t stride = token_major ? geometry.frames : 1;
    const std::int64_t first = geometry.video_range().begin;
    const auto frame0 = [&](TensorView view) {
      view.data = static_cast<const unsigned char*>(view.data) +
                  first * view.row_stride * size_of(view.dtype);
      view.len = p;
      view.row_stride *= stride;
      return view;
    };
    sink_out.resize(static_cast<std::size_t>(n * dv));
    sink_lse.resize(static_cast<std::size_t>(n));
    const TilePlan& sink_plan = plans.get(*run.sink, n, p, options.blocks, plan_seconds);
    runner.forward(
        sink_plan,
        {q, frame0(k), frame0(v),
         MutableTensorView::contiguous(sink_out.data(), DType::kF32, 1, n, dv), sink_lse.data()},
        attention_options(false));
    sink = {sink_out.data(), sink_lse.data()};
  }
  const auto start = Clock::now();
  detail::finish_head(pool, threads, geometry, run.order, {band_out.data(), band_lse.data()}, sink,
                      dv, head.out, head.lse);
  if (token_major) report.permute_seconds += since(start);
}

HeadReport VideoAttention::Impl::run_head(const AttentionArgs& args, std::int64_t h,
                                          HeadMask choice, double* plan_seconds) {
  const auto start = Clock::now();
  const std::int64_t n = geometry.tokens();
  const AttentionArgs head{head_view(args.q, h), head_view(args.k, h), head_view(args.v, h),
                           head_view(args.out, h), args.lse ? args.lse + h * n : nullptr};
  HeadReport report;
  report.head = h;
  report.choice = choice;
  if (choice == HeadMask::kDense) {
    const TilePlan& plan = plans.get(Mask::dense(), n, n, options.blocks, plan_seconds);
    runner.forward(plan, head, attention_options(options.check_finite));
    report.density = 1.0;
  } else {
    const bool is_spatial = choice == HeadMask::kSpatial;
    run_sparse(head, is_spatial ? spatial_run : temporal_run, report, plan_seconds);
    report.density =
        video_mask_density(is_spatial ? VideoMaskKind::kSpatial : VideoMaskKind::kTemporal,
                           geometry, band, mask_options);
  }
  report.seconds = since(start);
  return report;
}

VideoAttention::VideoAttention(const VideoGeometry& geometry, VideoAttentionOptions options)
    : impl_(std::make_unique<Impl>(geometry, std::move(options))) {}

VideoAttention::~VideoAttention() = default;

const VideoGeometry& VideoAttention::geometry() const { return impl_->geometry; }
const VideoAttentionOptions& VideoAttention::options() const { return impl_->options; }
std::int64_t VideoAttention::band() const { return impl_->band; }

Mask VideoAttention::mask(HeadMask choice) const {
  switch (choice) {
    case HeadMask::kSpatial:
      return impl_->spatial;
    case HeadMask::kTemporal:
      return impl_->temporal;
    case HeadMask::kDense:
      break;
  }
  return Mask::dense();
}

std::vector<RouteDecision> VideoAttention::route(const TensorView& q, const TensorView& k,
                                                 const TensorView& v, std::int64_t layer,
                                                 std::int64_t step) {
  Impl& s = *impl_;
  s.check_args(q, k, v);
  const std::vector<std::int64_t> rows = detail::sample_video_rows(
      s.geometry, s.options.router.samples, s.options.router.seed, layer, step);
  return s.router.route(s.runner, q, k, v, s.spatial, s.temporal, rows, s.options.blocks.block_kv,
                        s.attention_options(false), nullptr);
}

LayerReport VideoAttention::forward(const AttentionArgs& args, std::int64_t layer,
                                    std::int64_t step) {
  const auto start = Clock::now();
  Impl& s = *impl_;
  s.check_args(args.q, args.k, args.v);
  check_tokens("out", args.out, s.geometry.tokens(), args.q.heads);
  const std::int64_t heads = args.q.heads;

  LayerReport report;
  report.band = s.band;
  report.warmup = s.options.warmup.is_dense(layer, step);
  std::vector<RouteDecision> decisions;
  const bool routed = !report.warmup && !s.options.force;
  if (routed) {
    const auto route_start = Clock::now();
    const std::vector<std::int64_t> rows = detail::sample_video_rows(
        s.geometry, s.options.router.samples, s.options.router.seed, layer, step);
    decisions = s.router.route(s.runner, args.q, args.k, args.v, s.spatial, s.temporal, rows,
                               s.options.blocks.block_kv, s.attention_options(false), nullptr);
    report.routing_seconds = since(route_start);
  }
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (std::int64_t h = 0; h < heads; ++h) {
    HeadMask choice = HeadMask::kDense;
    if (routed) {
      choice = decisions[static_cast<std::size_t>(h)].choice;
    } else if (!report.warmup) {
      choice = *s.options.force;
    }
    HeadReport head = s.run_head(args, h, choice, &report.plan_seconds);
    head.routed = routed;
    head.mse_spatial = routed ? decisions[static_cast<std::size_t>(h)].mse_spatial : kNaN;
    head.mse_temporal = routed ? decisions[static_cast<std::size_t>(h)].mse_temporal : kNaN;
    report.permute_seconds += head.permute_seconds;
    report.attention_seconds += head.seconds;
    report.heads.push_back(head);
  }
  report.total_seconds = since(start);
  return report;
}

}  // namespace tilesplash
