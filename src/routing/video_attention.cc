// The front door: options, warm-up policy, routing and the layer loop; how
// each head runs is in head_runs.cc. Heads run one at a time: each call is a
// whole sequence, plenty of q-blocks to keep every core busy, and scratch
// stays one head large.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "clusters/cluster_internal.h"
#include "methods/registry.h"
#include "routing/front_door.h"
#include "routing/ladder_scorer.h"
#include "tilesplash/routing.h"

namespace tilesplash {
namespace {

using detail::Clock;
using detail::since;

[[noreturn]] void fail(const std::string& message) { detail::front_door_fail(message); }

std::string str(std::int64_t value) { return std::to_string(value); }

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
  if (o.router.samples < 0) {
    fail("options.router.samples must be >= 0 (0 = default_router_samples()), got " +
         str(o.router.samples));
  }
  if (o.threads < 0) {
    fail("options.threads must be >= 0 (0 = the context's threads), got " + str(o.threads));
  }
  if (o.warmup.dense_layers < 0 || o.warmup.dense_steps < 0) {
    fail("options.warmup counts must be >= 0, got " + str(o.warmup.dense_layers) + " layers, " +
         str(o.warmup.dense_steps) + " steps");
  }
  if (o.density_budget && !(*o.density_budget > 0.0 && *o.density_budget <= 1.0)) {
    fail("options.density_budget must be in (0, 1], got " + std::to_string(*o.density_budget));
  }
  try {
    if (o.error) check_error_target(*o.error, "options.error");
    if (!o.densities.empty() && !o.error) {
      throw std::invalid_argument(
          "options.densities: a density ladder applies with options.error only");
    }
    if (!o.densities.empty()) check_density_ladder(o.densities, "options.densities");
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  if (o.pooled) {
    // Beside candidates, the router scores each head's selection too (mix).
    if (o.clusters) fail("options.pooled and options.clusters are exclusive");
    if (!o.densities.empty() && o.candidates.empty()) {
      fail("options.densities: pooled heads step over p (pooled_p_ladder()), not densities");
    }
    try {
      check_pooled_options(*o.pooled);
    } catch (const std::invalid_argument& e) {
      fail(std::string("options.pooled.") + e.what());
    }
  }
  if (o.error && o.clusters) {
    fail("options.error: heads running clusters (options.clusters) have no density ladder");
  }
  if (o.clusters) {
    if (!o.candidates.empty()) {
      fail(
          "options.clusters and options.candidates are exclusive (svg2 heads run their own "
          "clusters; the router chooses among candidates)");
    }
    try {
      detail::check_cluster_options(*o.clusters);
    } catch (const std::invalid_argument& e) {
      fail(std::string("options.") + e.what());
    }
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

// The router's rows: 0 resolves to the rule, so every sampling site (routing,
// sampled_rows(), pooled heads' error target) and options() agree.
VideoAttentionOptions with_samples(VideoAttentionOptions o, const VideoGeometry& g) {
  if (o.router.samples == 0) o.router.samples = default_router_samples(g.video_range().size());
  return o;
}

}  // namespace

namespace detail {

void front_door_fail(const std::string& message) {
  throw std::invalid_argument("VideoAttention: " + message);
}

}  // namespace detail

VideoAttention::Impl::Impl(const VideoGeometry& g, VideoAttentionOptions o,
                           std::shared_ptr<ThreadingContext> c)
    : geometry((g.validate(), g)),
      options((check_options(o), with_samples(std::move(o), geometry))),
      mask_options{options.sink, options.text_full},
      band(options.band ? *options.band
                        : band_for_density(geometry, options.density, mask_options)),
      candidates(make_candidates()),
      context(c ? std::move(c) : std::make_shared<ThreadingContext>()),
      threads(context->resolve(options.threads)),
      backend(make_backend("cpu", context)) {
  for (const MaskCandidate& c : candidates) {
    candidate_masks.push_back(c.mask);
    const std::string_view family = detail::mask_family(c.mask);
    candidate_families.emplace_back(!family.empty()     ? std::string(family)
                                    : !c.family.empty() ? c.family
                                                        : c.name);
  }
  if (options.force) {
    const std::vector<std::string> names = force_names(options);
    if (std::find(names.begin(), names.end(), options.force->name()) == names.end()) {
      std::string list;
      for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
      fail("options.force must be one of " + list + ", got '" + options.force->name() + "'");
    }
  }
}

std::vector<std::string> force_names(const VideoAttentionOptions& options) {
  std::vector<std::string> names = {"dense"};
  if (options.clusters) {
    names.push_back(detail::kClusterChoice.name());
  } else if (options.pooled) {
    names.push_back(detail::kPooledChoice.name());
    for (const MaskCandidate& c : options.candidates) names.push_back(c.name);
  } else if (options.candidates.empty()) {
    // The default method's masks, named before the geometry is known.
    const std::span<const std::string_view> masks = detail::default_method_entry().info.mask_names;
    if (!options.error) {
      names.insert(names.end(), masks.begin(), masks.end());
      return names;
    }
    for (const double d : options.densities.empty() ? default_density_ladder()
                                                    : std::span<const double>(options.densities)) {
      for (const std::string_view mask : masks) names.push_back(ladder_name(mask, d));
    }
  } else {
    for (const MaskCandidate& c : options.candidates) names.push_back(c.name);
  }
  return names;
}

// Without candidates: the registry's default method, through the one setup
// every front door uses (method_attention_options).
std::vector<MaskCandidate> VideoAttention::Impl::make_candidates() const {
  if (!options.candidates.empty()) {
    check_candidates(options.candidates, geometry.tokens());
    return options.candidates;
  }
  if (options.clusters || options.pooled) return {};
  const detail::MethodEntry& entry = detail::default_method_entry();
  MethodOptions method{options.density, options.sink, options.text_full, std::nullopt};
  if (entry.info.takes_band && !options.error) method.band = band;
  std::optional<ErrorTarget> target;
  if (options.error) {
    target = ErrorTarget{*options.error, std::nullopt};
    if (!options.densities.empty()) target->densities = options.densities;
  }
  return method_attention_options(entry.info.name, geometry, method, target).candidates;
}

const MaskCandidate& VideoAttention::Impl::find(const HeadMask& choice) const {
  std::string names = "dense";
  for (const MaskCandidate& c : candidates) {
    if (c.name == choice.name()) return c;
    names += ", " + c.name;
  }
  if (options.clusters) names += ", " + detail::kClusterChoice.name();
  if (options.pooled) names += ", " + detail::kPooledChoice.name();
  fail("no candidate named '" + choice.name() + "' (expected one of " + names + ")");
}

AttentionOptions VideoAttention::Impl::attention_options(bool check_finite) const {
  AttentionOptions o;
  o.scale = options.scale;
  o.threads = threads;
  o.check_finite = check_finite;
  o.precision = options.precision;
  return o;
}

void VideoAttention::Impl::check_args(const TensorView& q, const TensorView& k,
                                      const TensorView& v) const {
  const std::int64_t n = geometry.tokens();
  if (q.heads < 1) fail("q.heads must be >= 1, got " + str(q.heads));
  check_tokens("q", q, n, q.heads);
  check_tokens("k", k, n, q.heads);
  check_tokens("v", v, n, q.heads);
}

std::optional<detail::KeyPadding> VideoAttention::Impl::key_padding(
    std::optional<std::int64_t> key_limit) const {
  const std::int64_t n = geometry.tokens();
  if (!key_limit || *key_limit == n) return std::nullopt;
  if (geometry.text_at != TextPlacement::kAfter) {
    fail("key_limit: only text after the video can be padding, and this geometry has text " +
         std::string(to_string(geometry.text_at)) + "; key_limit must be " + str(n) +
         " (no padding), got " + str(*key_limit));
  }
  const std::int64_t first = geometry.video_range().end;
  if (*key_limit < first || *key_limit > n) {
    fail("key_limit must be in [" + str(first) + ", " + str(n) +
         "] (the video's tokens and at most every text token), got " + str(*key_limit));
  }
  return detail::KeyPadding{*key_limit, Mask::key_range(0, *key_limit)};
}

std::vector<RouteDecision> VideoAttention::Impl::route(
    const TensorView& q, const TensorView& k, const TensorView& v, std::int64_t layer,
    std::int64_t step, const std::optional<detail::KeyPadding>& keys) {
  const std::vector<std::int64_t> rows =
      detail::sample_video_rows(geometry, options.router.samples, options.router.seed, layer, step);
  std::vector<Mask> masks = candidate_masks;
  if (keys) {
    for (Mask& mask : masks) mask = mask & keys->mask;
  }
  std::vector<double> power;
  // An error target's ladder: each family's nested rungs scored incrementally.
  detail::LadderScoring ladder{context.get(), {}};
  if (options.error) ladder.chains = detail::ladder_chains(candidates);
  // With compensation, what each candidate's plan skips joins its sampled rows.
  std::optional<detail::CompensationTerms> terms;
  if (options.compensate) terms = compensation_terms(q, k, v, rows, keys);
  std::vector<std::vector<double>> mse = router.score(
      *backend, q, k, v, keys ? keys->mask : Mask::dense(), masks, rows, options.blocks.block_kv,
      attention_options(false), nullptr, &power, &ladder, terms ? &*terms : nullptr);
  std::vector<RouteDecision> decisions;
  const RoutePolicy policy{options.density_budget, options.error};
  routed_pooled.assign(mse.size(), std::nullopt);
  for (std::size_t h = 0; h < mse.size(); ++h) {
    decisions.push_back(options.pooled
                            ? decide_with_pooled(q, k, v, static_cast<std::int64_t>(h), rows, keys,
                                                 std::move(mse[h]), power[h], policy)
                            : detail::decide(candidates, std::move(mse[h]), power[h], policy));
  }
  return decisions;
}

VideoAttention::VideoAttention(const VideoGeometry& geometry, VideoAttentionOptions options,
                               std::shared_ptr<ThreadingContext> context)
    : impl_(std::make_unique<Impl>(geometry, std::move(options), std::move(context))) {}

VideoAttention::~VideoAttention() = default;

const VideoGeometry& VideoAttention::geometry() const { return impl_->geometry; }
const VideoAttentionOptions& VideoAttention::options() const { return impl_->options; }
std::int64_t VideoAttention::band() const { return impl_->band; }
const std::vector<MaskCandidate>& VideoAttention::candidates() const { return impl_->candidates; }
const std::string& VideoAttention::candidate_family(std::size_t index) const {
  return impl_->candidate_families.at(index);
}
const std::shared_ptr<ThreadingContext>& VideoAttention::context() const { return impl_->context; }

Mask VideoAttention::mask(const HeadMask& choice) const {
  if (choice == HeadMask::kDense) return Mask::dense();
  return impl_->find(choice).mask;
}

Mask VideoAttention::head_mask(std::int64_t head) const {
  const auto& masks = impl_->head_masks;
  if (head < 0 || head >= static_cast<std::int64_t>(masks.size()) ||
      !masks[static_cast<std::size_t>(head)]) {
    detail::front_door_fail("head_mask: head " + std::to_string(head) +
                            " ran no cluster mask in the last forward()");
  }
  return *masks[static_cast<std::size_t>(head)];
}

void VideoAttention::reset_clusters() { impl_->warm.clear(); }

std::vector<std::int64_t> VideoAttention::sampled_rows(std::int64_t layer,
                                                       std::int64_t step) const {
  if (layer < 0 || step < 0) {
    detail::front_door_fail("sampled_rows: layer and step must be >= 0, got layer " +
                            std::to_string(layer) + ", step " + std::to_string(step));
  }
  return detail::sample_video_rows(impl_->geometry, impl_->options.router.samples,
                                   impl_->options.router.seed, layer, step);
}

std::vector<RouteDecision> VideoAttention::route(const TensorView& q, const TensorView& k,
                                                 const TensorView& v, std::int64_t layer,
                                                 std::int64_t step,
                                                 std::optional<std::int64_t> key_limit) {
  impl_->check_args(q, k, v);
  const std::optional<detail::KeyPadding> keys = impl_->key_padding(key_limit);
  if (impl_->candidates.empty()) {
    detail::front_door_fail(
        "route: heads running their own masks (options.clusters, options.pooled) are not routed");
  }
  return impl_->route(q, k, v, layer, step, keys);
}

LayerReport VideoAttention::forward(const AttentionArgs& args, std::int64_t layer,
                                    std::int64_t step, std::optional<std::int64_t> key_limit) {
  const auto start = Clock::now();
  Impl& s = *impl_;
  s.check_args(args.q, args.k, args.v);
  check_tokens("out", args.out, s.geometry.tokens(), args.q.heads);
  const std::optional<detail::KeyPadding> keys = s.key_padding(key_limit);
  const std::int64_t heads = args.q.heads;

  s.head_masks.assign(static_cast<std::size_t>(heads), std::nullopt);
  LayerReport report;
  report.band = s.band;
  report.warmup = s.options.warmup.is_dense(layer, step);
  std::vector<RouteDecision> decisions;
  // One candidate needs no routing: every head runs it. Pooled selections
  // beside candidates (a mix) are one more.
  const std::size_t choices = s.candidates.size() + (s.options.pooled ? 1 : 0);
  const bool routed = !report.warmup && !s.options.force && !s.candidates.empty() && choices > 1;
  s.routed_pooled.clear();
  s.sampled.clear();
  // Pooled heads choose p (an error target) or their row order (kAuto) on
  // sampled rows.
  if (s.options.pooled && (s.options.error || s.options.pooled->order == PooledOrder::kAuto)) {
    s.sampled = detail::sample_video_rows(s.geometry, s.options.router.samples,
                                          s.options.router.seed, layer, step);
  }
  if (routed) {
    const auto route_start = Clock::now();
    decisions = s.route(args.q, args.k, args.v, layer, step, keys);
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
    } else if (s.options.clusters) {
      choice = detail::kClusterChoice;
    } else if (s.options.pooled) {
      choice = detail::kPooledChoice;
    } else {
      choice = HeadMask(s.candidates.front().name);
    }
    HeadReport head = s.run_head(args, h, choice, layer, keys, &report.plan_seconds);
    report.cluster_seconds += head.cluster_seconds;
    if (head.choice == detail::kClusterChoice || head.choice == detail::kPooledChoice) {
      report.plan_seconds += head.plan_seconds;
    }
    head.routed = routed;
    head.mse_spatial = routed ? decisions[static_cast<std::size_t>(h)].mse_spatial : kNaN;
    head.mse_temporal = routed ? decisions[static_cast<std::size_t>(h)].mse_temporal : kNaN;
    if (routed) {
      const RouteDecision& decision = decisions[static_cast<std::size_t>(h)];
      head.mse = decision.mse;
      head.error = decision.error[decision.index];
      head.target_met = decision.target_met;
    } else if (!(head.choice == detail::kPooledChoice && s.options.error)) {
      head.error = kNaN;  // a pooled head with an error target has its rung's error
    }
    report.permute_seconds += head.permute_seconds;
    report.attention_seconds += head.seconds;
    report.heads.push_back(std::move(head));
  }
  report.total_seconds = since(start);
  return report;
}

}  // namespace tilesplash
