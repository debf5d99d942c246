// tilesplash._core.VideoAttention: the library's LayoutVideoAttention
// (routing_layout.h) on the caller's arrays, for any registered method
// (methods.h, method_attention_options): the front doors per head dim and
// dtype, their tiles and the report are the library's; this file turns
// Python arguments into options and the report into a dict. A mutex
// serialises calls (a front door serves one call at a time); it is taken
// after the GIL is released, so a waiting thread never blocks the interpreter.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "threading_context.h"
#include "tilesplash/clusters.h"
#include "tilesplash/pooled.h"
#include "tilesplash/routing_layout.h"

namespace tilesplash::python {
namespace {

// options.force from `text`, checked against the library's force_names()
// and reported in the argument's own name.
std::optional<HeadMask> to_force(const std::optional<std::string>& text,
                                 const VideoAttentionOptions& options) {
  if (!text) return std::nullopt;
  const std::vector<std::string> names = force_names(options);
  std::string expected;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == *text) return HeadMask(*text);
    expected += (i == 0 ? "'" : i + 1 == names.size() ? " or '" : ", '") + names[i] + "'";
  }
  throw std::invalid_argument("force: expected " + expected + ", got '" + *text + "'");
}

// The report dict of one call: the library's head_fields() per (batch
// entry, head), and the layer's sums over the batch entries.
nb::dict report(const LayoutVideoAttention::Result& result,
                const std::vector<MaskCandidate>& candidates, double seconds) {
  nb::list heads;
  double routing = 0, plan = 0, cluster = 0, permute = 0, attention = 0, total = 0;
  bool warmup = false;
  for (std::size_t b = 0; b < result.reports.size(); ++b) {
    const LayerReport& layer = result.reports[b];
    for (const HeadReport& h : layer.heads) {
      nb::dict head;
      head["batch"] = static_cast<std::int64_t>(b);
      head.update(to_dict(head_fields(h, candidates)));
      heads.append(head);
    }
    warmup = warmup || layer.warmup;
    routing += layer.routing_seconds;
    plan += layer.plan_seconds;
    cluster += layer.cluster_seconds;
    permute += layer.permute_seconds;
    attention += layer.attention_seconds;
    total += layer.total_seconds;
  }
  nb::dict out;
  out["heads"] = heads;
  out["warmup"] = warmup;
  out["block_q"] = result.blocks.block_q;
  out["block_kv"] = result.blocks.block_kv;
  out["blocks_tuned"] = result.blocks_tuned;
  out["routing_seconds"] = routing;
  out["plan_seconds"] = plan;
  out["cluster_seconds"] = cluster;
  out["permute_seconds"] = permute;
  out["attention_seconds"] = attention;
  out["total_seconds"] = total;
  out["seconds"] = seconds;
  return out;
}

