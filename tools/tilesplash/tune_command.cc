// `tilesplash tune`: times every candidate tile size on a sample of the plan
// (tune_blocks) and prints one row per candidate -- its tile counts, the
// boundary pairs it wastes, the predicted time and GFLOP/s on kept pairs --
// marking the fastest and the least-boundary candidate and how far apart they
// are, the article's second kernel lesson measured here. The fastest is
// stored in the tuning cache that `bench` and the library's choose_blocks()
// read when no block sizes are given.
#include <fmt/format.h>

#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "commands.h"
#include "names.h"
#include "options.h"
#include "report.h"
#include "tilesplash/attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/mask.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/methods.h"
#include "tilesplash/plan.h"
#include "tilesplash/routing.h"
#include "tilesplash/routing_layout.h"
#include "tilesplash/tuning.h"
#include "tilesplash/video.h"

namespace tilesplash::cli {
namespace {

struct TuneCliOptions {
  std::string mask;
  std::int64_t q_len = 0;
  std::int64_t kv_len = 0;  // 0: same as q_len
  ShapeOptions shape;       // --preset / --geometry
  std::string method = std::string(default_method());
  double density = 0.25;
  const CLI::Option* density_option = nullptr;  // to tell a given --density from the default
  const CLI::Option* method_option = nullptr;
  std::int64_t head_dim = 0;
  std::string dtype;
  std::int64_t heads = 2;
  std::int64_t threads = 0;
  double budget_seconds = 10.0;
  std::int64_t repeats = 3;
  std::string clock = "wall";
  bool verify = false;
  bool exhaustive = false;
  bool no_store = false;
  std::uint64_t seed = 0;
  bool json = false;
};

struct Shape {
  Mask mask = Mask::dense();
  std::int64_t q_len = 0;
  std::int64_t kv_len = 0;
  nlohmann::ordered_json about;  // preset, band, density achieved
};

// A video shape at a density is the plan its method's heads run on: the
// mask a front door takes its tiles for (routing_layout.h, tuning_mask: the
// band plan every svg head shares, radial's mask, the first sta window's
// tile-major mask), so the tile size that suits it suits the whole layer and
// VideoAttention(method=...) finds it in the cache.
Shape shape_of(const TuneCliOptions& options) {
  Shape shape;
  const bool video = !options.shape.preset.empty() || !options.shape.geometry.empty();
  if (video == !options.mask.empty()) {
    throw std::invalid_argument(
        "tune: give --mask SPEC with --q-len N, or --preset NAME / --geometry GEOM");
  }
  if (video) {
    const VideoShape video_shape = options.shape.resolve();
    const VideoGeometry& g = video_shape.geometry;
    const VideoAttention attention(g,
                                   method_attention_options(options.method, g, {options.density}));
    shape.mask = tuning_mask(attention);
    shape.q_len = shape.kv_len = g.tokens();
    shape.about["preset"] = video_shape.preset
                                ? nlohmann::ordered_json(std::string(video_shape.preset->name))
                                : nlohmann::ordered_json(nullptr);
    shape.about["method"] = options.method;
    if (method_info(options.method).takes_band) shape.about["band"] = attention.band();
    shape.about["target_density"] = options.density;
    return shape;
  }
  for (const CLI::Option* option : {options.density_option, options.method_option}) {
    if (option->count() > 0) {
      throw std::invalid_argument(option->get_name() +
                                  ": applies to --preset or --geometry, not to --mask");
    }
  }
  if (options.q_len == 0) throw std::invalid_argument("tune: --mask needs --q-len N");
  shape.mask = parse_mask_spec(options.mask);
  shape.q_len = options.q_len;
  shape.kv_len = options.kv_len > 0 ? options.kv_len : options.q_len;
  return shape;
}

nlohmann::ordered_json candidate_json(const CandidateResult& c) {
  nlohmann::ordered_json row;
  row["block_q"] = c.blocks.block_q;
  row["block_kv"] = c.blocks.block_kv;
  row["full"] = c.full;
  row["partial"] = c.partial;
  row["empty"] = c.empty;
  row["boundary_pairs"] = c.boundary_pairs;
  row["kept_pairs"] = c.kept_pairs;
  row["sampled_q_blocks"] = c.sampled_q_blocks;
  row["q_blocks"] = c.q_blocks;
  row["sample_fraction"] = c.sample_fraction;
  row["ms"] = c.seconds * 1e3;
  row["gflops"] = c.gflops;
  row["full_ms"] =
      c.full_seconds ? nlohmann::ordered_json(*c.full_seconds * 1e3) : nlohmann::ordered_json();
  return row;
}

std::string fmt_full_ms(const nlohmann::ordered_json& row) {
  return row["full_ms"].is_null() ? std::string("-")
                                  : fmt::format("{:.1f}", row["full_ms"].get<double>());
}

// Which rows of the candidates table are marked.
struct Marks {
  std::size_t best = 0;
  std::size_t least_boundary = 0;
  std::optional<std::size_t> measured_best;  // the fastest full run, when any ran
};

void print_candidates(const nlohmann::ordered_json& rows, const Marks& marks, std::ostream& out) {
  out << fmt::format("\n{:>7} {:>8} {:>9} {:>9} {:>10} {:>15} {:>7} {:>10} {:>8} {:>10}  {}\n",
                     "block_q", "block_kv", "full", "partial", "empty", "boundary_pairs", "sample",
                     "ms", "GFLOP/s", "full_ms", "");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const nlohmann::ordered_json& c = rows[i];
    std::string mark;
    if (i == marks.best) mark += " fastest";
    if (i == marks.least_boundary) mark += " least-boundary";
    if (marks.measured_best && i == *marks.measured_best) mark += " fastest-full-run";
    out << fmt::format(
        "{:>7} {:>8} {:>9} {:>9} {:>10} {:>15} {:>6.1f}% {:>10.1f} {:>8.1f} {:>10} {}\n",
        c["block_q"].get<std::int64_t>(), c["block_kv"].get<std::int64_t>(),
        c["full"].get<std::int64_t>(), c["partial"].get<std::int64_t>(),
        c["empty"].get<std::int64_t>(), c["boundary_pairs"].get<std::int64_t>(),
        c["sample_fraction"].get<double>() * 100.0, c["ms"].get<double>(),
        c["gflops"].get<double>(), fmt_full_ms(c), mark);
  }
}

void print_pick(const nlohmann::ordered_json& record, std::ostream& out) {
  const nlohmann::ordered_json& best = record["best"];
  const nlohmann::ordered_json& least = record["least_boundary"];
  const auto best_boundary = best["boundary_pairs"].get<std::int64_t>();
  const std::string boundary_ratio =
      best_boundary > 0
          ? fmt::format("{:.2f}x",
                        static_cast<double>(least["boundary_pairs"].get<std::int64_t>()) /
                            static_cast<double>(best_boundary))
          : std::string("n/a");
  out << fmt::format(
      "\nfastest {} x {} ({:.1f} ms); least boundary {} x {} ({:.1f} ms): {:.2f}x the "
      "fastest's time with {} its boundary pairs\n",
      best["block_q"].get<std::int64_t>(), best["block_kv"].get<std::int64_t>(),
      best["ms"].get<double>(), least["block_q"].get<std::int64_t>(),
      least["block_kv"].get<std::int64_t>(), least["ms"].get<double>(),
      record["least_boundary_vs_fastest"].get<double>(), boundary_ratio);
}

// ---- run -----------------------------------------------------------------------

TuneResult run(const TuneCliOptions& options, const Shape& shape) {
  const DType dtype = *parse_dtype(options.dtype);
  if (!options.no_store) TuningCache().check_writable();  // before minutes of timing
  TuneOptions tune;
  tune.heads = options.heads;
  tune.threads = static_cast<int>(options.threads);
  tune.budget_seconds = options.budget_seconds;
  tune.repeats = static_cast<int>(options.repeats);
  tune.clock = parse_clock(options.clock);
  tune.verify = options.verify;
  tune.exhaustive = options.exhaustive;
  tune.seed = options.seed;
  return tune_blocks(shape.mask, shape.q_len, shape.kv_len, options.head_dim, dtype, tune);
}

// The candidate whose full run was the fastest, when any was run in full.
std::optional<std::size_t> fastest_full_run(const TuneResult& result) {
  std::optional<std::size_t> measured_best;
  for (std::size_t i = 0; i < result.candidates.size(); ++i) {
    const auto& t = result.candidates[i].full_seconds;
    if (t && (!measured_best || *t < *result.candidates[*measured_best].full_seconds)) {
      measured_best = i;
    }
  }
  return measured_best;
}

// Stores the fastest in the tuning cache unless --no-store; the cache's path.
std::optional<std::string> store(const TuneCliOptions& options, const TuneResult& result) {
  if (options.no_store) return std::nullopt;
  const TuningCache cache;
  const CandidateResult& best = result.candidates[result.best];
  cache.store(result.key, best.blocks, best.seconds);
  return cache.path().string();
}

// ---- report ----------------------------------------------------------------------

void report_fields(const TuneCliOptions& options, const Shape& shape, const TuneResult& result,
                   const Marks& marks, nlohmann::ordered_json& record) {
  const CandidateResult& best = result.candidates[marks.best];
  const CandidateResult& least = result.candidates[marks.least_boundary];
  record["mask"] = shape.mask.to_string();
  for (const auto& [key, value] : shape.about.items()) record[key] = value;
  record["q_len"] = shape.q_len;
  record["kv_len"] = shape.kv_len;
  record["heads"] = options.heads;
  record["head_dim"] = options.head_dim;
  record["dtype"] = std::string(to_string(*parse_dtype(options.dtype)));
  record["threads"] = result.key.threads;
  record["isa"] = result.key.isa;
  record["cpu"] = result.key.cpu;
  record["density"] = static_cast<double>(best.kept_pairs) /
                      (static_cast<double>(shape.q_len) * static_cast<double>(shape.kv_len));
  record["clock"] = options.clock;
  record["fixed_ms"] = result.fixed_seconds * 1e3;
  record["tuning_seconds"] = result.tuning_seconds;
  record["search_seconds"] = result.search_seconds;
  record["least_boundary_vs_fastest"] = least.seconds / best.seconds;
  if (marks.measured_best && best.full_seconds) {
    const CandidateResult& m = result.candidates[*marks.measured_best];
    record["pick_vs_fastest_full_run"] = *best.full_seconds / *m.full_seconds;
    record["prediction_error"] = best.seconds / *best.full_seconds - 1.0;
  }
}

Report tune_report(const TuneCliOptions& options, const Shape& shape, const TuneResult& result,
                   const std::optional<std::string>& stored) {
  const Marks marks{result.best, result.least_boundary, fastest_full_run(result)};
  Report report;
  nlohmann::ordered_json& record = report.record;
  report_fields(options, shape, result, marks, record);
  record["cache_key"] = result.key.to_string();
  record["cache"] = stored ? nlohmann::ordered_json(*stored) : nlohmann::ordered_json();
  auto rows = nlohmann::ordered_json::array();
  for (const CandidateResult& c : result.candidates) rows.push_back(candidate_json(c));
  record["candidates"] = std::move(rows);
  record["best"] = candidate_json(result.candidates[marks.best]);
  record["least_boundary"] = candidate_json(result.candidates[marks.least_boundary]);
  if (marks.measured_best) {
    record["fastest_full_run"] = candidate_json(result.candidates[*marks.measured_best]);
  }
  report.sections = {scalar_table,
                     [marks](const nlohmann::ordered_json& r, std::ostream& out) {
                       print_candidates(r["candidates"], marks, out);
                     },
                     print_pick};
  return report;
}

void run_tune(const TuneCliOptions& options) {
  const Shape shape = shape_of(options);
  const TuneResult result = run(options, shape);
  const std::optional<std::string> stored = store(options, result);
  emit(tune_report(options, shape, result, stored), table_or_json(options.json), std::cout);
}

}  // namespace

