// `tilesplash compare`: the mask families side by side on equal terms. One
// synthetic workload (tilesplash/workload.h) with one head per planted type
// runs dense once, then under every method at every target density through
// the same front door, kernel and tiles; each head reports its relative L2
// error and cosine against dense, the density it ran, the mask the router
// chose, and its times (kernel, permutation, and for svg2 the clustering and
// the plan). scripts/masks_comparison.py turns the --json output into the
// table and plot of docs/masks.md.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "median.h"
#include "options.h"
#include "report.h"
#include "tilesplash/attention.h"
#include "tilesplash/methods.h"
#include "tilesplash/routing.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"
#include "tilesplash/workload.h"
#include "video_setup.h"

namespace tilesplash::cli {
namespace {

constexpr double kBudgetSlack = 1.25;

// Every registered method, comma-separated: the default of --methods.
std::string all_methods() {
  std::string names;
  for (const MethodInfo& method : methods()) {
    names += (names.empty() ? "" : ",") + std::string(method.name);
  }
  return names;
}

struct CompareOptions {
  ShapeOptions shape{"", "", "wan2.1-1.3b-480p"};
  std::string planted;  // empty: every type
  std::string methods = all_methods();
  std::string densities = "0.05,0.1,0.2,0.3,0.5";
  std::int64_t head_dim = 0;  // 0: the preset's (128 for a custom geometry)
  std::string dtype = "bf16";
  std::int64_t samples = 0;
  std::uint64_t seed = 0;
  bool sink = false;
  std::int64_t query_clusters = 0;  // 0: default_cluster_options()
  std::int64_t key_clusters = 0;
  std::int64_t block_q = 128;
  std::int64_t block_kv = 128;
  std::int64_t threads = 0;
  std::int64_t repeats = 1;
  bool json = false;
};

std::vector<std::string> split(const std::string& text, const char* what) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) {
    if (item.empty())
      throw std::invalid_argument(std::string(what) + ": empty item in '" + text + "'");
    items.push_back(item);
  }
  if (items.empty()) throw std::invalid_argument(std::string(what) + " must not be empty");
  return items;
}

struct HeadTimes {
  double seconds = 0.0, permute = 0.0, cluster = 0.0, plan = 0.0;
};

// One untimed call (plans built, svg2 clustered from scratch: its times are
// returned in *cold), then `repeats` timed calls at later steps; per head,
// the median times and the last call's report.
LayerReport run_timed(VideoAttention& attention, const AttentionArgs& args, std::int64_t repeats,
                      std::vector<HeadTimes>& times, LayerReport* cold) {
  *cold = attention.forward(args, 0, 0);
  std::vector<LayerReport> runs;
  for (std::int64_t r = 0; r < repeats; ++r) runs.push_back(attention.forward(args, 0, 1 + r));
  times.assign(runs.front().heads.size(), {});
  for (std::size_t h = 0; h < times.size(); ++h) {
    const auto pick = [&](auto field) {
      std::vector<double> values;
      for (const LayerReport& run : runs) values.push_back(field(run.heads[h]));
      return median(std::move(values));
    };
    times[h] = {pick([](const HeadReport& x) { return x.seconds; }),
                pick([](const HeadReport& x) { return x.permute_seconds; }),
                pick([](const HeadReport& x) { return x.cluster_seconds; }),
                pick([](const HeadReport& x) { return x.plan_seconds; })};
  }
  LayerReport last = runs.back();
  std::vector<double> routing;
  for (const LayerReport& run : runs) routing.push_back(run.routing_seconds);
  last.routing_seconds = median(std::move(routing));
  return last;
}

struct Agreement {
  double rel_l2 = 0.0;
  double cosine = 0.0;
};

Agreement agreement(const std::vector<float>& got, const std::vector<float>& dense,
                    std::size_t offset, std::size_t count) {
  double diff = 0.0, dd = 0.0, gg = 0.0, gd = 0.0;
  for (std::size_t i = offset; i < offset + count; ++i) {
    const double g = got[i], d = dense[i];
    diff += (g - d) * (g - d);
    dd += d * d;
    gg += g * g;
    gd += g * d;
  }
  return {dd > 0.0 ? std::sqrt(diff / dd) : 0.0,
          gg > 0.0 && dd > 0.0 ? gd / std::sqrt(gg * dd) : 0.0};
}

// ---- resolve -----------------------------------------------------------------

