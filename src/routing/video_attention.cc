// The front door: warm-up policy, routing, then per head either the dense
// plan, or its candidate's plan in the candidate's run order (Q/K/V gathered
// into it and the output scattered back; the spatial and temporal heads share
// one band plan) with an optional second key segment (the sink) merged
// through the LSEs. Plans are cached by mask, so candidates that share a run
// mask share a plan. Heads run one at a time: each call is a whole sequence,
// plenty of q-blocks to keep every core busy, and scratch stays one head large.
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
  if (o.density_budget && !(*o.density_budget > 0.0 && *o.density_budget <= 1.0)) {
    fail("options.density_budget must be in (0, 1], got " + std::to_string(*o.density_budget));
  }
}

void check_candidates(const std::vector<MaskCandidate>& candidates, std::int64_t tokens) {
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const MaskCandidate& c = candidates[i];
    const std::string where = "options.candidates[" + std::to_string(i) + "]";
    if (c.name.empty() || c.name == "dense") {
      fail(where + ".name must be a non-empty name other than 'dense', got '" + c.name + "'");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (candidates[j].name == c.name) fail(where + ".name '" + c.name + "' is not unique");
    }
    if (!(c.density >= 0.0 && c.density <= 1.0)) {
      fail(where + ".density must be in [0, 1], got " + std::to_string(c.density));
    }
    if (!c.run.order.is_identity() && c.run.order.size() != tokens) {
      fail(where + ".run.order must cover the geometry's " + str(tokens) + " tokens, got " +
           str(c.run.order.size()));
    }
    c.mask.check_lengths(tokens, tokens);
    c.run.mask.check_lengths(tokens, tokens);
    if (c.run.extra) {
      const KeySegment& e = *c.run.extra;
      if (e.count < 1 || e.stride < 1 || e.first < 0 ||
          e.first + (e.count - 1) * e.stride >= tokens) {
        fail(where + ".run.extra must select keys inside [0, " + str(tokens) +
             ") with count >= 1 and stride >= 1, got first " + str(e.first) + ", count " +
             str(e.count) + ", stride " + str(e.stride));
      }
      e.mask.check_lengths(tokens, e.count);
    }
  }
}

}  // namespace

struct VideoAttention::Impl {
  Impl(const VideoGeometry& g, VideoAttentionOptions o)
      : geometry((g.validate(), g)),
        options((check_options(o), std::move(o))),
        mask_options{options.sink, options.text_full},
        band(options.band ? *options.band
                          : band_for_density(geometry, options.density, mask_options)),
        candidates(make_candidates()),
        threads(options.threads > 0 ? options.threads : runtime::ThreadPool::hardware_threads()) {
    for (const MaskCandidate& c : candidates) candidate_masks.push_back(c.mask);
    if (options.force && *options.force != HeadMask::kDense) find(*options.force);
  }

  std::vector<MaskCandidate> make_candidates() const {
    if (options.candidates.empty()) {
      return {video_candidate(VideoMaskKind::kSpatial, geometry, band, mask_options),
              video_candidate(VideoMaskKind::kTemporal, geometry, band, mask_options)};
    }
    check_candidates(options.candidates, geometry.tokens());
    return options.candidates;
  }

  // The candidate of this name; throws naming the valid ones.
  const MaskCandidate& find(const HeadMask& choice) const {
    std::string names = "dense";
    for (const MaskCandidate& c : candidates) {
      if (c.name == choice.name()) return c;
      names += ", " + c.name;
    }
    fail("no candidate named '" + choice.name() + "' (expected one of " + names + ")");
  }

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

  std::vector<RouteDecision> route(const TensorView& q, const TensorView& k, const TensorView& v,
                                   std::int64_t layer, std::int64_t step);
  HeadReport run_head(const AttentionArgs& args, std::int64_t h, const HeadMask& choice,
                      double* plan_seconds);
  void run_sparse(const AttentionArgs& head, const MaskRun& run, HeadReport& report,
                  double* plan_seconds);
  TensorView permuted(const TensorView& src, const RowOrder& order,
                      std::vector<unsigned char>& buffer);

  VideoGeometry geometry;
  VideoAttentionOptions options;
  VideoMaskOptions mask_options;
  std::int64_t band;
  std::vector<MaskCandidate> candidates;
  std::vector<Mask> candidate_masks;  // what the router scores, in candidates order
  int threads;
  AttentionRunner runner;
  runtime::ThreadPool pool;
  detail::PlanCache plans;
  detail::Router router;
  std::vector<unsigned char> q_perm, k_perm, v_perm;          // one head, run order, input dtype
  std::vector<float> band_out, band_lse, sink_out, sink_lse;  // one head, run order
};

TensorView VideoAttention::Impl::permuted(const TensorView& src, const RowOrder& order,
                                          std::vector<unsigned char>& buffer) {
  buffer.resize(static_cast<std::size_t>(src.len * src.dim * size_of(src.dtype)));
  const MutableTensorView dst =
      MutableTensorView::contiguous(buffer.data(), src.dtype, 1, src.len, src.dim);
  detail::gather_rows(pool, threads, order, src, dst);
  return TensorView::contiguous(buffer.data(), src.dtype, 1, src.len, src.dim);
}