Command add_tune_command(CLI::App& parent) {
  auto options = std::make_shared<TuneCliOptions>();
  CLI::App* app = parent.add_subcommand(
      "tune", "Time every candidate tile size on a sample of the plan and cache the fastest");
  app->footer(
      "Each candidate runs a stratified sample of its plan's q-blocks on random data; ms is the\n"
      "full run predicted from it (the sample's tile time scaled by visited pairs, plus the\n"
      "per-call work outside the tiles, fixed_ms). boundary_pairs counts pairs computed in\n"
      "partial tiles that the mask drops; GFLOP/s counts 4 * head_dim flops per kept pair per\n"
      "head. --verify (--exhaustive) also times the pick (every candidate) on the full run:\n"
      "full_ms. The fastest is stored in $XDG_CACHE_HOME/tilesplash/tuning.json (else\n"
      "~/.cache/tilesplash/) unless --no-store; `bench` uses it when no blocks are given.\n\n"
      "--preset (or --geometry) times the plan --method's heads run at --density (svg:\n"
      "the band plan every head shares, text rows/columns included) and stores it under\n"
      "the key a VideoAttention of that method looks up.\n\n" +
      presets_text() + "\n" + methods_text() +
      "\nExamples:\n"
      "  tilesplash tune --mask 'local:left=2048,right=2048' --q-len 16384 --head-dim 128 "
      "--dtype bf16\n"
      "  tilesplash tune --preset wan2.1-14b-720p --density 0.25 --head-dim 128 --dtype f32 \\\n"
      "      --threads 2 --budget-seconds 20 --verify --json");

  auto* mask = app->add_option("--mask", options->mask, "Mask SPEC (see `tilesplash plan --help`)")
                   ->type_name("SPEC")
                   ->check(mask_spec());
  auto* q_len = app->add_option("--q-len", options->q_len, "Query sequence length (with --mask)")
                    ->type_name("N")
                    ->transform(integer_in(1, kMaxLength));
  app->add_option("--kv-len", options->kv_len, "Key/value length (default: --q-len)")
      ->type_name("M")
      ->transform(integer_in(1, kMaxLength))
      ->needs(mask);
  add_shape_options(*app, options->shape);
  options->density_option =
      add_density_option(*app, options->density, "With --preset / --geometry: target density");
  options->method_option = add_method_option(*app, options->method, "With --preset / --geometry: ");
  mask->needs(q_len);
  add_head_dim_option(*app, options->head_dim, "Head dimension")->required();
  add_dtype_option(*app, options->dtype, "Input dtype")->required();
  app->add_option("--heads", options->heads, "Heads per timed call")
      ->type_name("H")
      ->capture_default_str()
      ->transform(integer_in(1, 1024));
  add_threads_option(*app, options->threads);
  app->add_option("--budget-seconds", options->budget_seconds,
                  "Time for the sampled runs of all candidates (approximate)")
      ->type_name("X")
      ->capture_default_str()
      ->transform(number_in(1e-3, 1e6));
  app->add_option("--repeats", options->repeats, "Timed runs per measurement; the minimum counts")
      ->type_name("R")
      ->capture_default_str()
      ->transform(integer_in(1, 1000));
  app->add_option("--clock", options->clock,
                  "wall: elapsed time; cpu: this process's CPU time / threads, which other\n"
                  "jobs on a shared machine disturb far less")
      ->type_name("CLOCK")
      ->capture_default_str()
      ->check(CLI::IsMember(names_of(kClocks)));
  app->add_flag("--verify", options->verify,
                "Also time the fastest and the least-boundary candidate on the full run");
  app->add_flag("--exhaustive", options->exhaustive,
                "Also time every candidate on the full run (slow; for benchmarks)");
  app->add_flag("--no-store", options->no_store, "Do not write the result to the tuning cache");
  app->add_option("--seed", options->seed, "Seed of the random Q, K, V")
      ->type_name("S")
      ->capture_default_str()
      ->transform(integer_in(0, std::numeric_limits<std::int64_t>::max()));
  app->add_flag("--json", options->json,
                "Print one JSON object: the fields, `candidates` (one per row) and `best`");

  return {app, [options] { run_tune(*options); }};
}

}  // namespace tilesplash::cli