struct CompareSetup : VideoSetup {
  explicit CompareSetup(VideoSetup video) : VideoSetup(std::move(video)) {}
  std::vector<PlantedHead> planted;
  std::vector<double> densities;
  std::vector<std::string> methods;
};

std::vector<double> parse_densities(const std::string& list) {
  std::vector<double> densities;
  for (const std::string& text : split(list, "--densities")) {
    std::size_t used = 0;
    double value = std::numeric_limits<double>::quiet_NaN();
    try {
      value = std::stod(text, &used);
    } catch (const std::exception&) {
    }
    if (used != text.size() || !(value > 0.0 && value <= 1.0)) {
      throw std::invalid_argument("--densities: expected numbers in (0, 1], got '" + text + "'");
    }
    densities.push_back(value);
  }
  return densities;
}

CompareSetup resolve(const CompareOptions& options) {
  CompareSetup setup(
      resolve_video(options.shape, options.head_dim, options.dtype, options.threads));
  if (options.planted.empty()) {
    setup.planted.assign(planted_heads().begin(), planted_heads().end());
  } else {
    for (const std::string& name : split(options.planted, "--planted")) {
      setup.planted.push_back(parse_planted_head(name));
    }
  }
  setup.densities = parse_densities(options.densities);
  setup.methods = split(options.methods, "--methods");
  // Every method is checked before the long runs start.
  for (const std::string& method : setup.methods) {
    method_info(method, "--methods");
    method_attention_options(method, setup.shape.geometry, {0.5});
  }
  return setup;
}

// ---- run -----------------------------------------------------------------------

// One method at one density: the last timed call's report, its median times,
// the untimed call's report, and each head's agreement with dense and fields.
struct MethodRun {
  std::string method;
  double density = 0.0;
  LayerReport report, cold;
  std::vector<HeadTimes> times;
  std::vector<Agreement> agreement;
  std::vector<Fields> fields;
};

struct CompareRun {
  std::vector<HeadTimes> dense_times;
  std::vector<MethodRun> methods;
};

// Runs every configuration through one front door, kernel and tile size.
class Runner {
 public:
  Runner(const CompareOptions& options, const CompareSetup& setup)
      : options_(options),
        setup_(setup),
        workload_(make_workload(setup, static_cast<std::int64_t>(setup.planted.size()),
                                options.seed, setup.planted)) {}

  std::vector<HeadTimes> run_dense() {
    VideoAttentionOptions dense = configure({});
    dense.force = HeadMask::kDense;
    VideoAttention attention(setup_.shape.geometry, dense, setup_.context);
    std::vector<HeadTimes> times;
    LayerReport cold;
    run_timed(attention, args(dense_out_), options_.repeats, times, &cold);
    return times;
  }

  MethodRun run_method(const std::string& method, double density) {
    MethodOptions method_options;
    method_options.density = density;
    method_options.sink = options_.sink;
    VideoAttentionOptions attention_options =
        configure(method_attention_options(method, setup_.shape.geometry, method_options));
    // Routing picks among candidates at the density asked for (radial's
    // floor and sta's coarse windows can sit far above it).
    attention_options.density_budget = std::min(1.0, kBudgetSlack * density);
    VideoAttention attention(setup_.shape.geometry, attention_options, setup_.context);
    MethodRun run;
    run.method = method;
    run.density = density;
    run.report = run_timed(attention, args(out_), options_.repeats, run.times, &run.cold);
    const std::size_t head_size = static_cast<std::size_t>(n() * setup_.head_dim);
    for (std::size_t h = 0; h < run.report.heads.size(); ++h) {
      run.agreement.push_back(agreement(out_, dense_out_, h * head_size, head_size));
      run.fields.push_back(head_fields(run.report.heads[h], attention.candidates()));
    }
    return run;
  }

 private:
  std::int64_t n() const { return setup_.shape.geometry.tokens(); }

  AttentionArgs args(std::vector<float>& out) const {
    const std::int64_t heads = workload_->heads();
    out.assign(static_cast<std::size_t>(heads * n() * setup_.head_dim), 0.0f);
    return AttentionArgs{
        workload_->q(), workload_->k(), workload_->v(),
        MutableTensorView::contiguous(out.data(), DType::kF32, heads, n(), setup_.head_dim)};
  }

