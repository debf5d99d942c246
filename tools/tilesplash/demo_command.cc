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
#include "method_flags.h"
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
#include "video_setup.h"

namespace tilesplash::cli {
namespace {

struct DemoOptions {
  ShapeOptions shape{"", "", "wan2.1-1.3b-480p"};
  std::string method = std::string(default_method());
  std::int64_t heads = 4;
  double density = 0.25;
  std::int64_t threads = 0;
  std::uint64_t seed = 0;
  std::string png_dir;
  bool json = false;
  bool quiet = false;
  bool compensate = false;
  MethodFlags method_flags;         // --p, --floor, --gate, --order, --families
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
  if (method_info(record["method"].get<std::string>()).takes_band) {
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

// ---- resolve -----------------------------------------------------------------

struct DemoSetup : VideoSetup {
  explicit DemoSetup(VideoSetup video) : VideoSetup(std::move(video)) {}
  VideoAttentionOptions attention;
  bool band_plan = false;  // the picture shows the band plan (a method that takes a band)
  std::string png_path;    // empty: no picture
};

// The picture of the plan the method's first candidate runs on (for a method
// that takes a band, the band plan every head shares); its directory exists
// and its path is checked before any work.
std::string png_path(const DemoOptions& options, bool band_plan, OutputSet& outputs) {
  if (options.png_dir.empty()) return {};
  const std::string name = (band_plan ? std::string("band") : options.method) + "-plan.png";
  const std::string path = (std::filesystem::path(options.png_dir) / name).string();
  std::error_code error;
  std::filesystem::create_directories(options.png_dir, error);
  if (error) {
    throw std::invalid_argument(
        fmt::format("--png: cannot create directory '{}' ({}); expected a writable directory",
                    options.png_dir, error.message()));
  }
  outputs.add_output(path, "--png");
  return path;
}

DemoSetup resolve(const DemoOptions& options, OutputSet& outputs) {
  DemoSetup setup(resolve_video(options.shape, 0, "bf16", options.threads));
  setup.band_plan = method_info(options.method).takes_band;
  setup.png_path = png_path(options, setup.band_plan, outputs);
  return setup;
}

// ---- run -----------------------------------------------------------------------

void configure_attention(const DemoOptions& options, DemoSetup& setup) {
  MethodOptions method_options{options.density};
  options.method_flags.apply(method_options);
  setup.attention = method_attention_options(options.method, setup.shape.geometry, method_options,
                                             error_target(options.error_target));
  setup.attention.threads = setup.threads;
  setup.attention.compensate = options.compensate;
  setup.attention.router.seed = options.seed;
  if (setup.attention.clusters) setup.attention.clusters->seed = options.seed;
}

// Routes and runs every head sparse, then dense, a progress step per head.
DenseComparison run(const DemoOptions& options, const DemoSetup& setup,
                    const VideoWorkload& workload, Progress& progress) {
  const std::int64_t heads = options.heads;
  DenseComparisonOptions compare;
  compare.context = setup.context;
  compare.head_by_head = true;
  compare.on_head = [&](std::int64_t head, bool dense) {
    progress.advance();
    if (dense && head + 1 == heads) return;
    const bool next_dense = dense || head + 1 == heads;
    progress.set_detail(fmt::format("head {} {}", head + 1 == heads ? 0 : head + 1,
                                    next_dense ? "dense" : "routed + sparse"));
  };
  progress.set_detail("head 0 routed + sparse");
  return compare_with_dense(setup.shape.geometry, setup.attention, workload.q(), workload.k(),
                            workload.v(), compare);
}

// The band plan every routed head executes (spatial heads in frame-major
// order, temporal heads after the token-major permutation), else the first
// candidate's plan in its run order (svg2's masks come from each head's data:
// the band plan stands in).
void write_picture(const DemoSetup& setup, const DenseComparison& comparison) {
  const VideoGeometry& geometry = setup.shape.geometry;
  const Mask planned = comparison.candidates.empty() || setup.band_plan
                           ? video_band_mask(geometry, comparison.sparse.band, {})
                           : comparison.candidates.front().run.mask;
  const std::int64_t n = geometry.tokens();
  const TilePlan plan = TilePlan::build(planned, n, n, setup.attention.blocks);
  write_png(setup.png_path, render_tile_map(plan, {1024, geometry}));
}

// ---- report ----------------------------------------------------------------------

void report_setup(const DemoOptions& options, const DemoSetup& setup, const LayerReport& sparse,
                  nlohmann::ordered_json& record) {
  const VideoGeometry& geometry = setup.shape.geometry;
  const VideoPreset* preset = setup.shape.preset;
  record["preset"] = preset_name(setup.shape);
  record["model"] =
      preset ? nlohmann::ordered_json(std::string(preset->model)) : nlohmann::ordered_json(nullptr);
  record["method"] = options.method;
  record["geometry"] = geometry.to_string();
  record["tokens"] = geometry.tokens();
  record["tokens_per_frame"] = geometry.tokens_per_frame();
  record["num_heads"] = options.heads;
  record["head_dim"] = setup.head_dim;
  record["dtype"] = "bf16";
  record["threads"] = setup.threads;
  record["isa"] = active_isa();
  record["target_density"] = options.density;
  record["compensate"] = options.compensate;
  record["band"] = sparse.band;
  record["band_frames"] =
      static_cast<double>(sparse.band) / static_cast<double>(geometry.tokens_per_frame());
}

double report_heads(const VideoWorkload& workload, const DenseComparison& comparison,
                    nlohmann::ordered_json& record) {
  auto rows = nlohmann::ordered_json::array();
  double cosine_sum = 0.0;
  for (const HeadReport& head : comparison.sparse.heads) {
    const std::size_t h = static_cast<std::size_t>(head.head);
    const double cos = comparison.cosine[h];
    const double dense_seconds = comparison.dense->heads[h].seconds;
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
  return cosine_sum;
}

void report_totals(const DemoOptions& options, const DenseComparison& comparison, double cosine_sum,
                   nlohmann::ordered_json& record) {
  const LayerReport& sparse_layer = comparison.sparse;
  const LayerReport& dense_layer = *comparison.dense;
  const double routing = sparse_layer.routing_seconds;
  const double permute = sparse_layer.permute_seconds;
  const double sparse = sparse_layer.attention_seconds;
  const double dense = dense_layer.attention_seconds;
  record["sparse_ms"] = sparse * 1e3;
  record["dense_ms"] = dense * 1e3;
  record["speedup"] = sparse > 0.0 ? dense / sparse : 0.0;
  record["speedup_with_routing"] = sparse + routing > 0.0 ? dense / (sparse + routing) : 0.0;
  record["mean_cosine"] = cosine_sum / static_cast<double>(options.heads);
  nlohmann::ordered_json time;
  time["routing"] = routing * 1e3;
  time["permutation"] = permute * 1e3;
  time["sparse_attention"] = (sparse - permute) * 1e3;
  time["dense_attention"] = dense * 1e3;
  time["plan_build"] = (sparse_layer.plan_seconds + dense_layer.plan_seconds) * 1e3;
  record["time_ms"] = std::move(time);
}

Report demo_report(const DemoOptions& options, const DemoSetup& setup,
                   const VideoWorkload& workload, const DenseComparison& comparison) {
  Report report;
  report_setup(options, setup, comparison.sparse, report.record);
  const double cosine_sum = report_heads(workload, comparison, report.record);
  report_totals(options, comparison, cosine_sum, report.record);
  report_error_target(options.error_target, comparison.sparse, report.record);
  if (!setup.png_path.empty()) {
    report.record["png"] = nlohmann::ordered_json::array({setup.png_path});
  }
  report.sections = {print_text};
  return report;
}

void run_demo(const DemoOptions& options) {
  OutputSet outputs;  // checks the destination before any work
  DemoSetup setup = resolve(options, outputs);
  Progress progress("demo", 2 * options.heads + 1, progress_wanted(options.quiet));
  progress.set_detail("generating the workload");
  WorkloadOptions plain;
  plain.heads = options.heads;
  plain.seed = options.seed;
  const std::unique_ptr<VideoWorkload> workload = make_workload(
      setup, error_target_workload(options.error_target, options.heads, options.seed, plain));
  progress.advance();
  configure_attention(options, setup);
  const DenseComparison comparison = run(options, setup, *workload, progress);
  if (!setup.png_path.empty()) {
    progress.set_detail("pictures");
    write_picture(setup, comparison);
  }
  progress.finish();
  const Format format = options.json    ? Format::kJson
                        : options.quiet ? Format::kNone
                                        : Format::kTable;
  emit(demo_report(options, setup, *workload, comparison), format, std::cout);
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
  add_method_flags(*app, options->method_flags);
  add_heads_option(*app, options->heads);
  add_density_option(*app, options->density, "Target density of the masks");
  add_compensate_option(*app, options->compensate);
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
