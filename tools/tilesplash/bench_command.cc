// `tilesplash bench`: times the attention kernel on one mask and shape with
// random data and reports work-normalised numbers -- GFLOP/s on the kept pairs
// against the machine's FMA peak measured in this process, and optionally the
// ratio against dense attention on the same data -- never a bare time alone.
#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "median.h"
#include "names.h"
#include "options.h"
#include "random_tensor.h"
#include "report.h"
#include "tilesplash/attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/mask.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/peak.h"
#include "tilesplash/plan.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"
#include "tilesplash/tuning.h"

namespace tilesplash::cli {
namespace {

struct BenchOptions {
  std::string mask;
  std::int64_t q_len = 0;
  std::int64_t kv_len = 0;  // 0: same as q_len
  std::int64_t head_dim = 0;
  std::string dtype;
  std::int64_t heads = 1;
  std::int64_t threads = 0;  // 0: all hardware threads
  std::int64_t block_q = 0;  // 0: the tuned choice (cache), else a heuristic
  std::int64_t block_kv = 0;
  std::string mask_mode = "tile";
  std::string precision = "default";
  std::string product_path = "auto";
  std::string variant;   // empty: the tuned one (cache), else the default
  std::string ablation;  // mask, variant, product-path or precision: interleaved alternatives
  bool compare_dense = false;
  std::int64_t repeats = 5;
  std::uint64_t seed = 0;
  bool json = false;
};

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Timing {
  double seconds = 0.0;      // median wall time of a call
  double cpu_seconds = 0.0;  // median CPU time of a call per thread
};

// The first call grows the runner's workspaces and checks the data for
// NaN/Inf once; the timed calls skip that check, since the data is known
// finite and the check is not attention work. CPU time leaves out the time
// other processes hold the cores, so on a loaded machine it stays close to
// what a quiet one gives.
Timing median_timing(AttentionBackend& runner, const TilePlan& plan, const AttentionArgs& args,
                     AttentionOptions options, std::int64_t repeats) {
  runner.forward(plan, args, options);
  options.check_finite = false;
  std::vector<double> seconds;
  std::vector<double> cpu_seconds;
  for (std::int64_t r = 0; r < repeats; ++r) {
    const double cpu_start = process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    runner.forward(plan, args, options);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    cpu_seconds.push_back((process_cpu_seconds() - cpu_start) / options.threads);
  }
  return {std::max(median(std::move(seconds)), 1e-12),
          std::max(median(std::move(cpu_seconds)), 1e-12)};
}

// Refuses shapes whose tensors cannot fit in memory, as bad input rather than
// an allocation failure halfway through generating data.
void check_fits_in_memory(const BenchOptions& options, std::int64_t kv_len, DType dtype) {
  const double elements_in = static_cast<double>(options.heads) * options.head_dim *
                             (static_cast<double>(options.q_len) + 2.0 * kv_len);
  const double elements_out =
      static_cast<double>(options.heads) * options.head_dim * static_cast<double>(options.q_len);
  const double need = elements_in * static_cast<double>(size_of(dtype)) + elements_out * 4.0;
  const double have = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  if (have > 0 && need > have) {
    throw std::invalid_argument(fmt::format(
        "--q-len/--kv-len/--heads/--head-dim: Q, K, V and the output need {:.1f} GiB, more "
        "than this machine's {:.1f} GiB",
        need / (1 << 30), have / (1 << 30)));
  }
}

// Alternatives timed on the same plan, data and runner, interleaved run by
// run so that load from other processes hits all of them alike (same-run A/B
// ratios): the mask modes (the article's tile-aware masking lesson), the
// kernel's loop variants, the two bf16 product paths, or the two precisions.
struct Alternative {
  std::string label;
  AttentionOptions options;
};

template <typename Values, typename Set>
std::vector<Alternative> alternatives_over(const Values& values, const AttentionOptions& base,
                                           Set set) {
  std::vector<Alternative> list;
  for (const auto& value : values) {
    AttentionOptions options = base;
    set(options, value);
    list.push_back({std::string(to_string(value)), options});
  }
  return list;
}

// --ablation's name table: each WHAT and the alternatives it times.
struct Ablation {
  const char* name;
  std::vector<Alternative> (*alternatives)(const AttentionOptions& base, DType dtype);
};

constexpr Ablation kAblations[] = {
    {"mask",
     [](const AttentionOptions& base, DType) {
       return alternatives_over(kMaskModes, base,
                                [](AttentionOptions& o, MaskMode mode) { o.mask_mode = mode; });
     }},
    {"variant",
     [](const AttentionOptions& base, DType) {
       return alternatives_over(
           kernel_variants(), base,
           [](AttentionOptions& o, const KernelVariant& variant) { o.variant = variant; });
     }},
    {"product-path",
     [](const AttentionOptions& base, DType dtype) {
       if (dtype != DType::kBF16) {
         throw std::invalid_argument("--ablation product-path: needs --dtype bf16, got " +
                                     std::string(to_string(dtype)));
       }
       // Refused (naming the target) where there is no dot product to compare.
       const std::array paths = {ProductPath::kDot, ProductPath::kWiden};
       for (const ProductPath path : paths) choose_product_path(path);
       return alternatives_over(
           paths, base, [](AttentionOptions& o, ProductPath path) { o.product_path = path; });
     }},
    {"precision",
     [](const AttentionOptions& base, DType) {
       return alternatives_over(kPrecisions, base,
                                [](AttentionOptions& o, Precision p) { o.precision = p; });
     }},
};

std::vector<Alternative> ablation_alternatives(const std::string& what,
                                               const AttentionOptions& base, DType dtype) {
  for (const Ablation& ablation : kAblations) {
    if (what == ablation.name) return ablation.alternatives(base, dtype);
  }
  throw std::invalid_argument("--ablation: unknown '" + what + "'");
}

std::vector<std::string> ablation_names() {
  std::vector<std::string> names;
  for (const Ablation& ablation : kAblations) names.emplace_back(ablation.name);
  return names;
}

// Median wall seconds of each alternative, in list order.
std::vector<double> time_alternatives(AttentionBackend& runner, const TilePlan& plan,
                                      const AttentionArgs& args,
                                      const std::vector<Alternative>& list, std::int64_t repeats) {
  for (const Alternative& alternative : list) {
    runner.forward(plan, args, alternative.options);  // warm-up
  }
  std::vector<std::vector<double>> seconds(list.size());
  for (std::int64_t r = 0; r < repeats; ++r) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      AttentionOptions options = list[i].options;
      options.check_finite = false;
      const auto start = std::chrono::steady_clock::now();
      runner.forward(plan, args, options);
      seconds[i].push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  std::vector<double> medians;
  for (std::vector<double>& values : seconds) {
    medians.push_back(std::max(median(std::move(values)), 1e-12));
  }
  return medians;
}

// ---- resolve: the options as the library's values -------------------------

struct BenchSetup {
  std::int64_t kv_len = 0;
  DType dtype = DType::kF32;
  std::shared_ptr<ThreadingContext> context;  // workload, runners, peak
  int threads = 1;
  Mask mask = Mask::dense();
  ProductPathChoice path_choice;
  BlockSizes blocks;
  std::string block_source = "given";
  std::string variant_source = "given";
  KernelVariant variant;
  AttentionOptions attention;
};

// The tile sizes and loop variant not given: the cached choice, else the
// heuristic (blocks) and the default (variant).
void resolve_tiles(const BenchOptions& options, BenchSetup& setup) {
  setup.blocks = {options.block_q, options.block_kv};
  KernelVariant& variant = setup.variant;
  if (!options.variant.empty()) variant = *parse_kernel_variant(options.variant);
  if (setup.blocks.block_q != 0 && setup.blocks.block_kv != 0 && !options.variant.empty()) return;
  const BlockChoice choice =
      choose_blocks(setup.mask, options.q_len, setup.kv_len, options.head_dim, setup.dtype,
                    setup.threads, setup.attention.precision);
  const std::string from = choice.from_cache ? "cache" : "heuristic";
  if (setup.blocks.block_q == 0 || setup.blocks.block_kv == 0) {
    setup.block_source =
        std::string(options.block_q != 0 || options.block_kv != 0 ? "given+" : "") + from;
  }
  if (setup.blocks.block_q == 0) setup.blocks.block_q = choice.blocks.block_q;
  if (setup.blocks.block_kv == 0) setup.blocks.block_kv = choice.blocks.block_kv;
  if (options.variant.empty()) {
    variant = choice.variant;
    setup.variant_source = choice.from_cache ? "cache" : "default";
  }
}

BenchSetup resolve(const BenchOptions& options) {
  BenchSetup setup;
  setup.kv_len = options.kv_len > 0 ? options.kv_len : options.q_len;
  setup.dtype = *parse_dtype(options.dtype);
  setup.context = std::make_shared<ThreadingContext>(static_cast<int>(options.threads));
  setup.threads = setup.context->threads();
  check_fits_in_memory(options, setup.kv_len, setup.dtype);
  setup.mask = parse_mask_spec(options.mask);
  AttentionOptions& attention = setup.attention;
  attention.mask_mode = *parse_mask_mode(options.mask_mode);
  attention.threads = setup.threads;
  attention.precision = *parse_precision(options.precision);
  attention.product_path = *parse_product_path(options.product_path);
  // Before anything is timed: a forced path the target lacks is an error, and
  // a first calibration (about 50 ms) happens here rather than in a timing.
  setup.path_choice = choose_product_path(attention.product_path);
  resolve_tiles(options, setup);
  attention.variant = setup.variant;
  return setup;
}

// ---- run: time the kernel --------------------------------------------------

struct BenchRun {
  explicit BenchRun(TilePlan built) : plan(std::move(built)) {}
  TilePlan plan;
  std::vector<Alternative> alternatives;  // under --ablation
  std::vector<double> alternative_seconds;
  std::optional<Timing> timing;  // without --ablation
  double seconds = 0.0;          // the selected configuration's median
  double peak = 0.0, cpu_peak = 0.0;
  std::optional<PeakMeasurement> int8_peak;
  std::optional<Timing> dense;  // --compare-dense
};

// Random Q, K, V and the output they are attended into.
struct BenchData {
  RandomTensor q, k, v;
  std::vector<float> out;
  AttentionArgs args(const BenchOptions& options) {
    return {q.view(), k.view(), v.view(),
            MutableTensorView::contiguous(out.data(), DType::kF32, options.heads, options.q_len,
                                          options.head_dim)};
  }
};

BenchData random_data(const BenchOptions& options, const BenchSetup& setup) {
  std::mt19937_64 rng(options.seed);
  const std::int64_t d = options.head_dim;
  RandomTensor q(setup.dtype, options.heads, options.q_len, d, rng);
  RandomTensor k(setup.dtype, options.heads, setup.kv_len, d, rng);
  RandomTensor v(setup.dtype, options.heads, setup.kv_len, d, rng);
  return {std::move(q), std::move(k), std::move(v),
          std::vector<float>(static_cast<std::size_t>(options.heads * options.q_len * d))};
}

// Under an ablation, the alternative the other options select (else the first).
std::size_t selected_alternative(const std::vector<Alternative>& alternatives,
                                 const AttentionOptions& attention) {
  std::size_t selected = 0;
  for (std::size_t i = 0; i < alternatives.size(); ++i) {
    const AttentionOptions& o = alternatives[i].options;
    if (o.mask_mode == attention.mask_mode && o.variant == attention.variant &&
        o.precision == attention.precision && o.product_path == attention.product_path) {
      selected = i;
    }
  }
  return selected;
}

BenchRun run(const BenchOptions& options, const BenchSetup& setup) {
  BenchRun result(TilePlan::build(setup.mask, options.q_len, setup.kv_len, setup.blocks));
  BenchData data = random_data(options, setup);
  const AttentionArgs args = data.args(options);
  const AttentionOptions& attention = setup.attention;
  ThreadingContext* context = setup.context.get();
  // The peak is measured before and after the timed runs and the higher one
  // kept: a peak is an upper bound, and another process on the machine can
  // spoil either measurement but rarely both.
  const PeakMeasurement before =
      measure_peak(setup.dtype, setup.threads, 0.2, context, attention.product_path);
  const std::unique_ptr<AttentionBackend> backend = make_backend("cpu", setup.context);
  AttentionBackend& runner = *backend;
  if (!options.ablation.empty()) {
    result.alternatives = ablation_alternatives(options.ablation, attention, setup.dtype);
    result.alternative_seconds =
        time_alternatives(runner, result.plan, args, result.alternatives, options.repeats);
    result.seconds =
        result.alternative_seconds[selected_alternative(result.alternatives, attention)];
  } else {
    result.timing = median_timing(runner, result.plan, args, attention, options.repeats);
    result.seconds = result.timing->seconds;
  }
  const PeakMeasurement after =
      measure_peak(setup.dtype, setup.threads, 0.2, context, attention.product_path);
  result.peak = std::max(before.gflops, after.gflops);
  result.cpu_peak = std::max(before.cpu_gflops, after.cpu_gflops);
  if (attention.precision == Precision::kInt8 || options.ablation == "precision") {
    result.int8_peak = measure_int8_peak(setup.threads, 0.2, context);
  }
  if (options.compare_dense) {
    // The dense baseline runs in tile mode: all of its tiles are full, so it
    // is the mask-free ideal that a sparse run should scale down from.
    const TilePlan dense =
        TilePlan::build(Mask::dense(), options.q_len, setup.kv_len, setup.blocks);
    AttentionOptions dense_attention = attention;
    dense_attention.mask_mode = MaskMode::kTile;
    result.dense = median_timing(runner, dense, args, dense_attention, options.repeats);
  }
  return result;
}

// ---- report ------------------------------------------------------------------

// What ran: the shape, the tiles and the kernel's configuration.
void report_setup(const BenchOptions& options, const BenchSetup& setup, Report& report) {
  nlohmann::ordered_json& record = report.record;
  const DType dtype = setup.dtype;
  record["mask"] = setup.mask.to_string();
  record["q_len"] = options.q_len;
  record["kv_len"] = setup.kv_len;
  record["heads"] = options.heads;
  record["head_dim"] = options.head_dim;
  record["dtype"] = std::string(to_string(dtype));
  record["block_q"] = setup.blocks.block_q;
  record["block_kv"] = setup.blocks.block_kv;
  record["blocks_from"] = setup.block_source;
  record["mask_mode"] = std::string(to_string(setup.attention.mask_mode));
  record["threads"] = setup.threads;
  record["isa"] = active_isa();
  record["precision"] = std::string(to_string(setup.attention.precision));
  // Which bf16 product path ran and why (the calibration's rates when measured).
  const ProductPathChoice& path = setup.path_choice;
  record["product_path"] =
      dtype == DType::kBF16 ? std::string(to_string(path.path)) : std::string("fma");
  record["product_path_reason"] =
      dtype == DType::kBF16 ? path.reason
                            : std::string(to_string(dtype)) + " inputs run on the f32 FMA";
  if (path.dot_gflops > 0.0) {
    record["calibration_dot_gflops"] = path.dot_gflops;
    record["calibration_fma_gflops"] = path.fma_gflops;
  }
  const KernelProducts products = kernel_products(dtype, setup.attention.precision, path.path);
  record["qk_product"] = products.qk;
  record["pv_product"] = products.pv;
  // The unit whose peak loop measured peak_gflops (measure_peak: the loop of
  // the path the P.V product takes), so an efficiency says against what.
  record["peak_unit"] = products.pv;
  record["variant"] = to_string(setup.variant);
  record["variant_from"] = setup.variant_source;
  record["repeats"] = options.repeats;
}

// Flops of the kept pairs: 4 * head_dim per pair per head (Q K^T and P V).
double flops_per_pair(const BenchOptions& options) {
  return 4.0 * static_cast<double>(options.head_dim) * static_cast<double>(options.heads);
}

// The speed against the peak, by wall clock and by CPU time.
void report_speed(const BenchOptions& options, const BenchSetup& setup, const BenchRun& run,
                  Report& report) {
  nlohmann::ordered_json& record = report.record;
  const PlanStats& stats = run.plan.stats();
  const double kept = flops_per_pair(options) * static_cast<double>(stats.kept_pairs);
  const double gflops = kept / run.seconds * 1e-9;
  record["kept_pairs"] = stats.kept_pairs;
  record["density"] = stats.density;
  record["seconds"] = run.seconds;
  record["gflops"] = gflops;
  record["peak_gflops"] = run.peak;
  record["peak_gflops_per_thread"] = run.peak / setup.threads;
  record["efficiency"] = run.peak > 0.0 ? gflops / run.peak : 0.0;
  if (run.timing) {
    const double cpu_gflops = kept / run.timing->cpu_seconds * 1e-9;
    record["cpu_seconds"] = run.timing->cpu_seconds;
    record["cpu_gflops"] = cpu_gflops;
    record["cpu_peak_gflops"] = run.cpu_peak;
    record["cpu_efficiency"] = run.cpu_peak > 0.0 ? cpu_gflops / run.cpu_peak : 0.0;
  }
  // Runnable processes, averaged over the last minute (against the cores the
  // machine has): timings on a loaded machine are slower, so every result
  // says how loaded it was.
  double load[1] = {0.0};
  if (getloadavg(load, 1) == 1) record["load_average"] = load[0];
}

// Each alternative's median seconds and its ratio to the first
// ("element_vs_tile": element seconds / tile seconds); the int8 peak.
void report_alternatives(const BenchRun& run, Report& report) {
  nlohmann::ordered_json& record = report.record;
  const auto& list = run.alternatives;
  const auto& seconds = run.alternative_seconds;
  for (std::size_t i = 0; i < list.size(); ++i) record[list[i].label + "_seconds"] = seconds[i];
  for (std::size_t i = 1; i < list.size(); ++i) {
    record[list[i].label + "_vs_" + list[0].label] = seconds[i] / seconds[0];
  }
  if (run.int8_peak) {
    record["int8_peak_gops"] = run.int8_peak->gflops;
    record["cpu_int8_peak_gops"] = run.int8_peak->cpu_gflops;
  }
}

// Null rather than infinity when nothing is kept: JSON has no infinity.
nlohmann::ordered_json ratio_to_ideal(double sparse, double dense, double density) {
  return density > 0.0 ? nlohmann::ordered_json(sparse / (dense * density))
                       : nlohmann::ordered_json(nullptr);
}

void report_dense(const BenchOptions& options, const BenchSetup& setup, const BenchRun& run,
                  Report& report) {
  nlohmann::ordered_json& record = report.record;
  const Timing& dense = *run.dense;
  const double density = run.plan.stats().density;
  const double dense_pairs = static_cast<double>(options.q_len) * static_cast<double>(setup.kv_len);
  const double dense_gflops = flops_per_pair(options) * dense_pairs / dense.seconds * 1e-9;
  record["dense_seconds"] = dense.seconds;
  record["dense_gflops"] = dense_gflops;
  record["dense_efficiency"] = run.peak > 0.0 ? dense_gflops / run.peak : 0.0;
  record["speedup_vs_dense"] = dense.seconds / run.seconds;
  record["sparse_vs_ideal"] = ratio_to_ideal(run.seconds, dense.seconds, density);
  if (run.timing) {
    record["dense_cpu_seconds"] = dense.cpu_seconds;
    record["cpu_sparse_vs_ideal"] =
        ratio_to_ideal(run.timing->cpu_seconds, dense.cpu_seconds, density);
  }
}

Report bench_report(const BenchOptions& options, const BenchSetup& setup, const BenchRun& run) {
  Report report;
  report_setup(options, setup, report);
  report_speed(options, setup, run, report);
  report_alternatives(run, report);
  if (run.dense) report_dense(options, setup, run, report);
  return report;
}

void run_bench(const BenchOptions& options) {
  const BenchSetup setup = resolve(options);
  emit(bench_report(options, setup, run(options, setup)), table_or_json(options.json), std::cout);
}

constexpr const char* kBenchFooter =
    "Reports the median of --repeats runs after one warm-up run: gflops counts 4 * head_dim\n"
    "flops per kept pair per head, efficiency is gflops / peak_gflops (the multiply-add\n"
    "peak measured in this process, before and after the timed runs, the higher kept),\n"
    "sparse_vs_ideal is seconds / (dense_seconds * density); load_average is the\n"
    "machine's one-minute load when the result was taken. The cpu_* figures are the\n"
    "same from CPU time (the process's, per thread; the peak loop's, per worker):\n"
    "on a loaded machine they stay near what a quiet one gives.\n"
    "product_path and product_path_reason say how bf16 was multiplied and why,\n"
    "qk_product and pv_product what each product ran on; with --precision int8,\n"
    "efficiency is still against the input dtype's peak (int8_peak_gops beside it).\n"
    "TILESPLASH_ISA=<name> in the environment forces a SIMD target;\n"
    "TILESPLASH_PRODUCT_PATH=dot|widen the bf16 product path.\n\n"
    "Examples:\n"
    "  tilesplash bench --mask causal --q-len 4096 --head-dim 128 --dtype f32\n"
    "  tilesplash bench --mask 'local:left=2048,right=2048' --q-len 16384 --head-dim 128 \\\n"
    "      --dtype bf16 --heads 2 --compare-dense --json\n"
    "  tilesplash bench --mask 'local:left=512,right=512' --q-len 16384 --head-dim 64 \\\n"
    "      --dtype bf16 --ablation mask\n"
    "  tilesplash bench --mask dense --q-len 8192 --head-dim 128 --dtype bf16 --threads 1 \\\n"
    "      --ablation product-path --json";

// What is attended: the mask, the shape and the dtype.
void add_workload_options(CLI::App& app, BenchOptions& options) {
  app.add_option("--mask", options.mask,
                 "Mask SPEC (see `tilesplash plan --help`), e.g. causal or\n"
                 "'local:left=256,right=256'")
      ->required()
      ->type_name("SPEC")
      ->check(mask_spec());
  app.add_option("--q-len", options.q_len, "Query sequence length")
      ->required()
      ->type_name("N")
      ->transform(integer_in(1, kMaxLength));
  app.add_option("--kv-len", options.kv_len, "Key/value sequence length (default: --q-len)")
      ->type_name("M")
      ->transform(integer_in(1, kMaxLength));
  add_head_dim_option(app, options.head_dim, "Head dimension")->required();
  add_dtype_option(app, options.dtype, "Input dtype")->required();
  app.add_option("--heads", options.heads, "Attention heads")
      ->type_name("H")
      ->capture_default_str()
      ->transform(integer_in(1, 65536));
}

// How the kernel runs it: threads, tiles, mask mode, precision, product path, variant.
void add_kernel_options(CLI::App& app, BenchOptions& options) {
  add_threads_option(app, options.threads);
  app.add_option("--block-q", options.block_q,
                 "Query rows per tile: " + kernel_limits::block_q_rule() +
                     " (default: the `tilesplash tune` choice\n"
                     "cached for this shape, else a heuristic)")
      ->type_name("BQ")
      ->transform(block_q_value());
  app.add_option("--block-kv", options.block_kv,
                 "Keys per tile: " + kernel_limits::block_kv_rule() + " (default: as --block-q)")
      ->type_name("BK")
      ->transform(block_kv_value());
  app.add_option("--mask-mode", options.mask_mode,
                 "tile (full tiles mask-free), element (mask predicate on every\n"
                 "pair) or bitmask (every visited tile bitmasked)")
      ->type_name("MODE")
      ->capture_default_str()
      ->check(mask_mode_name());
  add_precision_option(app, options.precision);
  app.add_option("--product-path", options.product_path,
                 "bf16 inputs: dot (the target's bf16 dot product), widen (to f32 for the\n"
                 "FMA) or auto (whichever this CPU runs faster, measured once and cached)")
      ->type_name("PATH")
      ->capture_default_str()
      ->check(product_path_name());
  app.add_option("--variant", options.variant,
                 "Kernel loop variant: rows6, rows12 or rows24 (query rows per pass over\n"
                 "a key panel), optionally +prefetch (default: the tuned one, else rows6)")
      ->type_name("V")
      ->check(kernel_variant_name());
  app.add_option("--ablation", options.ablation,
                 "Time alternatives interleaved on the same plan and data and report each\n"
                 "and its ratio to the first: mask (tile, element, bitmask), variant (every\n"
                 "kernel loop variant), product-path (dot, widen; bf16) or precision\n"
                 "(default, int8)")
      ->type_name("WHAT")
      ->check(CLI::IsMember(ablation_names()));
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* app = parent.add_subcommand(
      "bench", "Time the attention kernel on random data against the measured FMA peak");
  app->footer(kBenchFooter);
  add_workload_options(*app, *options);
  add_kernel_options(*app, *options);
  app->add_flag("--compare-dense", options->compare_dense,
                "Also time the dense mask on the same data and blocks");
  app->add_option("--repeats", options->repeats, "Timed runs; the median is reported")
      ->type_name("R")
      ->capture_default_str()
      ->transform(integer_in(1, 100000));
  app->add_option("--seed", options->seed, "Seed of the random Q, K, V")
      ->type_name("S")
      ->capture_default_str()
      ->transform(integer_in(0, std::numeric_limits<std::int64_t>::max()));
  app->add_flag("--json", options->json, "Print one JSON object instead of a table");

  return {app, [options] { run_bench(*options); }};
}

}  // namespace tilesplash::cli