  VideoAttentionOptions configure(VideoAttentionOptions o) const {
    o.router = {options_.samples, options_.seed};
    o.blocks = {options_.block_q, options_.block_kv};
    o.threads = setup_.threads;
    if (o.clusters) {
      if (options_.query_clusters > 0) o.clusters->query_clusters = options_.query_clusters;
      if (options_.key_clusters > 0) o.clusters->key_clusters = options_.key_clusters;
      o.clusters->seed = options_.seed;
    }
    return o;
  }

  const CompareOptions& options_;
  const CompareSetup& setup_;
  const std::unique_ptr<VideoWorkload> workload_;
  std::vector<float> dense_out_, out_;
};

CompareRun run(const CompareOptions& options, const CompareSetup& setup) {
  Runner runner(options, setup);
  CompareRun result;
  result.dense_times = runner.run_dense();
  for (const std::string& method : setup.methods) {
    for (const double density : setup.densities) {
      result.methods.push_back(runner.run_method(method, density));
    }
  }
  return result;
}

// ---- report ----------------------------------------------------------------------

void report_setup(const CompareOptions& options, const CompareSetup& setup,
                  nlohmann::ordered_json& record) {
  record["preset"] = preset_name(setup.shape);
  record["geometry"] = setup.shape.geometry.to_string();
  record["tokens"] = setup.shape.geometry.tokens();
  record["head_dim"] = setup.head_dim;
  record["dtype"] = std::string(to_string(setup.dtype));
  record["isa"] = active_isa();
  record["threads"] = setup.threads;
  record["samples"] = samples_in_use(options.samples, setup.shape.geometry);
  record["seed"] = options.seed;
  record["sink"] = options.sink;
  record["block_q"] = options.block_q;
  record["block_kv"] = options.block_kv;
  record["repeats"] = options.repeats;
  // The methods that are one mask family (a SPEC term): what "mix" routes among.
  auto families = nlohmann::ordered_json::array();
  for (const MethodInfo& method : tilesplash::methods()) {
    if (method.spec) families.push_back(std::string(method.name));
  }
  record["families"] = std::move(families);
}

nlohmann::ordered_json dense_rows(const CompareSetup& setup, const CompareRun& run) {
  auto rows = nlohmann::ordered_json::array();
  for (std::size_t h = 0; h < setup.planted.size(); ++h) {
    nlohmann::ordered_json row;
    row["planted"] = std::string(to_string(setup.planted[h]));
    row["dense_ms"] = run.dense_times[h].seconds * 1e3;
    rows.push_back(std::move(row));
  }
  return rows;
}

// One head of one configuration: the last timed call's head report, then
// this comparison's own columns: errors against dense and median times.
nlohmann::ordered_json method_row(const CompareSetup& setup, const CompareRun& run,
                                  const MethodRun& m, std::size_t i) {
  const HeadTimes& t = m.times[i];
  const double heads = static_cast<double>(setup.planted.size());
  nlohmann::ordered_json row;
  row["method"] = m.method;
  row["target_density"] = m.density;
  row["planted"] = std::string(to_string(setup.planted[i]));
  row.update(to_json(m.fields[i]));
  row["rel_l2"] = m.agreement[i].rel_l2;
  row["cosine"] = m.agreement[i].cosine;
  row["kernel_ms"] = (t.seconds - t.permute - t.cluster - t.plan) * 1e3;
  row["permute_ms"] = t.permute * 1e3;
  row["routing_ms"] = m.report.routing_seconds / heads * 1e3;
  row["cluster_ms"] = t.cluster * 1e3;
  row["cluster_cold_ms"] = m.cold.heads[i].cluster_seconds * 1e3;
  row["plan_ms"] = t.plan * 1e3;
  row["dense_ms"] = run.dense_times[i].seconds * 1e3;
  return row;
}

void print_rows_text(const nlohmann::ordered_json& record, std::ostream& out) {
  out << '\n'
      << fmt::format("{:<8} {:>6}  {:<16} {:<12} {:>7} {:>7} {:>8} {:>8} {:>9} {:>9}\n", "method",
                     "target", "planted", "choice", "density", "visited", "rel_l2", "cosine",
                     "kernel_ms", "dense_ms");
  for (const auto& row : record["rows"]) {
    out << fmt::format(
        "{:<8} {:>6.2f}  {:<16} {:<12} {:>7.4f} {:>7.4f} {:>8.4f} {:>8.5f} {:>9.1f} {:>9.1f}\n",
        row["method"].get<std::string>(), row["target_density"].get<double>(),
        row["planted"].get<std::string>(), row["choice"].get<std::string>(),
        row["density"].get<double>(), row["tiles_visited"].get<double>(),
        row["rel_l2"].get<double>(), row["cosine"].get<double>(), row["kernel_ms"].get<double>(),
        row["dense_ms"].get<double>());
  }
}