void VideoAttention::Impl::run_sparse(const AttentionArgs& head, const MaskRun& run,
                                      HeadReport& report, double* plan_seconds) {
  const std::int64_t n = geometry.tokens();
  const std::int64_t dv = head.v.dim;
  const bool reordered = !run.order.is_identity();
  TensorView q = head.q, k = head.k, v = head.v;
  if (reordered) {
    const auto start = Clock::now();
    q = permuted(head.q, run.order, q_perm);
    k = permuted(head.k, run.order, k_perm);
    v = permuted(head.v, run.order, v_perm);
    report.permute_seconds += since(start);
  }
  const TilePlan& main_plan = plans.get(run.mask, n, n, options.blocks, plan_seconds);
  if (!reordered && !run.extra) {
    runner.forward(main_plan, {q, k, v, head.out, head.lse},
                   attention_options(options.check_finite));
    return;
  }
  band_out.resize(static_cast<std::size_t>(n * dv));
  band_lse.resize(static_cast<std::size_t>(n));
  runner.forward(main_plan,
                 {q, k, v, MutableTensorView::contiguous(band_out.data(), DType::kF32, 1, n, dv),
                  band_lse.data()},
                 attention_options(options.check_finite));
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
    const TilePlan& extra_plan =
        plans.get(segment.mask, n, segment.count, options.blocks, plan_seconds);
    runner.forward(
        extra_plan,
        {q, keys(k), keys(v), MutableTensorView::contiguous(sink_out.data(), DType::kF32, 1, n, dv),
         sink_lse.data()},
        attention_options(false));
    extra = {sink_out.data(), sink_lse.data()};
  }
  const auto start = Clock::now();
  detail::finish_head(pool, threads, n, run.order, {band_out.data(), band_lse.data()}, extra, dv,
                      head.out, head.lse);
  if (reordered) report.permute_seconds += since(start);
}

HeadReport VideoAttention::Impl::run_head(const AttentionArgs& args, std::int64_t h,
                                          const HeadMask& choice, double* plan_seconds) {
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
    const MaskCandidate& candidate = find(choice);
    run_sparse(head, candidate.run, report, plan_seconds);
    report.density = candidate.density;
  }
  report.seconds = since(start);
  return report;
}

std::vector<RouteDecision> VideoAttention::Impl::route(const TensorView& q, const TensorView& k,
                                                       const TensorView& v, std::int64_t layer,
                                                       std::int64_t step) {
  const std::vector<std::int64_t> rows =
      detail::sample_video_rows(geometry, options.router.samples, options.router.seed, layer, step);
  std::vector<std::vector<double>> mse =
      router.score(runner, q, k, v, candidate_masks, rows, options.blocks.block_kv,
                   attention_options(false), nullptr);
  std::vector<RouteDecision> decisions;
  for (std::vector<double>& head : mse) {
    decisions.push_back(detail::decide(candidates, std::move(head), options.density_budget));
  }
  return decisions;
}

VideoAttention::VideoAttention(const VideoGeometry& geometry, VideoAttentionOptions options)
    : impl_(std::make_unique<Impl>(geometry, std::move(options))) {}

VideoAttention::~VideoAttention() = default;

const VideoGeometry& VideoAttention::geometry() const { return impl_->geometry; }
const VideoAttentionOptions& VideoAttention::options() const { return impl_->options; }
std::int64_t VideoAttention::band() const { return impl_->band; }
const std::vector<MaskCandidate>& VideoAttention::candidates() const { return impl_->candidates; }

Mask VideoAttention::mask(const HeadMask& choice) const {
  if (choice == HeadMask::kDense) return Mask::dense();
  return impl_->find(choice).mask;
}

std::vector<RouteDecision> VideoAttention::route(const TensorView& q, const TensorView& k,
                                                 const TensorView& v, std::int64_t layer,
                                                 std::int64_t step) {
  impl_->check_args(q, k, v);
  return impl_->route(q, k, v, layer, step);
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
  // One candidate needs no routing: every head runs it.
  const bool routed = !report.warmup && !s.options.force && s.candidates.size() > 1;
  if (routed) {
    const auto route_start = Clock::now();
    decisions = s.route(args.q, args.k, args.v, layer, step);
    report.routing_seconds = since(route_start);
  }
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (std::int64_t h = 0; h < heads; ++h) {
    HeadMask choice = HeadMask::kDense;
    if (routed) {
      choice = decisions[static_cast<std::size_t>(h)].choice;
    } else if (report.warmup) {
      choice = HeadMask::kDense;
    } else if (s.options.force) {
      choice = *s.options.force;
    } else {
      choice = HeadMask(s.candidates.front().name);
    }
    HeadReport head = s.run_head(args, h, choice, &report.plan_seconds);
    head.routed = routed;
    head.mse_spatial = routed ? decisions[static_cast<std::size_t>(h)].mse_spatial : kNaN;
    head.mse_temporal = routed ? decisions[static_cast<std::size_t>(h)].mse_temporal : kNaN;
    if (routed) head.mse = decisions[static_cast<std::size_t>(h)].mse;
    report.permute_seconds += head.permute_seconds;
    report.attention_seconds += head.seconds;
    report.heads.push_back(std::move(head));
  }
  report.total_seconds = since(start);
  return report;
}

}  // namespace tilesplash
