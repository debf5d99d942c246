// Option validators and option groups shared by the subcommands. Validators
// run while CLI11 parses, so a bad value is reported as "--option: expected
// ..., got '...'" before any work starts; a group adds the same options,
// with the same names, checks and help texts, to every command that takes
// them.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>
#include <string>

#include "tilesplash/video.h"

namespace tilesplash::cli {

// Largest sequence length accepted: the plan stores kv-block indices in 32 bits.
inline constexpr std::int64_t kMaxLength = std::numeric_limits<std::int32_t>::max();

// A decimal integer in [lo, hi] that is a multiple of `multiple`. Rewrites the
// text to canonical decimal so that CLI11's own conversion (strtoll base 0,
// which reads "010" as octal) sees exactly what was checked.
CLI::Validator integer_in(std::int64_t lo, std::int64_t hi, std::int64_t multiple = 1);

// A finite decimal number in [lo, hi], or (lo, hi] when lo_open; hi may be
// infinity for "no upper bound". NaN and Inf are refused (CLI11's Range and
// PositiveNumber let NaN through), and the text is rewritten to the shortest
// form of the value checked.
CLI::Validator number_in(double lo, double hi, bool lo_open = false);

// Anything but the empty string: an option given as "" must not silently mean
// "not given" (e.g. --route "" running dense).
CLI::Validator non_empty(const char* expected);

// The kernel's limits (tilesplash/kernel_limits.h) as option validators.
CLI::Validator head_dim_value();
CLI::Validator block_q_value();
CLI::Validator block_kv_value();

// Mask SPEC, dtype name, mask-mode name and method name, checked with the
// library's parsers and its registry of methods.
CLI::Validator mask_spec();
CLI::Validator dtype_name();
CLI::Validator mask_mode_name();
CLI::Validator method_name();
// Precision, product path and kernel variant names (tilesplash/attention_args.h).
CLI::Validator precision_name();
CLI::Validator product_path_name();
CLI::Validator kernel_variant_name();

// ---- option groups -------------------------------------------------------

// --preset NAME / --geometry GEOM, resolved by the library's one rule
// (choose_video_shape): at most one of them; neither gives `fallback`, or an
// error when it is empty.
struct ShapeOptions {
  std::string preset;
  std::string geometry;
  std::string fallback;
  VideoShape resolve() const;
};
void add_shape_options(CLI::App& app, ShapeOptions& options);

// --method NAME, one of the registered methods (tilesplash/methods.h).
CLI::Option* add_method_option(CLI::App& app, std::string& method, const std::string& prefix = "");

// --heads H: heads of the synthetic workload to generate and run.
CLI::Option* add_heads_option(CLI::App& app, std::int64_t& heads);

// --density S: the target density of every mask, in (0, 1].
CLI::Option* add_density_option(CLI::App& app, double& density, const std::string& what);

// --block-q BQ / --block-kv BK with the kernel's limits; their defaults shown.
void add_tile_options(CLI::App& app, std::int64_t& block_q, std::int64_t& block_kv);

// --threads T (default: all hardware threads).
CLI::Option* add_threads_option(CLI::App& app, std::int64_t& threads);

// --seed N.
CLI::Option* add_seed_option(CLI::App& app, std::uint64_t& seed, const std::string& what);

// --head-dim D with the kernel's limits.
CLI::Option* add_head_dim_option(CLI::App& app, std::int64_t& head_dim, const std::string& what);

// --dtype DTYPE (f32, bf16, f16).
CLI::Option* add_dtype_option(CLI::App& app, std::string& dtype, const std::string& what);

// --precision default|int8: the kernel's products (Precision, attention_args.h).
CLI::Option* add_precision_option(CLI::App& app, std::string& precision);
// --compensate: skipped tiles approximated by their mean key and value
// (AttentionOptions::compensate, VideoAttentionOptions::compensate).
CLI::Option* add_compensate_option(CLI::App& app, bool& compensate);

// --samples R: query rows the router samples per call; 0 (the default):
// default_router_samples() of the geometry.
CLI::Option* add_samples_option(CLI::App& app, std::int64_t& samples);
// The rows the router samples for --samples R on this geometry (R, or the rule
// for 0): what the JSON reports.
std::int64_t samples_in_use(std::int64_t samples, const VideoGeometry& geometry);

// --repeats R: timed runs after an untimed one; medians.
CLI::Option* add_repeats_option(CLI::App& app, std::int64_t& repeats, const std::string& what);

// Help text blocks: every preset ("  NAME  model (N tokens, H heads x D)"),
// every method ("  NAME  summary"), and the SPEC language's synopsis.
std::string presets_text();
std::string methods_text();
std::string spec_synopsis();

}  // namespace tilesplash::cli