// A row order's sources as a NumPy int64 copy; None for the identity.
nb::object order_array(const RowOrder& order) {
  if (order.is_identity()) return nb::none();
  const std::span<const std::int64_t> sources = order.sources();
  auto* copy = new std::int64_t[sources.size()];
  std::copy(sources.begin(), sources.end(), copy);
  nb::capsule owner(copy, [](void* p) noexcept { delete[] static_cast<std::int64_t*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, std::int64_t, nb::ndim<1>>(copy, {sources.size()}, owner));
}

// How a candidate executes (candidates.h's MaskRun), for a backend that runs
// it itself: the run order, the mask over run-order indices, the separate key
// segment (the sink) merged through the LSEs, and K/V's own order (svg2).
nb::dict run_dict(const MaskCandidate& candidate) {
  const MaskRun& run = candidate.run;
  nb::dict result;
  result["name"] = candidate.name;
  result["density"] = candidate.density;
  result["mask"] = candidate.mask;
  result["order"] = order_array(run.order);
  result["order_name"] = std::string(run.order.name());
  result["run_mask"] = run.mask;
  result["kv_order"] = run.kv_order ? order_array(*run.kv_order) : nb::none();
  if (run.extra) {
    nb::dict extra;
    extra["mask"] = run.extra->mask;
    extra["first"] = run.extra->first;
    extra["count"] = run.extra->count;
    extra["stride"] = run.extra->stride;
    result["extra"] = extra;
  } else {
    result["extra"] = nb::none();
  }
  return result;
}

nb::dict kmeans_dict(const KMeansOptions& first, const KMeansOptions& warm) {
  nb::dict result;
  result["clusters"] = first.clusters;
  result["first_iterations"] = first.max_iterations;
  result["warm_iterations"] = warm.max_iterations;
  result["tolerance"] = first.tolerance;
  result["seed"] = first.seed;
  return result;
}

// svg2's options as the core resolved them for this geometry and density, with
// the k-means run of each side: what a backend clustering on its device runs.
nb::object cluster_options_dict(const VideoGeometry& geometry, const VideoAttentionOptions& o) {
  if (!o.clusters) return nb::none();
  const ClusterOptions& c = *o.clusters;
  nb::dict result;
  result["density"] = c.density ? nb::cast(*c.density) : nb::none();
  result["top_p"] = c.top_p;
  result["min_kc_ratio"] = c.min_kc_ratio;
  result["block_q"] = c.blocks.block_q;
  result["block_kv"] = c.blocks.block_kv;
  for (const bool keys : {false, true}) {
    result[keys ? "key" : "query"] = kmeans_dict(cluster_kmeans_options(geometry, c, keys, false),
                                                 cluster_kmeans_options(geometry, c, keys, true));
  }
  return result;
}

// The pooled options heads rank their own key tiles with (pooled, or a mix
// with it among its families); None when none does.
nb::object pooled_options_dict(const VideoAttentionOptions& o) {
  if (!o.pooled) return nb::none();
  const PooledOptions& pooled = *o.pooled;
  nb::dict result;
  result["p"] = pooled.p;
  result["floor"] = pooled.floor;
  result["gate"] = pooled.gate;
  result["order"] = pooled_order_name(pooled.order);
  result["density"] = pooled.density ? nb::cast(*pooled.density) : nb::none();
  return result;
}

// The library's LayoutVideoAttention, its calls serialised by a mutex taken
// after the GIL is released (a waiting thread never blocks the interpreter).
class PyVideoAttention {
 public:
  PyVideoAttention(const VideoGeometry& geometry, VideoAttentionOptions options, std::string method,
                   std::optional<std::int64_t> block_q, std::optional<std::int64_t> block_kv,
                   std::shared_ptr<ThreadingContext> context)
      : method_(std::move(method)),
        attention_(geometry, std::move(options), block_q, block_kv, std::move(context)) {}

  const VideoGeometry& geometry() const { return attention_.geometry(); }
  const std::string& method() const { return method_; }
  const VideoAttentionOptions& options() const { return attention_.options(); }
  Mask mask(const std::string& choice) const { return attention_.mask(HeadMask(choice)); }
  std::int64_t band() const { return attention_.band(); }
  // (name, density) of every candidate the router chooses from; empty for svg2.
  std::vector<std::pair<std::string, double>> candidates() const {
    std::vector<std::pair<std::string, double>> result;
    for (const MaskCandidate& c : attention_.candidates()) result.emplace_back(c.name, c.density);
    return result;
  }

  // name -> (family, rung) of every candidate: what a head that ran it reports.
  std::vector<std::tuple<std::string, std::string, double>> candidate_families() const {
    std::vector<std::tuple<std::string, std::string, double>> result;
    const std::vector<MaskCandidate>& all = attention_.candidates();
    for (std::size_t i = 0; i < all.size(); ++i) {
      result.emplace_back(all[i].name, attention_.candidate_family(i), all[i].rung);
    }
    return result;
  }

  // How a candidate executes; throws naming the candidates for another name.
  nb::dict candidate_run(const std::string& name) const {
    for (const MaskCandidate& c : attention_.candidates()) {
      if (c.name == name) return run_dict(c);
    }
    std::string names;
    for (const MaskCandidate& c : attention_.candidates()) {
      names += (names.empty() ? "'" : ", '") + c.name + "'";
    }
    throw std::invalid_argument(
        "candidate_run: no candidate '" + name + "' (expected one of " +
        (names.empty() ? std::string("none: svg2 has no candidates") : names) + ")");
  }

  nb::ndarray<nb::numpy, std::int64_t, nb::ndim<1>> sampled_rows(std::int64_t layer,
                                                                 std::int64_t step) const {
    auto* rows = new std::vector<std::int64_t>(attention_.sampled_rows(layer, step));
    nb::capsule owner(rows,
                      [](void* p) noexcept { delete static_cast<std::vector<std::int64_t>*>(p); });
    return {rows->data(), {rows->size()}, owner};
  }

  Mask head_mask(std::int64_t head) {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return attention_.head_mask(head);
  }

  void reset_clusters() {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    attention_.reset_clusters();
  }

  nb::dict forward(const TensorDesc& q, const TensorDesc& k, const TensorDesc& v,
                   const TensorDesc& out, std::uintptr_t lse, const std::string& layout,
                   std::int64_t layer, std::int64_t step,
                   const std::optional<std::vector<std::int64_t>>& key_lengths) {
    const LayoutArgs args = layout_args(q, k, v, out, lse, layout);
    LayoutVideoAttention::Result result;
    const auto start = std::chrono::steady_clock::now();
    {
      nb::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      result = attention_.forward(args, layer, step, {},
                                  key_lengths ? std::span<const std::int64_t>(*key_lengths)
                                              : std::span<const std::int64_t>());
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    nb::dict dict = report(result, attention_.candidates(), seconds);
    dict["band"] = band();
    dict["method"] = method_;
    dict["granularity"] = std::string(to_string(attention_.options().granularity));
    return dict;
  }

 private:
  std::string method_;
  LayoutVideoAttention attention_;
  std::mutex mutex_;
};

}  // namespace

void bind_video_attention(nb::module_& m) {
  using namespace nb::literals;
  nb::class_<PyVideoAttention>(m, "VideoAttention")
      .def(
          "__init__",
          [](PyVideoAttention* self, const VideoGeometry& geometry, const std::string& method,
             double density, std::optional<std::int64_t> band, bool sink, bool text_full,
             std::optional<double> density_budget, std::int64_t dense_layers,
             std::int64_t dense_steps, std::int64_t samples, std::uint64_t seed,
             std::optional<std::string> force, int threads, std::optional<std::int64_t> block_q,
             std::optional<std::int64_t> block_kv, std::optional<float> scale,
             PyThreadingContext* context, const std::string& precision, std::optional<double> error,
             std::optional<std::vector<double>> densities, const std::string& granularity,
             bool compensate, std::optional<double> p, std::optional<std::int64_t> floor,
             std::optional<double> gate, std::optional<std::vector<std::string>> families,
             std::optional<std::string> order) {
            if (densities && !error) {
              throw std::invalid_argument(
                  "densities: a density ladder applies with error= only (give error too)");
            }
            std::optional<ErrorTarget> target;
            if (error) target = ErrorTarget{*error, densities};
            VideoAttentionOptions options = method_attention_options(
                method, geometry,
                {density, sink, text_full, band, p, floor, gate,
                 order ? std::optional(parse_pooled_order(*order)) : std::nullopt,
                 families.value_or(std::vector<std::string>{})},
                target);
            options.density_budget = density_budget;
            options.warmup = {dense_layers, dense_steps};
            options.router = {samples, seed};
            options.force = to_force(force, options);
            options.threads = threads;
            options.scale = scale;
            options.precision = to_precision(precision);
            options.granularity = parse_granularity(granularity);
            options.compensate = compensate;
            new (self) PyVideoAttention(geometry, std::move(options), method, block_q, block_kv,
                                        context != nullptr ? context->context() : nullptr);
          },
          "geometry"_a, "method"_a, "density"_a, "band"_a.none(), "sink"_a, "text_full"_a,
          "density_budget"_a.none(), "dense_layers"_a, "dense_steps"_a, "samples"_a, "seed"_a,
          "force"_a.none(), "threads"_a, "block_q"_a.none(), "block_kv"_a.none(), "scale"_a.none(),
          "context"_a.none(), "precision"_a = "default", "error"_a.none() = nb::none(),
          "densities"_a.none() = nb::none(), "granularity"_a = "token", "compensate"_a = false,
          "p"_a.none() = nb::none(), "floor"_a.none() = nb::none(), "gate"_a.none() = nb::none(),
          "families"_a.none() = nb::none(), "order"_a.none() = nb::none())
      .def_prop_ro("geometry", &PyVideoAttention::geometry)
      .def_prop_ro("band", &PyVideoAttention::band)
      .def_prop_ro("method", &PyVideoAttention::method)
      .def_prop_ro("candidates", &PyVideoAttention::candidates)
      .def_prop_ro("error", [](const PyVideoAttention& a) { return a.options().error; })
      .def_prop_ro(
          "cluster_options",
          [](const PyVideoAttention& a) { return cluster_options_dict(a.geometry(), a.options()); })
      .def_prop_ro("pooled_options",
                   [](const PyVideoAttention& a) { return pooled_options_dict(a.options()); })
      .def("mask", &PyVideoAttention::mask, "choice"_a)
      .def("head_mask", &PyVideoAttention::head_mask, "head"_a)
      .def("candidate_run", &PyVideoAttention::candidate_run, "name"_a)
      .def("candidate_families", &PyVideoAttention::candidate_families)
      .def("sampled_rows", &PyVideoAttention::sampled_rows, "layer"_a, "step"_a)
      .def("reset_clusters", &PyVideoAttention::reset_clusters)
      .def("forward", &PyVideoAttention::forward, "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "layout"_a,
           "layer"_a, "step"_a, "key_lengths"_a.none());
}

}  // namespace tilesplash::python
