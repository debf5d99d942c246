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
#include "options.h"
#include "report.h"
#include "tilesplash/attention.h"
#include "tilesplash/evaluation.h"
#include "tilesplash/methods.h"
#include "tilesplash/routing.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"
#include "tilesplash/workload.h"

namespace tilesplash::cli {
namespace {

struct RouteOptions {
  ShapeOptions shape;
  std::string method = "svg";
  std::int64_t heads = 2;
  std::int64_t head_dim = 0;  // 0: the preset's (128 for a custom geometry)
  std::string dtype = "bf16";
  double density = 0.25;
  std::int64_t band = -1;     // -1: from --band-frames or --density
  double band_frames = -1.0;  // < 0: unset
  bool sink = false;
  bool no_text_full = false;
  std::int64_t samples = 64;
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
  ErrorTargetOptions error_target;
};

// The sampled MSE of the mask the head chose, when it was routed.
std::string chosen_mse(const nlohmann::ordered_json& head) {
  const auto& mse = head["mse"];
  const std::string choice = head["choice"].get<std::string>();
  if (!mse.contains(choice) || mse[choice].is_null()) return "-";
  return fmt::format("{:.3e}", mse[choice].get<double>());
}

void print_heads_text(const nlohmann::ordered_json& heads, bool dense, std::ostream& out) {
  out << fmt::format("{:>4}  {:<16}  {:<12}  {:>10}  {:>7}  {:>9}", "head", "planted", "choice",
                     "mse", "density", "sparse_ms");
  out << (dense ? fmt::format("  {:>9}  {:>8}\n", "dense_ms", "cosine") : "\n");
  for (const auto& head : heads) {
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

void run_route(const RouteOptions& options) {
  const VideoShape shape = options.shape.resolve();
  const VideoGeometry& geometry = shape.geometry;
  const std::int64_t head_dim = options.head_dim > 0 ? options.head_dim : shape.head_dim();
  const DType dtype = *parse_dtype(options.dtype);
  // One threading context for the whole command: workload, runners, peak.
  const auto context = std::make_shared<ThreadingContext>(static_cast<int>(options.threads));
  const int threads = context->threads();

  MethodOptions method_options{options.density, options.sink, !options.no_text_full};
  if (options.band >= 0) {
    method_options.band = options.band;
  } else if (options.band_frames >= 0.0) {
    method_options.band = band_for_frames(geometry, options.band_frames);
  }
  VideoAttentionOptions attention_options =
      method_attention_options(options.method, geometry, method_options);
  attention_options.warmup = {options.dense_layers, options.dense_steps};
  attention_options.router = {options.samples, options.seed};
  attention_options.blocks = {options.block_q, options.block_kv};
  attention_options.threads = threads;
  if (attention_options.clusters) attention_options.clusters->seed = options.seed;
  apply_error_target(options.error_target, options.method, geometry, method_options,
                     attention_options);
  const std::vector<std::string> masks = force_names(attention_options);

  WorkloadOptions workload_options =
      error_target_workload(options.error_target, options.heads, options.seed, {});
  workload_options.heads = options.heads;
  workload_options.head_dim = head_dim;
  workload_options.dtype = dtype;
  workload_options.seed = options.seed;
  workload_options.threads = threads;
  const VideoWorkload workload(geometry, workload_options, context.get());

  const std::int64_t n = geometry.tokens(), heads = options.heads;
  DenseComparisonOptions compare;
  compare.context = context;
  compare.layer = options.layer;
  compare.step = options.step;
  compare.compare_dense = options.compare_dense;
  compare.repeats = static_cast<int>(options.repeats);  // after one warm-up run
  const DenseComparison comparison = compare_with_dense(geometry, attention_options, workload.q(),
                                                        workload.k(), workload.v(), compare);
  const LayerReport& report = comparison.sparse;
  const std::optional<LayerReport>& dense = comparison.dense;

  nlohmann::ordered_json record;
  record["preset"] = shape.preset ? nlohmann::ordered_json(std::string(shape.preset->name))
                                  : nlohmann::ordered_json(nullptr);
  record["geometry"] = geometry.to_string();
  record["method"] = options.method;
  record["tokens"] = n;
  record["num_heads"] = heads;
  record["head_dim"] = head_dim;
  record["dtype"] = std::string(to_string(dtype));
  record["band"] = report.band;
  record["band_frames"] =
      static_cast<double>(report.band) / static_cast<double>(geometry.tokens_per_frame());
  record["sink"] = options.sink;
  record["samples"] = options.samples;
  record["seed"] = options.seed;
  record["threads"] = threads;
  record["isa"] = active_isa();
  record["block_q"] = options.block_q;
  record["block_kv"] = options.block_kv;
  record["warmup_dense"] = report.warmup;

  auto head_rows = nlohmann::ordered_json::array();
  // Planted heads whose type is one of the method's masks (spatial and
  // temporal for svg): did the router find it?
  std::int64_t planted = 0, found = 0;
  for (const HeadReport& head : report.heads) {
    const PlantedHead kind = workload.planted()[static_cast<std::size_t>(head.head)];
    const std::string kind_name(to_string(kind));
    if (head.routed && std::find(masks.begin(), masks.end(), kind_name) != masks.end()) {
      ++planted;
      found += head.choice.name() == kind_name ? 1 : 0;
    }
    nlohmann::ordered_json row;
    row["planted"] = kind_name;
    row.update(to_json(head_fields(head, comparison.candidates)));
    if (dense) {
      row["dense_ms"] = dense->heads[static_cast<std::size_t>(head.head)].seconds * 1e3;
      row["cosine_vs_dense"] = comparison.cosine[static_cast<std::size_t>(head.head)];
    }
    head_rows.push_back(std::move(row));
  }
  const double sparse = report.attention_seconds;
  // Work actually done: 4 * head_dim flops per kept pair (Q K^T and P V,
  // a multiply and an add each).
  double sparse_flops = 0.0;
  const double pairs = static_cast<double>(n) * static_cast<double>(n);
  for (const HeadReport& head : report.heads) sparse_flops += 4.0 * head_dim * head.density * pairs;
  record["planted_accuracy"] =
      planted > 0
          ? nlohmann::ordered_json(static_cast<double>(found) / static_cast<double>(planted))
          : nlohmann::ordered_json(nullptr);
  record["routing_ms"] = report.routing_seconds * 1e3;
  record["permute_ms"] = report.permute_seconds * 1e3;
  record["sparse_ms"] = sparse * 1e3;
  record["layer_ms"] = report.total_seconds * 1e3;
  record["routing_share"] = report.routing_seconds / sparse;
  record["permute_share"] = report.permute_seconds / sparse;
  record["sparse_gflops"] = sparse_flops / sparse * 1e-9;
  if (dense) {
    record["dense_ms"] = dense->attention_seconds * 1e3;
    record["dense_gflops"] =
        4.0 * head_dim * pairs * static_cast<double>(heads) / dense->attention_seconds * 1e-9;
    record["speedup"] = dense->attention_seconds / sparse;
    record["speedup_end_to_end"] = dense->total_seconds / report.total_seconds;
  }
  record["repeats"] = options.repeats;
  report_error_target(options.error_target, report, record);

  if (options.json) {
    record["heads"] = std::move(head_rows);
    print_json(record, std::cout);
    return;
  }
  print_heads_text(head_rows, dense.has_value(), std::cout);
  std::cout << '\n';
  print_table(record, std::cout);
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
  app->add_option("--heads", options->heads, "Heads to generate and run")
      ->type_name("H")
      ->capture_default_str()
      ->transform(integer_in(1, 4096));
  add_head_dim_option(*app, options->head_dim, "Head dimension (default: the preset's, else 128)");
  add_dtype_option(*app, options->dtype, "Q/K/V dtype")->capture_default_str();
  add_density_option(*app, options->density,
                     "Target density of each mask (band, text and sink included)");
  CLI::Option* band = app->add_option("--band", options->band,
                                      "svg: band half-width W in tokens (overrides --density)")
                          ->type_name("W")
                          ->transform(integer_in(0, kMaxLength));
  app->add_option("--band-frames", options->band_frames,
                  "svg: band half-width in frames, W = M * P (overrides --density)")
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
  add_threads_option(*app, options->threads);
  add_repeats_option(*app, options->repeats, "Timed runs after the warm-up; medians reported");
  app->add_flag("--compare-dense", options->compare_dense,
                "Also run every head dense on the same data: times, speed-up, cosine");
  app->add_flag("--json", options->json, "Print one JSON object (with a heads array)");
  add_error_target_options(*app, options->error_target);

  return {app, [options] { run_route(*options); }};
}

}  // namespace tilesplash::cli
