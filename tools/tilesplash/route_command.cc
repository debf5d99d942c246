// `tilesplash route`: runs the video front door (routing, then each head's
// mask on the shared band plan) on the synthetic workload of a preset or
// custom geometry and reports, per head, the planted type, the router's
// choice and MSEs, the density and the sparse time; then the totals, with
// routing and permutation as shares of the sparse attention time and, with
// --compare-dense, the speed-up over dense attention on the same data.
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
#include "options.h"
#include "report.h"
#include "tilesplash/attention.h"
#include "tilesplash/evaluation.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/routing.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"
#include "tilesplash/workload.h"

namespace tilesplash::cli {
namespace {

struct RouteOptions {
  std::string preset;
  std::string geometry;
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
};

nlohmann::ordered_json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

void print_heads_text(const nlohmann::ordered_json& heads, bool dense, std::ostream& out) {
  out << fmt::format("{:>4}  {:<9}  {:<8}  {:>11}  {:>12}  {:>7}  {:>9}", "head", "planted",
                     "choice", "mse_spatial", "mse_temporal", "density", "sparse_ms");
  out << (dense ? fmt::format("  {:>9}  {:>8}\n", "dense_ms", "cosine") : "\n");
  const auto mse = [](const nlohmann::ordered_json& v) {
    return v.is_null() ? std::string("-") : fmt::format("{:.3e}", v.get<double>());
  };
  for (const auto& head : heads) {
    out << fmt::format("{:>4}  {:<9}  {:<8}  {:>11}  {:>12}  {:>7.4f}  {:>9.1f}",
                       head["head"].get<std::int64_t>(), head["planted"].get<std::string>(),
                       head["choice"].get<std::string>(), mse(head["mse_spatial"]),
                       mse(head["mse_temporal"]), head["density"].get<double>(),
                       head["sparse_ms"].get<double>());
    if (dense) {
      out << fmt::format("  {:>9.1f}  {:>8.5f}", head["dense_ms"].get<double>(),
                         head["cosine_vs_dense"].get<double>());
    }
    out << '\n';
  }
}

void run_route(const RouteOptions& options) {
  if (options.preset.empty() == options.geometry.empty()) {
    throw std::invalid_argument("route: give exactly one of --preset NAME or --geometry GEOM");
  }
  const VideoPreset* preset = options.preset.empty() ? nullptr : &video_preset(options.preset);
  const VideoGeometry geometry = preset ? preset->geometry : parse_video_geometry(options.geometry);
  const std::int64_t head_dim =
      options.head_dim > 0 ? options.head_dim : (preset ? preset->head_dim : 128);
  const DType dtype = *parse_dtype(options.dtype);
  // One threading context for the whole command: workload, runners, peak.
  const auto context = std::make_shared<ThreadingContext>(static_cast<int>(options.threads));
  const int threads = context->threads();

  VideoAttentionOptions attention_options;
  attention_options.density = options.density;
  if (options.band >= 0) {
    attention_options.band = options.band;
  } else if (options.band_frames >= 0.0) {
    attention_options.band = band_for_frames(geometry, options.band_frames);
  }
  attention_options.sink = options.sink;
  attention_options.text_full = !options.no_text_full;
  attention_options.warmup = {options.dense_layers, options.dense_steps};
  attention_options.router = {options.samples, options.seed};
  attention_options.blocks = {options.block_q, options.block_kv};
  attention_options.threads = threads;

  WorkloadOptions workload_options;
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
  record["preset"] = preset ? nlohmann::ordered_json(std::string(preset->name)) : nullptr;
  record["geometry"] = geometry.to_string();
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
  std::int64_t planted = 0, found = 0;
  for (const HeadReport& head : report.heads) {
    const PlantedHead kind = workload.planted()[static_cast<std::size_t>(head.head)];
    if (kind != PlantedHead::kAmbiguous && head.routed) {
      ++planted;
      found += (kind == PlantedHead::kSpatial) == (head.choice == HeadMask::kSpatial);
    }
    nlohmann::ordered_json row;
    row["head"] = head.head;
    row["planted"] = std::string(to_string(kind));
    row["choice"] = std::string(to_string(head.choice));
    row["mse_spatial"] = number_or_null(head.mse_spatial);
    row["mse_temporal"] = number_or_null(head.mse_temporal);
    row["density"] = head.density;
    row["sparse_ms"] = head.seconds * 1e3;
    row["permute_ms"] = head.permute_seconds * 1e3;
    if (dense) {
      row["dense_ms"] = dense->heads[static_cast<std::size_t>(head.head)].seconds * 1e3;
      row["cosine_vs_dense"] = comparison.cosine[static_cast<std::size_t>(head.head)];
    }
    head_rows.push_back(std::move(row));
  }
  const double sparse = report.attention_seconds;
  // Work actually done: 4 * head_dim flops per kept pair (DESIGN §8).
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
  std::string presets;
  for (const VideoPreset& preset : video_presets()) {
    presets += fmt::format("  {:<18} {} ({} tokens, {} heads x {})\n", preset.name, preset.model,
                           preset.geometry.tokens(), preset.heads, preset.head_dim);
  }
  app->footer(
      "Each head is planted spatial, temporal or ambiguous by the seeded generator\n"
      "(tilesplash/workload.h); the router samples --samples video queries per call and\n"
      "picks the mask whose output is closer to dense. Times are medians of --repeats\n"
      "runs after one warm-up run; routing_share and permute_share are fractions of the\n"
      "sparse attention time.\n\nPresets:\n" +
      presets +
      "\nExamples:\n"
      "  tilesplash route --preset wan2.1-1.3b-480p --heads 4\n"
      "  tilesplash route --preset wan2.1-14b-720p --heads 2 --density 0.25 --compare-dense\n"
      "  tilesplash route --geometry frames=8,height=8,width=8 --head-dim 64 --json");

  app->add_option("--preset", options->preset, "Model shape (see Presets below)")
      ->type_name("NAME");
  app->add_option("--geometry", options->geometry,
                  "Custom shape: frames=F,height=h,width=w[,text=T,text_at=before|after]")
      ->type_name("GEOM")
      ->check(non_empty("frames=F,height=h,width=w"));
  app->add_option("--heads", options->heads, "Heads to generate and run")
      ->type_name("H")
      ->capture_default_str()
      ->transform(integer_in(1, 4096));
  app->add_option("--head-dim", options->head_dim,
                  "Head dimension, a multiple of 8 up to 256 (default: the preset's, else 128)")
      ->type_name("D")
      ->transform(head_dim_value());
  app->add_option("--dtype", options->dtype, "Q/K/V dtype: f32, bf16 or f16")
      ->type_name("DTYPE")
      ->capture_default_str()
      ->check(dtype_name());
  app->add_option("--density", options->density,
                  "Target density of each mask (band, text and sink included), in (0, 1]")
      ->type_name("S")
      ->capture_default_str()
      ->transform(number_in(0.0, 1.0, true));
  CLI::Option* band =
      app->add_option("--band", options->band, "Band half-width W in tokens (overrides --density)")
          ->type_name("W")
          ->transform(integer_in(0, kMaxLength));
  app->add_option("--band-frames", options->band_frames,
                  "Band half-width in frames, W = M * P (overrides --density)")
      ->type_name("M")
      ->transform(number_in(0.0, 1e6))
      ->excludes(band);
  app->add_flag("--sink", options->sink, "OR the first-frame sink into both masks");
  app->add_flag("--no-text-full", options->no_text_full,
                "Do not give text rows and columns full attention");
  app->add_option("--samples", options->samples, "Query rows the router samples per call")
      ->type_name("R")
      ->capture_default_str()
      ->transform(integer_in(1, 1 << 20));
  app->add_option("--seed", options->seed, "Seed of the workload and of the router's samples")
      ->type_name("N")
      ->capture_default_str()
      ->transform(integer_in(0, std::numeric_limits<std::int64_t>::max()));
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
  app->add_option("--block-q", options->block_q,
                  "Query rows per tile: " + kernel_limits::block_q_rule())
      ->type_name("BQ")
      ->capture_default_str()
      ->transform(block_q_value());
  app->add_option("--block-kv", options->block_kv,
                  "Keys per tile: " + kernel_limits::block_kv_rule())
      ->type_name("BK")
      ->capture_default_str()
      ->transform(block_kv_value());
  app->add_option("--threads", options->threads, "Worker threads (default: all hardware threads)")
      ->type_name("T")
      ->transform(integer_in(1, 4096));
  app->add_option("--repeats", options->repeats, "Timed runs after the warm-up; medians reported")
      ->type_name("R")
      ->capture_default_str()
      ->transform(integer_in(1, 1000));
  app->add_flag("--compare-dense", options->compare_dense,
                "Also run every head dense on the same data: times, speed-up, cosine");
  app->add_flag("--json", options->json, "Print one JSON object (with a heads array)");

  return {app, [options] { run_route(*options); }};
}

}  // namespace tilesplash::cli
