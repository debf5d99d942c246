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
#include "options.h"
#include "progress.h"
#include "report.h"
#include "tile_png.h"
#include "tilesplash/attention.h"
#include "tilesplash/evaluation.h"
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
  std::string preset = "wan2.1-1.3b-480p";
  std::string geometry;  // overrides the preset's shape (small runs, tests)
  std::int64_t heads = 4;
  double density = 0.25;
  std::int64_t threads = 0;
  std::uint64_t seed = 0;
  std::string png_dir;
  bool json = false;
  bool quiet = false;
};

void print_text(const nlohmann::ordered_json& record, std::ostream& out) {
  out << fmt::format("tilesplash demo: {} ({})\n", record["preset"].get<std::string>(),
                     record["model"].get<std::string>());
  out << fmt::format("geometry  {}  ({} tokens, {} per frame), head_dim {}, {}, {} threads, {}\n",
                     record["geometry"].get<std::string>(), record["tokens"].get<std::int64_t>(),
                     record["tokens_per_frame"].get<std::int64_t>(),
                     record["head_dim"].get<std::int64_t>(), record["dtype"].get<std::string>(),
                     record["threads"].get<std::int64_t>(), record["isa"].get<std::string>());
  out << fmt::format("band      W = {} tokens ({:.2f} frames), target density {}\n\n",
                     record["band"].get<std::int64_t>(), record["band_frames"].get<double>(),
                     record["target_density"].get<double>());
  out << fmt::format("{:>4}  {:<9}  {:<8}  {:>7}  {:>9}  {:>9}  {:>8}  {:>8}\n", "head", "planted",
                     "choice", "density", "sparse_ms", "dense_ms", "speedup", "cosine");
  for (const auto& h : record["heads_table"]) {
    out << fmt::format("{:>4}  {:<9}  {:<8}  {:>7.4f}  {:>9.1f}  {:>9.1f}  {:>7.2f}x  {:>8.5f}\n",
                       h["head"].get<std::int64_t>(), h["planted"].get<std::string>(),
                       h["choice"].get<std::string>(), h["density"].get<double>(),
                       h["sparse_ms"].get<double>(), h["dense_ms"].get<double>(),
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
  const VideoPreset& preset = video_preset(options.preset);
  const VideoGeometry geometry =
      options.geometry.empty() ? preset.geometry : parse_video_geometry(options.geometry);
  geometry.validate();
  const std::int64_t n = geometry.tokens(), d = preset.head_dim, heads = options.heads;
  // One threading context for the whole command: workload, runners, peak.
  const auto context = std::make_shared<ThreadingContext>(static_cast<int>(options.threads));
  const int threads = context->threads();
  const std::string png_path =
      options.png_dir.empty() ? std::string()
                              : (std::filesystem::path(options.png_dir) / "band-plan.png").string();
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
  WorkloadOptions workload_options;
  workload_options.heads = heads;
  workload_options.head_dim = d;
  workload_options.dtype = DType::kBF16;
  workload_options.seed = options.seed;
  workload_options.threads = threads;
  const VideoWorkload workload(geometry, workload_options, context.get());
  progress.advance();

  VideoAttentionOptions attention_options;
  attention_options.density = options.density;
  attention_options.threads = threads;
  attention_options.router.seed = options.seed;
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
  record["preset"] = std::string(preset.name);
  record["model"] = std::string(preset.model);
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
    row["head"] = head.head;
    row["planted"] = std::string(to_string(workload.planted()[h]));
    row["choice"] = std::string(to_string(head.choice));
    row["density"] = head.density;
    row["sparse_ms"] = head.seconds * 1e3;
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

  if (!options.png_dir.empty()) {
    progress.set_detail("pictures");
    // The band plan every routed head executes: spatial heads in frame-major
    // order, temporal heads after the token-major permutation.
    const TilePlan band_plan = TilePlan::build(video_band_mask(geometry, sparse_layer.band, {}), n,
                                               n, attention_options.blocks);
    write_png(png_path, render_tile_map(band_plan, {1024, geometry}));
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
  std::string presets;
  for (const VideoPreset& preset : video_presets()) {
    presets += fmt::format("  {:<18} {} ({} tokens, {} heads x {})\n", preset.name, preset.model,
                           preset.geometry.tokens(), preset.heads, preset.head_dim);
  }
  app->footer(
      "The workload is synthetic and seeded: each head is planted spatial, temporal or\n"
      "ambiguous (tilesplash/workload.h), in bf16 with the preset's head dim. Every head\n"
      "is routed, run sparse (its mask on the shared band plan) and dense; the cosine\n"
      "compares the two outputs. The default takes about a minute on 2 cores.\n\nPresets:\n" +
      presets +
      "\nExamples:\n"
      "  tilesplash demo\n"
      "  tilesplash demo --preset wan2.1-14b-720p --heads 2 --density 0.2 --png pictures\n"
      "  tilesplash demo --geometry frames=4,height=8,width=8 --heads 2 --json");
  app->add_option("--preset", options->preset, "Model shape (see Presets below)")
      ->capture_default_str()
      ->type_name("NAME");
  app->add_option("--geometry", options->geometry,
                  "Override the preset's shape: frames=F,height=h,width=w[,text=T,text_at=...]")
      ->type_name("GEOM")
      ->check(non_empty("frames=F,height=h,width=w"));
  app->add_option("--heads", options->heads, "Heads to generate and run")
      ->type_name("H")
      ->capture_default_str()
      ->transform(integer_in(1, 4096));
  app->add_option("--density", options->density, "Target density of the masks, in (0, 1]")
      ->type_name("S")
      ->capture_default_str()
      ->transform(number_in(0.0, 1.0, true));
  app->add_option("--threads", options->threads, "Worker threads (default: all hardware threads)")
      ->type_name("T")
      ->transform(integer_in(1, 4096));
  app->add_option("--seed", options->seed, "Seed of the workload and the router")
      ->type_name("N")
      ->capture_default_str()
      ->transform(integer_in(0, std::numeric_limits<std::int64_t>::max()));
  app->add_option("--png", options->png_dir, "Write a picture of the band tile plan into DIR")
      ->type_name("DIR")
      ->check(non_empty("a directory"));
  app->add_flag("--json", options->json, "Print one JSON object (with a heads_table array)");
  app->add_flag("--quiet", options->quiet, "No progress bar and no table");
  return {app, [options] { run_demo(*options); }};
}

}  // namespace tilesplash::cli
