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

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

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
Timing median_timing(AttentionRunner& runner, const TilePlan& plan, const AttentionArgs& args,
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

std::vector<Alternative> ablation_alternatives(const std::string& what,
                                               const AttentionOptions& base, DType dtype) {
  std::vector<Alternative> list;
  const auto add = [&](std::string label, auto&& change) {
    AttentionOptions options = base;
    change(options);
    list.push_back({std::move(label), options});
  };
  if (what == "mask") {
    for (const MaskMode mode : {MaskMode::kTile, MaskMode::kElement, MaskMode::kBitmask}) {
      add(std::string(to_string(mode)), [&](AttentionOptions& o) { o.mask_mode = mode; });
    }
  } else if (what == "variant") {
    for (const KernelVariant& variant : kernel_variants()) {
      add(to_string(variant), [&](AttentionOptions& o) { o.variant = variant; });
    }
  } else if (what == "product-path") {
    if (dtype != DType::kBF16) {
      throw std::invalid_argument("--ablation product-path: needs --dtype bf16, got " +
                                  std::string(to_string(dtype)));
    }
    // Refused (naming the target) where there is no dot product to compare.
    for (const ProductPath path : {ProductPath::kDot, ProductPath::kWiden}) {
      choose_product_path(path);
      add(std::string(to_string(path)), [&](AttentionOptions& o) { o.product_path = path; });
    }
  } else {  // precision
    for (const Precision precision : {Precision::kDefault, Precision::kInt8}) {
      add(std::string(to_string(precision)), [&](AttentionOptions& o) { o.precision = precision; });
    }
  }
  return list;
}

// Median wall seconds of each alternative, in list order.
std::vector<double> time_alternatives(AttentionRunner& runner, const TilePlan& plan,
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

void run_bench(const BenchOptions& options) {
  const std::int64_t kv_len = options.kv_len > 0 ? options.kv_len : options.q_len;
  const DType dtype = *parse_dtype(options.dtype);
  // One threading context for the whole command: workload, runners, peak.
  const auto context = std::make_shared<ThreadingContext>(static_cast<int>(options.threads));
  const int threads = context->threads();
  check_fits_in_memory(options, kv_len, dtype);

  const Mask mask = parse_mask_spec(options.mask);
  const Precision precision = *parse_precision(options.precision);
  const ProductPath product_path = *parse_product_path(options.product_path);
  // Before anything is timed: a forced path the target lacks is an error, and
  // a first calibration (about 50 ms) happens here rather than in a timing.
  const ProductPathChoice path_choice = choose_product_path(product_path);
  std::string block_source = "given";
  std::string variant_source = "given";
  BlockSizes blocks{options.block_q, options.block_kv};
  KernelVariant variant;
  if (!options.variant.empty()) variant = *parse_kernel_variant(options.variant);
  if (blocks.block_q == 0 || blocks.block_kv == 0 || options.variant.empty()) {
    const BlockChoice choice =
        choose_blocks(mask, options.q_len, kv_len, options.head_dim, dtype, threads, precision);
    const std::string from = choice.from_cache ? "cache" : "heuristic";
    if (blocks.block_q == 0 || blocks.block_kv == 0) {
      block_source =
          std::string(options.block_q != 0 || options.block_kv != 0 ? "given+" : "") + from;
    }
    if (blocks.block_q == 0) blocks.block_q = choice.blocks.block_q;
    if (blocks.block_kv == 0) blocks.block_kv = choice.blocks.block_kv;
    if (options.variant.empty()) {
      variant = choice.variant;
      variant_source = choice.from_cache ? "cache" : "default";
    }
  }
  const TilePlan plan = TilePlan::build(mask, options.q_len, kv_len, blocks);

  std::mt19937_64 rng(options.seed);
  const std::int64_t d = options.head_dim;
  const RandomTensor q(dtype, options.heads, options.q_len, d, rng);
  const RandomTensor k(dtype, options.heads, kv_len, d, rng);
  const RandomTensor v(dtype, options.heads, kv_len, d, rng);
  std::vector<float> out(static_cast<std::size_t>(options.heads * options.q_len * d));
  const AttentionArgs args{
      q.view(), k.view(), v.view(),
      MutableTensorView::contiguous(out.data(), DType::kF32, options.heads, options.q_len, d)};

  AttentionOptions attention;
  attention.mask_mode = *parse_mask_mode(options.mask_mode);
  attention.threads = threads;
  attention.precision = precision;
  attention.product_path = product_path;
  attention.variant = variant;

  // The peak is measured before and after the timed runs and the higher one
  // kept: a peak is an upper bound, and another process on the machine can
  // spoil either measurement but rarely both.
  const PeakMeasurement before = measure_peak(dtype, threads, 0.2, context.get(), product_path);

  AttentionRunner runner(context);
  std::vector<Alternative> alternatives;
  std::vector<double> alternative_seconds;
  std::optional<Timing> timing;
  if (!options.ablation.empty()) {
    alternatives = ablation_alternatives(options.ablation, attention, dtype);
    alternative_seconds = time_alternatives(runner, plan, args, alternatives, options.repeats);
  } else {
    timing = median_timing(runner, plan, args, attention, options.repeats);
  }
  // Under an ablation, the alternative the other options select (else the first).
  std::size_t selected = 0;
  for (std::size_t i = 0; i < alternatives.size(); ++i) {
    const AttentionOptions& o = alternatives[i].options;
    if (o.mask_mode == attention.mask_mode && o.variant == attention.variant &&
        o.precision == attention.precision && o.product_path == attention.product_path) {
      selected = i;
    }
  }
  const double seconds = timing ? timing->seconds : alternative_seconds[selected];
  const PeakMeasurement after = measure_peak(dtype, threads, 0.2, context.get(), product_path);
  const double peak = std::max(before.gflops, after.gflops);
  const double cpu_peak = std::max(before.cpu_gflops, after.cpu_gflops);
  const PlanStats& stats = plan.stats();
  const double flops_per_pair = 4.0 * static_cast<double>(d) * static_cast<double>(options.heads);
  const double gflops = flops_per_pair * static_cast<double>(stats.kept_pairs) / seconds * 1e-9;

  nlohmann::ordered_json record;
  record["mask"] = mask.to_string();
  record["q_len"] = options.q_len;
  record["kv_len"] = kv_len;
  record["heads"] = options.heads;
  record["head_dim"] = d;
  record["dtype"] = std::string(to_string(dtype));
  record["block_q"] = blocks.block_q;
  record["block_kv"] = blocks.block_kv;
  record["blocks_from"] = block_source;
  record["mask_mode"] = std::string(to_string(attention.mask_mode));
  record["threads"] = threads;
  record["isa"] = active_isa();
  record["precision"] = std::string(to_string(precision));
  // Which bf16 product path ran and why (the calibration's rates when measured).
  record["product_path"] =
      dtype == DType::kBF16 ? std::string(to_string(path_choice.path)) : std::string("fma");
  record["product_path_reason"] =
      dtype == DType::kBF16 ? path_choice.reason
                            : std::string(to_string(dtype)) + " inputs run on the f32 FMA";
  if (path_choice.dot_gflops > 0.0) {
    record["calibration_dot_gflops"] = path_choice.dot_gflops;
    record["calibration_fma_gflops"] = path_choice.fma_gflops;
  }
  const KernelProducts products = kernel_products(dtype, precision, path_choice.path);
  record["qk_product"] = products.qk;
  record["pv_product"] = products.pv;
  record["variant"] = to_string(variant);
  record["variant_from"] = variant_source;
  record["repeats"] = options.repeats;
  record["kept_pairs"] = stats.kept_pairs;
  record["density"] = stats.density;
  record["seconds"] = seconds;
  record["gflops"] = gflops;
  record["peak_gflops"] = peak;
  record["peak_gflops_per_thread"] = peak / threads;
  record["efficiency"] = peak > 0.0 ? gflops / peak : 0.0;
  if (timing) {
    const double cpu_gflops =
        flops_per_pair * static_cast<double>(stats.kept_pairs) / timing->cpu_seconds * 1e-9;
    record["cpu_seconds"] = timing->cpu_seconds;
    record["cpu_gflops"] = cpu_gflops;
    record["cpu_peak_gflops"] = cpu_peak;
    record["cpu_efficiency"] = cpu_peak > 0.0 ? cpu_gflops / cpu_peak : 0.0;
  }
  // Runnable processes, averaged over the last minute (against the cores the
  // machine has): timings on a loaded machine are slower, so every result
  // says how loaded it was.
  double load[1] = {0.0};
  if (getloadavg(load, 1) == 1) record["load_average"] = load[0];

  // Each alternative's median seconds and its ratio to the first
  // ("element_vs_tile": element seconds / tile seconds).
  for (std::size_t i = 0; i < alternatives.size(); ++i) {
    record[alternatives[i].label + "_seconds"] = alternative_seconds[i];
  }
  for (std::size_t i = 1; i < alternatives.size(); ++i) {
    record[alternatives[i].label + "_vs_" + alternatives[0].label] =
        alternative_seconds[i] / alternative_seconds[0];
  }
  if (precision == Precision::kInt8 || options.ablation == "precision") {
    const PeakMeasurement int8_peak = measure_int8_peak(threads, 0.2, context.get());
    record["int8_peak_gops"] = int8_peak.gflops;
    record["cpu_int8_peak_gops"] = int8_peak.cpu_gflops;
  }

  if (options.compare_dense) {
    // The dense baseline runs in tile mode: all of its tiles are full, so it
    // is the mask-free ideal that a sparse run should scale down from.
    const TilePlan dense = TilePlan::build(Mask::dense(), options.q_len, kv_len, blocks);
    AttentionOptions dense_attention = attention;
    dense_attention.mask_mode = MaskMode::kTile;
    const Timing dense_timing =
        median_timing(runner, dense, args, dense_attention, options.repeats);
    const double dense_seconds = dense_timing.seconds;
    const double dense_pairs = static_cast<double>(options.q_len) * static_cast<double>(kv_len);
    record["dense_seconds"] = dense_seconds;
    record["dense_gflops"] = flops_per_pair * dense_pairs / dense_seconds * 1e-9;
    record["dense_efficiency"] = peak > 0.0 ? record["dense_gflops"].get<double>() / peak : 0.0;
    record["speedup_vs_dense"] = dense_seconds / seconds;
    // Null rather than infinity when nothing is kept: JSON has no infinity.
    record["sparse_vs_ideal"] =
        stats.density > 0.0 ? nlohmann::ordered_json(seconds / (dense_seconds * stats.density))
                            : nlohmann::ordered_json(nullptr);
    if (timing) {
      record["dense_cpu_seconds"] = dense_timing.cpu_seconds;
      record["cpu_sparse_vs_ideal"] =
          stats.density > 0.0 ? nlohmann::ordered_json(timing->cpu_seconds /
                                                       (dense_timing.cpu_seconds * stats.density))
                              : nlohmann::ordered_json(nullptr);
    }
  }

  if (options.json) {
    print_json(record, std::cout);
  } else {
    print_table(record, std::cout);
  }
}

}  // namespace

Command add_bench_command(CLI::App& parent) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* app = parent.add_subcommand(
      "bench", "Time the attention kernel on random data against the measured FMA peak");
  app->footer(
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
      "      --ablation product-path --json");

  app->add_option("--mask", options->mask,
                  "Mask SPEC (see `tilesplash plan --help`), e.g. causal or\n"
                  "'local:left=256,right=256'")
      ->required()
      ->type_name("SPEC")
      ->check(mask_spec());
  app->add_option("--q-len", options->q_len, "Query sequence length")
      ->required()
      ->type_name("N")
      ->transform(integer_in(1, kMaxLength));
  app->add_option("--kv-len", options->kv_len, "Key/value sequence length (default: --q-len)")
      ->type_name("M")
      ->transform(integer_in(1, kMaxLength));
  add_head_dim_option(*app, options->head_dim, "Head dimension")->required();
  add_dtype_option(*app, options->dtype, "Input dtype")->required();
  app->add_option("--heads", options->heads, "Attention heads")
      ->type_name("H")
      ->capture_default_str()
      ->transform(integer_in(1, 65536));
  add_threads_option(*app, options->threads);
  app->add_option("--block-q", options->block_q,
                  "Query rows per tile: " + kernel_limits::block_q_rule() +
                      " (default: the `tilesplash tune` choice\n"
                      "cached for this shape, else a heuristic)")
      ->type_name("BQ")
      ->transform(block_q_value());
  app->add_option("--block-kv", options->block_kv,
                  "Keys per tile: " + kernel_limits::block_kv_rule() + " (default: as --block-q)")
      ->type_name("BK")
      ->transform(block_kv_value());
  app->add_option("--mask-mode", options->mask_mode,
                  "tile (full tiles mask-free), element (mask predicate on every\n"
                  "pair) or bitmask (every visited tile bitmasked)")
      ->type_name("MODE")
      ->capture_default_str()
      ->check(mask_mode_name());
  add_precision_option(*app, options->precision);
  app->add_option("--product-path", options->product_path,
                  "bf16 inputs: dot (the target's bf16 dot product), widen (to f32 for the\n"
                  "FMA) or auto (whichever this CPU runs faster, measured once and cached)")
      ->type_name("PATH")
      ->capture_default_str()
      ->check(product_path_name());
  app->add_option("--variant", options->variant,
                  "Kernel loop variant: rows6, rows12 or rows24 (query rows per pass over\n"
                  "a key panel), optionally +prefetch (default: the tuned one, else rows6)")
      ->type_name("V")
      ->check(kernel_variant_name());
  app->add_option("--ablation", options->ablation,
                  "Time alternatives interleaved on the same plan and data and report each\n"
                  "and its ratio to the first: mask (tile, element, bitmask), variant (every\n"
                  "kernel loop variant), product-path (dot, widen; bf16) or precision\n"
                  "(default, int8)")
      ->type_name("WHAT")
      ->check(CLI::IsMember({"mask", "variant", "product-path", "precision"}));
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
