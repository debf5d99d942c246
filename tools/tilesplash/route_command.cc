// `tilesplash route`: runs the video front door (routing, then each head's
// mask in its run order) under any registered method on the synthetic
// workload of a preset or custom geometry and reports, per head, the planted
// type and the library's head report (choice, MSEs, density, times); then
// the totals, with routing and permutation as shares of the sparse attention
// time and, with --compare-dense, the speed-up over dense attention on the
// same data.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "error_target_options.h"
#include "method_flags.h"
#include "options.h"
#include "report.h"
#include "tilesplash/attention.h"
#include "tilesplash/evaluation.h"
#include "tilesplash/methods.h"
#include "tilesplash/output_set.h"
#include "tilesplash/routing.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"
#include "tilesplash/workload.h"
#include "video_setup.h"

namespace tilesplash::cli {
namespace {

struct RouteOptions {
  ShapeOptions shape;
  std::string method = std::string(default_method());
  std::int64_t heads = 2;
  std::int64_t head_dim = 0;  // 0: the preset's (128 for a custom geometry)
  std::string dtype = "bf16";
  double density = 0.25;
  std::int64_t band = -1;     // -1: from --band-frames or --density
  double band_frames = -1.0;  // < 0: unset
  bool sink = false;
  bool no_text_full = false;
  std::int64_t samples = 0;
  std::uint64_t seed = 0;
  std::int64_t layer = 0;
  std::int64_t step = 0;
  std::int64_t dense_layers = 0;
  std::int64_t dense_steps = 0;
  std::int64_t block_q = 128;
  std::int64_t block_kv = 128;
  std::int64_t threads = 0;
  std::int64_t repeats = 1;
  bool compare_dense = false;
  bool json = false;
  std::string granularity = "token";
  bool compensate = false;
  MethodFlags method_flags;         // --p, --floor, --gate, --order, --families
  ErrorTargetOptions error_target;  // --error, --densities, --bands, --png
};

// The sampled MSE of the mask the head chose, when it was routed.
std::string chosen_mse(const nlohmann::ordered_json& head) {
  const auto& mse = head["mse"];
  const std::string choice = head["choice"].get<std::string>();
  if (!mse.contains(choice) || mse[choice].is_null()) return "-";
  return fmt::format("{:.3e}", mse[choice].get<double>());
}

void print_heads_text(const nlohmann::ordered_json& record, std::ostream& out) {
  const bool dense = record.contains("dense_ms");
  out << fmt::format("{:>4}  {:<16}  {:<12}  {:>10}  {:>7}  {:>9}", "head", "planted", "choice",
                     "mse", "density", "sparse_ms");
  out << (dense ? fmt::format("  {:>9}  {:>8}\n", "dense_ms", "cosine") : "\n");
  for (const auto& head : record["heads"]) {
    out << fmt::format("{:>4}  {:<16}  {:<12}  {:>10}  {:>7.4f}  {:>9.1f}",
                       head["head"].get<std::int64_t>(), head["planted"].get<std::string>(),
                       head["choice"].get<std::string>(), chosen_mse(head),
                       head["density"].get<double>(), head["seconds"].get<double>() * 1e3);
    if (dense) {
      out << fmt::format("  {:>9.1f}  {:>8.5f}", head["dense_ms"].get<double>(),
                         head["cosine_vs_dense"].get<double>());
    }
    out << '\n';
  }
}

// ---- resolve -----------------------------------------------------------------

struct RouteSetup : VideoSetup {
  explicit RouteSetup(VideoSetup video) : VideoSetup(std::move(video)) {}
  VideoAttentionOptions attention;
  std::vector<std::string> masks;  // the names `force` takes: what planted heads can be found as
};

VideoAttentionOptions attention_options(const RouteOptions& options, const VideoGeometry& geometry,
                                        int threads) {
  MethodOptions method_options{options.density, options.sink, !options.no_text_full};
  options.method_flags.apply(method_options);
  // As the library (VideoAttention(error=, band=)): a ladder gives every
  // candidate its own band, so a band given too would be reported and not run.
  if (!options.error_target.error.empty() && (options.band >= 0 || options.band_frames >= 0.0)) {
    throw std::invalid_argument(
        std::string(options.band >= 0 ? "--band" : "--band-frames") +
        ": with --error the ladder's densities choose the bands; expected no band");
  }
  if (options.band >= 0) {
    method_options.band = options.band;
  } else if (options.band_frames >= 0.0) {
    method_options.band = band_for_frames(geometry, options.band_frames);
  }
  VideoAttentionOptions attention = method_attention_options(
      options.method, geometry, method_options, error_target(options.error_target));
  attention.warmup = {options.dense_layers, options.dense_steps};
  attention.router = {options.samples, options.seed};
  attention.blocks = {options.block_q, options.block_kv};
  attention.threads = threads;
  attention.granularity = parse_granularity(options.granularity);
  attention.compensate = options.compensate;
  if (attention.clusters) attention.clusters->seed = options.seed;
  return attention;
}

RouteSetup resolve(const RouteOptions& options) {
  RouteSetup setup(resolve_video(options.shape, options.head_dim, options.dtype, options.threads));
  setup.attention = attention_options(options, setup.shape.geometry, setup.threads);
  setup.masks = force_names(setup.attention);
  return setup;
}

// ---- run -----------------------------------------------------------------------

DenseComparison run(const RouteOptions& options, const RouteSetup& setup,
                    const VideoWorkload& workload) {
  DenseComparisonOptions compare;
  compare.context = setup.context;
  compare.layer = options.layer;
  compare.step = options.step;
  compare.compare_dense = options.compare_dense;
  compare.repeats = static_cast<int>(options.repeats);  // after one warm-up run
  return compare_with_dense(setup.shape.geometry, setup.attention, workload.q(), workload.k(),
                            workload.v(), compare);
}

// ---- report ----------------------------------------------------------------------

void report_setup(const RouteOptions& options, const RouteSetup& setup, const LayerReport& layer,
                  nlohmann::ordered_json& record) {
  const VideoGeometry& geometry = setup.shape.geometry;
  record["preset"] = preset_name(setup.shape);
  record["geometry"] = geometry.to_string();
  record["method"] = options.method;
  record["tokens"] = geometry.tokens();
  record["num_heads"] = options.heads;
  record["head_dim"] = setup.head_dim;
  record["dtype"] = std::string(to_string(setup.dtype));
  record["band"] = layer.band;
  record["band_frames"] =
      static_cast<double>(layer.band) / static_cast<double>(geometry.tokens_per_frame());
  record["sink"] = options.sink;
  record["samples"] = samples_in_use(options.samples, geometry);
  record["seed"] = options.seed;
  record["threads"] = setup.threads;
  record["isa"] = active_isa();
  record["block_q"] = options.block_q;
  record["block_kv"] = options.block_kv;
  record["granularity"] = options.granularity;
  record["compensate"] = options.compensate;
  record["warmup_dense"] = layer.warmup;
}

// One row a head; planted_accuracy: of the planted heads whose type is one of
// the method's masks (spatial and temporal for svg), the share the router found.
nlohmann::ordered_json head_rows(const RouteSetup& setup, const VideoWorkload& workload,
                                 const DenseComparison& comparison,
                                 nlohmann::ordered_json& record) {
  auto rows = nlohmann::ordered_json::array();
  std::int64_t planted = 0, found = 0;
  for (const HeadReport& head : comparison.sparse.heads) {
    const std::size_t h = static_cast<std::size_t>(head.head);
    const std::string kind(to_string(workload.planted()[h]));
    if (head.routed &&
        std::find(setup.masks.begin(), setup.masks.end(), kind) != setup.masks.end()) {
      ++planted;
      found += head.choice.name() == kind ? 1 : 0;
    }
    nlohmann::ordered_json row;
    row["planted"] = kind;
    row.update(to_json(head_fields(head, comparison.candidates)));
    if (comparison.dense) {
      row["dense_ms"] = comparison.dense->heads[h].seconds * 1e3;
      row["cosine_vs_dense"] = comparison.cosine[h];
      row["rel_l2_vs_dense"] = comparison.relative_l2[h];
    }
    rows.push_back(std::move(row));
  }
  record["planted_accuracy"] =
      planted > 0 ? number_or_null(static_cast<double>(found) / static_cast<double>(planted))
                  : nlohmann::ordered_json(nullptr);
  // The candidates the heads' "mse" names, with their ladder rungs (0 off a ladder).
  auto candidates = nlohmann::ordered_json::array();
  for (const MaskCandidate& c : comparison.candidates) {
    candidates.push_back({{"name", c.name}, {"rung", c.rung}, {"density", c.density}});
  }
  record["candidates"] = std::move(candidates);
  return rows;
}

void report_totals(const RouteOptions& options, const RouteSetup& setup,
                   const DenseComparison& comparison, nlohmann::ordered_json& record) {
  const LayerReport& report = comparison.sparse;
  const double sparse = report.attention_seconds;
  // Work actually done: 4 * head_dim flops per kept pair (Q K^T and P V,
  // a multiply and an add each).
  const double n = static_cast<double>(setup.shape.geometry.tokens());
  const double pairs = n * n;
  double sparse_flops = 0.0;
  for (const HeadReport& head : report.heads) {
    sparse_flops += 4.0 * setup.head_dim * head.density * pairs;
  }
  record["routing_ms"] = report.routing_seconds * 1e3;
  record["permute_ms"] = report.permute_seconds * 1e3;
  record["sparse_ms"] = sparse * 1e3;
  record["layer_ms"] = report.total_seconds * 1e3;
  record["routing_share"] = report.routing_seconds / sparse;
  record["permute_share"] = report.permute_seconds / sparse;
  record["sparse_gflops"] = sparse_flops / sparse * 1e-9;
  if (const std::optional<LayerReport>& dense = comparison.dense) {
    const double heads = static_cast<double>(options.heads);
    record["dense_ms"] = dense->attention_seconds * 1e3;
    record["dense_gflops"] = 4.0 * setup.head_dim * pairs * heads / dense->attention_seconds * 1e-9;
    record["speedup"] = dense->attention_seconds / sparse;
    record["speedup_end_to_end"] = dense->total_seconds / report.total_seconds;
  }
}

Report route_report(const RouteOptions& options, const RouteSetup& setup,
                    const VideoWorkload& workload, const DenseComparison& comparison) {
  Report report;
  nlohmann::ordered_json& record = report.record;
  report_setup(options, setup, comparison.sparse, record);
  nlohmann::ordered_json rows = head_rows(setup, workload, comparison, record);
  report_totals(options, setup, comparison, record);
  record["repeats"] = options.repeats;
  report_error_target(options.error_target, comparison.sparse, record);
  record["heads"] = std::move(rows);
  report.sections = {print_heads_text, blank_line, scalar_table};
  return report;
}

void run_route(const RouteOptions& options) {
  OutputSet outputs;  // the picture's destination is checked before any work
  if (!options.error_target.png.empty()) outputs.add_output(options.error_target.png, "--png");
  const RouteSetup setup = resolve(options);
  WorkloadOptions plain;
  plain.heads = options.heads;
  plain.seed = options.seed;
  const std::unique_ptr<VideoWorkload> workload = make_workload(
      setup, error_target_workload(options.error_target, options.heads, options.seed, plain));
  const DenseComparison comparison = run(options, setup, *workload);
  emit(route_report(options, setup, *workload, comparison), table_or_json(options.json), std::cout);
}

}  // namespace

Command add_route_command(CLI::App& parent) {
  auto options = std::make_shared<RouteOptions>();
  CLI::App* app = parent.add_subcommand(
      "route", "Route and run video attention heads on the synthetic workload of a model shape");
  app->footer(
      "Each head is planted spatial, temporal or ambiguous by the seeded generator\n"
      "(tilesplash/workload.h); the router samples --samples video queries per call and\n"
      "picks the candidate of --method whose output is closest to dense. Times are medians\n"
      "of --repeats runs after one warm-up run; routing_share and permute_share are\n"
      "fractions of the sparse attention time.\n\n" +
      presets_text() + "\n" + methods_text() +
      "\nExamples:\n"
      "  tilesplash route --preset wan2.1-1.3b-480p --heads 4\n"
      "  tilesplash route --preset wan2.1-14b-720p --heads 2 --density 0.25 --compare-dense\n"
      "  tilesplash route --geometry frames=8,height=8,width=8 --head-dim 64 --method mix --json");

  add_shape_options(*app, options->shape);
  add_method_option(*app, options->method);
  add_method_flags(*app, options->method_flags);
  add_heads_option(*app, options->heads);
  add_head_dim_option(*app, options->head_dim, "Head dimension (default: the preset's, else 128)");
  add_dtype_option(*app, options->dtype, "Q/K/V dtype")->capture_default_str();
  add_density_option(*app, options->density,
                     "Target density of each mask (band, text and sink included)");
  CLI::Option* band =
      app->add_option("--band", options->band,
                      "svg: band half-width W in tokens (overrides --density; not with --error)")
          ->type_name("W")
          ->transform(integer_in(0, kMaxLength));
  app->add_option("--band-frames", options->band_frames,
                  "svg: band half-width in frames, W = M * P (overrides --density; not with\n"
                  "--error)")
      ->type_name("M")
      ->transform(number_in(0.0, 1e6))
      ->excludes(band);
  app->add_flag("--sink", options->sink, "OR the first-frame sink into the masks (not sta, svg2)");
  app->add_flag("--no-text-full", options->no_text_full,
                "Do not give text rows and columns full attention");
  add_samples_option(*app, options->samples);
  add_seed_option(*app, options->seed, "Seed of the workload, the router's samples and k-means");
  app->add_option("--layer", options->layer, "Layer index given to the warm-up policy")
      ->type_name("L")
      ->capture_default_str()
      ->transform(integer_in(0, 1 << 20));
  app->add_option("--step", options->step, "Denoising step given to the warm-up policy")
      ->type_name("S")
      ->capture_default_str()
      ->transform(integer_in(0, 1 << 20));
  app->add_option("--dense-layers", options->dense_layers, "Warm-up: layers below this run dense")
      ->type_name("N")
      ->transform(integer_in(0, 1 << 20));
  app->add_option("--dense-steps", options->dense_steps, "Warm-up: steps below this run dense")
      ->type_name("N")
      ->transform(integer_in(0, 1 << 20));
  add_tile_options(*app, options->block_q, options->block_kv);
  app->add_option("--granularity", options->granularity,
                  "token: exact masks; tile: every mask rounded out to whole tiles (no partial "
                  "tile; docs/masks.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"token", "tile"}));
  add_compensate_option(*app, options->compensate);
  add_threads_option(*app, options->threads);
  add_repeats_option(*app, options->repeats, "Timed runs after the warm-up; medians reported");
  app->add_flag("--compare-dense", options->compare_dense,
                "Also run every head dense on the same data: times, speed-up, cosine, "
                "relative L2 error");
  app->add_flag("--json", options->json, "Print one JSON object (with a heads array)");
  add_error_target_options(*app, options->error_target);

  return {app, [options] { run_route(*options); }};
}

}  // namespace tilesplash::cli