Report compare_report(const CompareOptions& options, const CompareSetup& setup,
                      const CompareRun& run) {
  Report report;
  report_setup(options, setup, report.record);
  report.record["dense"] = dense_rows(setup, run);
  auto rows = nlohmann::ordered_json::array();
  for (const MethodRun& m : run.methods) {
    for (std::size_t i = 0; i < setup.planted.size(); ++i) {
      rows.push_back(method_row(setup, run, m, i));
    }
  }
  report.record["rows"] = std::move(rows);
  report.sections = {scalar_table, print_rows_text};
  return report;
}

void run_compare(const CompareOptions& options) {
  const CompareSetup setup = resolve(options);
  emit(compare_report(options, setup, run(options, setup)), table_or_json(options.json), std::cout);
}

}  // namespace

Command add_compare_command(CLI::App& parent) {
  auto options = std::make_shared<CompareOptions>();
  CLI::App* app = parent.add_subcommand(
      "compare",
      "Every mask family on one synthetic workload: error against dense and time, per planted "
      "head type");
  std::string types;
  for (const PlantedHead kind : planted_heads()) {
    types += (types.empty() ? "" : ", ") + std::string(to_string(kind));
  }
  const std::string methods = method_list_text();
  app->footer(
      "One head per planted type (tilesplash/workload.h: " + types +
      ") runs dense, then under each method at each target density (" + methods +
      "; docs/masks.md defines them). rel_l2 = |O - O_dense| / |O_dense| and cosine are per "
      "head over all rows and channels; tiles_visited is the share of the map inside the tiles "
      "the kernel visited (its work against dense's). Times are medians of --repeats calls "
      "after one untimed call (plans built; svg2 clustered from scratch, reported as "
      "cluster_cold_ms; "
      "the timed calls are later steps, warm-started). kernel_ms excludes permutation, "
      "clustering and plan; routing_ms is the layer's routing over the heads. Routed methods "
      "choose among candidates of density <= 1.25 x the target (the least dense when none "
      "is).\n\n" +
      presets_text() + "\n" + methods_text() +
      "\nExamples:\n"
      "  tilesplash compare --geometry frames=8,height=8,width=12 --head-dim 64 "
      "--densities 0.1,0.3\n"
      "  tilesplash compare --preset wan2.1-1.3b-480p --json > comparison.json");
  add_shape_options(*app, options->shape);
  app->add_option("--planted", options->planted,
                  "Comma-separated head types, one head each (default: every type)")
      ->type_name("LIST")
      ->check(non_empty(types.c_str()));
  app->add_option("--methods", options->methods,
                  "Comma-separated methods (default: every registered method)")
      ->type_name("LIST")
      ->capture_default_str()
      ->check(non_empty(methods.c_str()));
  app->add_option("--densities", options->densities, "Comma-separated target densities")
      ->type_name("LIST")
      ->capture_default_str()
      ->check(non_empty("numbers in (0, 1]"));
  add_head_dim_option(*app, options->head_dim, "Head dimension (default: the preset's, else 128)");
  add_dtype_option(*app, options->dtype, "Q/K/V dtype")->capture_default_str();
  add_samples_option(*app, options->samples);
  add_seed_option(*app, options->seed, "Seed of the workload, router and k-means");
  app->add_flag("--sink", options->sink, "OR the first-frame sink into the band and radial masks");
  app->add_option("--query-clusters", options->query_clusters,
                  "svg2: query clusters (default: Wan's, 200 below 720p, 300 from 720p)")
      ->type_name("QC")
      ->transform(integer_in(1, 1 << 20));
  app->add_option("--key-clusters", options->key_clusters, "svg2: key clusters (default 1000)")
      ->type_name("KC")
      ->transform(integer_in(1, 1 << 20));
  add_tile_options(*app, options->block_q, options->block_kv);
  add_threads_option(*app, options->threads);
  add_repeats_option(*app, options->repeats, "Timed calls after the untimed one; medians");
  app->add_flag("--json", options->json, "Print one JSON object (with a rows array)");
  return {app, [options] { run_compare(*options); }};
}

}  // namespace tilesplash::cli
