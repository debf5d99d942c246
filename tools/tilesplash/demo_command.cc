// `tilesplash demo`: the one-minute tour. On the seeded synthetic workload of
// a model shape (tilesplash/workload.h) it routes every head through the video
// front door, runs the sparse attention and dense attention on the same data,
// and shows per head what the router chose, how sparse it ran, how fast, and
// how close to dense (cosine similarity), then the totals and where the time
// went. `tilesplash` with no arguments points here.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "error_target_options.h"
#include "options.h"
#include "progress.h"
#include "report.h"
#include "tile_png.h"
#include "tilesplash/attention.h"
#include "tilesplash/evaluation.h"
#include "tilesplash/methods.h"
#include "tilesplash/output_set.h"
#include "tilesplash/plan.h"
#include "tilesplash/routing.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"
#include "tilesplash/video_plan.h"
#include "tilesplash/workload.h"

namespace tilesplash::cli {
namespace {

struct DemoOptions {
  ShapeOptions shape{"", "", "wan2.1-1.3b-480p"};
  std::string method = "svg";
  std::int64_t heads = 4;
  double density = 0.25;
  std::int64_t threads = 0;
  std::uint64_t seed = 0;
  std::string png_dir;
  bool json = false;
  bool quiet = false;
  ErrorTargetOptions error_target;  // --error, --densities, --bands
};

void print_text(const nlohmann::ordered_json& record, std::ostream& out) {
  out << fmt::format(
      "tilesplash demo: {} ({}), method {}\n",
      record["preset"].is_null() ? "custom geometry" : record["preset"].get<std::string>(),
      record["model"].is_null() ? "-" : record["model"].get<std::string>(),
      record["method"].get<std::string>());
  out << fmt::format("geometry  {}  ({} tokens, {} per frame), head_dim {}, {}, {} threads, {}\n",
                     record["geometry"].get<std::string>(), record["tokens"].get<std::int64_t>(),
                     record["tokens_per_frame"].get<std::int64_t>(),
                     record["head_dim"].get<std::int64_t>(), record["dtype"].get<std::string>(),
                     record["threads"].get<std::int64_t>(), record["isa"].get<std::string>());
  if (record["method"] == "svg") {
    out << fmt::format("band      W = {} tokens ({:.2f} frames), ",
                       record["band"].get<std::int64_t>(), record["band_frames"].get<double>());
  }
  out << fmt::format("target density {}\n\n", record["target_density"].get<double>());
  out << fmt::format("{:>4}  {:<16}  {:<12}  {:>7}  {:>9}  {:>9}  {:>8}  {:>8}\n", "head",
                     "planted", "choice", "density", "sparse_ms", "dense_ms", "speedup", "cosine");
  for (const auto& h : record["heads_table"]) {
    out << fmt::format("{:>4}  {:<16}  {:<12}  {:>7.4f}  {:>9.1f}  {:>9.1f}  {:>7.2f}x  {:>8.5f}\n",
                       h["head"].get<std::int64_t>(), h["planted"].get<std::string>(),
                       h["choice"].get<std::string>(), h["density"].get<double>(),
                       h["seconds"].get<double>() * 1e3, h["dense_ms"].get<double>(),
                       h["speedup"].get<double>(), h["cosine_vs_dense"].get<double>());
  }
  out << fmt::format(
      "\ntotal     sparse {:.1f} ms, dense {:.1f} ms: {:.2f}x faster ({:.2f}x with routing), "
      "mean cosine {:.5f}\n",
      record["sparse_ms"].get<double>(), record["dense_ms"].get<double>(),
      record["speedup"].get<double>(), record["speedup_with_routing"].get<double>(),
      record["mean_cosine"].get<double>());
  out << "\nwhere the time went (ms):\n";
  for (const auto& [key, value] : record["time_ms"].items()) {
    out << fmt::format("  {:<18} {:>9.1f}\n", key, value.get<double>());
  }
  if (record.contains("png")) {
    out << "\npictures:\n";
    for (const auto& path : record["png"]) out << "  " << path.get<std::string>() << '\n';
  }
}

void run_demo(const DemoOptions& options) {
  const VideoShape shape = options.shape.resolve();
  const VideoGeometry& geometry = shape.geometry;
  const std::int64_t n = geometry.tokens(), d = shape.head_dim(), heads = options.heads;
  // One threading context for the whole command: workload, runners, peak.
  const auto context = std::make_shared<ThreadingContext>(static_cast<int>(options.threads));
  const int threads = context->threads();
  // The picture of the plan the method's first candidate runs on (for svg
  // the band plan every head shares).
  const std::string png_name =
      (options.method == "svg" ? std::string("band") : options.method) + "-plan.png";
  const std::string png_path = options.png_dir.empty()
                                   ? std::string()
                                   : (std::filesystem::path(options.png_dir) / png_name).string();
  OutputSet outputs;  // checks the destination before any work
  if (!png_path.empty()) {
    std::error_code error;
    std::filesystem::create_directories(options.png_dir, error);
    if (error) {
      throw std::invalid_argument(
          fmt::format("--png: cannot create directory '{}' ({}); expected a writable directory",
                      options.png_dir, error.message()));
    }
    outputs.add_output(png_path, "--png");
  }

  Progress progress("demo", 2 * heads + 1, progress_wanted(options.quiet));
  progress.set_detail("generating the workload");
  WorkloadOptions workload_options =
      error_target_workload(options.error_target, heads, options.seed, {});
  workload_options.heads = heads;
  workload_options.head_dim = d;
  workload_options.dtype = DType::kBF16;
  workload_options.seed = options.seed;
  workload_options.threads = threads;
  const VideoWorkload workload(geometry, workload_options, context.get());
  progress.advance();

  VideoAttentionOptions attention_options =
      method_attention_options(options.method, geometry, {options.density});
  apply_error_target(options.error_target, options.method, geometry, {options.density},
                     attention_options);
  attention_options.threads = threads;
  attention_options.router.seed = options.seed;
  if (attention_options.clusters) attention_options.clusters->seed = options.seed;
  DenseComparisonOptions compare;
  compare.context = context;
  compare.head_by_head = true;  // a progress step per head
  compare.on_head = [&](std::int64_t head, bool dense) {
    progress.advance();
    if (dense && head + 1 == heads) return;
    const bool next_dense = dense || head + 1 == heads;
    progress.set_detail(fmt::format("head {} {}", head + 1 == heads ? 0 : head + 1,
                                    next_dense ? "dense" : "routed + sparse"));
  };
  progress.set_detail("head 0 routed + sparse");
  const DenseComparison comparison = compare_with_dense(geometry, attention_options, workload.q(),
                                                        workload.k(), workload.v(), compare);
  const LayerReport& sparse_layer = comparison.sparse;
  const LayerReport& dense_layer = *comparison.dense;
  const double routing = sparse_layer.routing_seconds;
  const double permute = sparse_layer.permute_seconds;
  const double sparse = sparse_layer.attention_seconds;
  const double dense = dense_layer.attention_seconds;
  const double plan_build = sparse_layer.plan_seconds + dense_layer.plan_seconds;

  nlohmann::ordered_json record;
  record["preset"] = shape.preset ? nlohmann::ordered_json(std::string(shape.preset->name))
                                  : nlohmann::ordered_json(nullptr);
  record["model"] = shape.preset ? nlohmann::ordered_json(std::string(shape.preset->model))
                                 : nlohmann::ordered_json(nullptr);
  record["method"] = options.method;
  record["geometry"] = geometry.to_string();
  record["tokens"] = n;
  record["tokens_per_frame"] = geometry.tokens_per_frame();
  record["num_heads"] = heads;
  record["head_dim"] = d;
  record["dtype"] = "bf16";
  record["threads"] = threads;
  record["isa"] = active_isa();
  record["target_density"] = options.density;
  record["band"] = sparse_layer.band;
  record["band_frames"] =
      static_cast<double>(sparse_layer.band) / static_cast<double>(geometry.tokens_per_frame());
  auto rows = nlohmann::ordered_json::array();
  double cosine_sum = 0.0;
  for (const HeadReport& head : sparse_layer.heads) {
    const std::size_t h = static_cast<std::size_t>(head.head);
    const double cos = comparison.cosine[h];
    const double dense_seconds = dense_layer.heads[h].seconds;
    cosine_sum += cos;
    nlohmann::ordered_json row;
    row["planted"] = std::string(to_string(workload.planted()[h]));
    row.update(to_json(head_fields(head, comparison.candidates)));
    row["dense_ms"] = dense_seconds * 1e3;
    row["speedup"] = head.seconds > 0.0 ? dense_seconds / head.seconds : 0.0;
    row["cosine_vs_dense"] = cos;
    rows.push_back(std::move(row));
  }
  record["heads_table"] = std::move(rows);
  record["sparse_ms"] = sparse * 1e3;
  record["dense_ms"] = dense * 1e3;
  record["speedup"] = sparse > 0.0 ? dense / sparse : 0.0;
  record["speedup_with_routing"] = sparse + routing > 0.0 ? dense / (sparse + routing) : 0.0;
  record["mean_cosine"] = cosine_sum / static_cast<double>(heads);
  nlohmann::ordered_json time;
  time["routing"] = routing * 1e3;
  time["permutation"] = permute * 1e3;
  time["sparse_attention"] = (sparse - permute) * 1e3;
  time["dense_attention"] = dense * 1e3;
  time["plan_build"] = plan_build * 1e3;
  record["time_ms"] = std::move(time);
  report_error_target(options.error_target, sparse_layer, record);

  if (!options.png_dir.empty()) {
    progress.set_detail("pictures");
    // svg: the band plan every routed head executes, spatial heads in
    // frame-major order, temporal heads after the token-major permutation.
    // Another method: its first candidate's plan, in its run order (svg2's
    // masks come from each head's data: the band plan stands in).
    const Mask planned = comparison.candidates.empty() || options.method == "svg"
                             ? video_band_mask(geometry, sparse_layer.band, {})
                             : comparison.candidates.front().run.mask;
    const TilePlan plan = TilePlan::build(planned, n, n, attention_options.blocks);
    write_png(png_path, render_tile_map(plan, {1024, geometry}));
    record["png"] = nlohmann::ordered_json::array({png_path});
  }
  progress.finish();

  if (options.json) {
    print_json(record, std::cout);
  } else if (!options.quiet) {
    print_text(record, std::cout);
  }
}

}  // namespace

Command add_demo_command(CLI::App& parent) {
  auto options = std::make_shared<DemoOptions>();
  CLI::App* app = parent.add_subcommand(
      "demo", "Route, run sparse and dense attention on a model shape and compare (start here)");
  app->footer(
      "The workload is synthetic and seeded: each head is planted spatial, temporal or\n"
      "ambiguous (tilesplash/workload.h), in bf16 with the preset's head dim (128 for a\n"
      "custom geometry). Every head is routed among --method's masks, run sparse and\n"
      "dense; the cosine compares the two outputs. The default takes about a minute on\n"
      "2 cores.\n\n" +
      presets_text() + "\n" + methods_text() +
      "\nExamples:\n"
      "  tilesplash demo\n"
      "  tilesplash demo --preset wan2.1-14b-720p --heads 2 --density 0.2 --png pictures\n"
      "  tilesplash demo --geometry frames=4,height=8,width=8 --heads 2 --method radial --json");
  add_shape_options(*app, options->shape);
  add_method_option(*app, options->method);
  app->add_option("--heads", options->heads, "Heads to generate and run")
      ->type_name("H")
      ->capture_default_str()
      ->transform(integer_in(1, 4096));
  add_density_option(*app, options->density, "Target density of the masks");
  add_threads_option(*app, options->threads);
  add_seed_option(*app, options->seed, "Seed of the workload, the router and k-means");
  app->add_option("--png", options->png_dir,
                  "Write a picture of the method's tile plan (svg: the band plan) into DIR")
      ->type_name("DIR")
      ->check(non_empty("a directory"));
  app->add_flag("--json", options->json, "Print one JSON object (with a heads_table array)");
  app->add_flag("--quiet", options->quiet, "No progress bar and no table");
  add_error_target_options(*app, options->error_target, false);
  return {app, [options] { run_demo(*options); }};
}

}  // namespace tilesplash::cli
