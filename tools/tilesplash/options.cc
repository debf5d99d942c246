#include "options.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>
#include <system_error>

#include "names.h"
#include "tilesplash/attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/methods.h"
#include "tilesplash/routing.h"
#include "tilesplash/tensor.h"

namespace tilesplash::cli {
namespace {

std::string describe_range(std::int64_t lo, std::int64_t hi, std::int64_t multiple) {
  if (multiple > 1) return fmt::format("a multiple of {} from {} to {}", multiple, lo, hi);
  return fmt::format("an integer from {} to {}", lo, hi);
}

std::string describe_interval(double lo, double hi, bool lo_open) {
  if (std::isinf(hi)) return fmt::format("a finite number {} {}", lo_open ? ">" : ">=", lo);
  return fmt::format("a number in {}{}, {}]", lo_open ? "(" : "[", lo, hi);
}

// A name that `parse` accepts; "expected <expected>, got '...'" otherwise.
template <typename Parse>
CLI::Validator name_in(Parse parse, std::string expected) {
  return CLI::Validator(
      [parse, expected](std::string& text) -> std::string {
        if (parse(text)) return {};
        return fmt::format("expected {}, got '{}'", expected, text);
      },
      "");
}

}  // namespace

CLI::Validator head_dim_value() {
  return integer_in(kernel_limits::kMinHeadDim, kernel_limits::kMaxHeadDim,
                    kernel_limits::kHeadDimMultiple);
}

CLI::Validator block_q_value() { return integer_in(1, kernel_limits::kMaxBlockQ); }

CLI::Validator block_kv_value() {
  return integer_in(kernel_limits::kBlockKvMultiple, kernel_limits::kMaxBlockKv,
                    kernel_limits::kBlockKvMultiple);
}

CLI::Validator number_in(double lo, double hi, bool lo_open) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0.0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        const bool above = lo_open ? value > lo : value >= lo;
        if (ec != std::errc() || ptr != end || !std::isfinite(value) || !above || value > hi) {
          return fmt::format("expected {}, got '{}'", describe_interval(lo, hi, lo_open), text);
        }
        text = fmt::format("{}", value);
        return {};
      },
      "");
}

CLI::Validator non_empty(const char* expected) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        if (!text.empty()) return {};
        return fmt::format("expected {}, got ''", expected);
      },
      "");
}

CLI::Validator integer_in(std::int64_t lo, std::int64_t hi, std::int64_t multiple) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::int64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec != std::errc() || ptr != end || value < lo || value > hi || value % multiple != 0) {
          return fmt::format("expected {}, got '{}'", describe_range(lo, hi, multiple), text);
        }
        text = std::to_string(value);
        return {};
      },
      "");
}

CLI::Validator mask_spec() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          parse_mask_spec(text);
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
        return {};
      },
      "");
}

CLI::Validator dtype_name() { return name_in(parse_dtype, or_list(names_of(kDTypes))); }

CLI::Validator mask_mode_name() { return name_in(parse_mask_mode, or_list(names_of(kMaskModes))); }

CLI::Validator precision_name() { return name_in(parse_precision, or_list(names_of(kPrecisions))); }

CLI::Validator product_path_name() {
  return name_in(parse_product_path, or_list(names_of(kProductPaths)));
}

CLI::Validator kernel_variant_name() {
  return name_in(parse_kernel_variant, "rows6, rows12 or rows24, optionally with +prefetch");
}

CLI::Validator method_name() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        for (const MethodInfo& method : methods()) {
          if (method.name == text) return {};
        }
        return fmt::format("unknown method '{}' (expected {})", text, method_list_text());
      },
      "");
}

VideoShape ShapeOptions::resolve() const {
  return choose_video_shape(preset, geometry, fallback, "--preset", "--geometry");
}

void add_shape_options(CLI::App& app, ShapeOptions& options) {
  app.add_option("--preset", options.preset,
                 options.fallback.empty()
                     ? std::string("Model shape (see Presets below)")
                     : fmt::format("Model shape (see Presets below; default {})", options.fallback))
      ->type_name("NAME")
      ->check(non_empty("a preset name"));
  app.add_option("--geometry", options.geometry,
                 "Custom shape instead of --preset: frames=F,height=h,width=w\n"
                 "[,text=T,text_at=before|after]")
      ->type_name("GEOM")
      ->check(non_empty("frames=F,height=h,width=w"));
}

CLI::Option* add_method_option(CLI::App& app, std::string& method, const std::string& prefix) {
  return app
      .add_option("--method", method,
                  prefix + "Masks the heads run: " + method_list_text() +
                      "\n(see Methods below; docs/masks.md)")
      ->type_name("NAME")
      ->capture_default_str()
      ->check(method_name());
}

CLI::Option* add_heads_option(CLI::App& app, std::int64_t& heads) {
  return app.add_option("--heads", heads, "Heads to generate and run")
      ->type_name("H")
      ->capture_default_str()
      ->transform(integer_in(1, 4096));
}

CLI::Option* add_density_option(CLI::App& app, double& density, const std::string& what) {
  return app.add_option("--density", density, what + ", in (0, 1]")
      ->type_name("S")
      ->capture_default_str()
      ->transform(number_in(0.0, 1.0, true));
}

void add_tile_options(CLI::App& app, std::int64_t& block_q, std::int64_t& block_kv) {
  app.add_option("--block-q", block_q, "Query rows per tile: " + kernel_limits::block_q_rule())
      ->type_name("BQ")
      ->capture_default_str()
      ->transform(block_q_value());
  app.add_option("--block-kv", block_kv, "Keys per tile: " + kernel_limits::block_kv_rule())
      ->type_name("BK")
      ->capture_default_str()
      ->transform(block_kv_value());
}

CLI::Option* add_precision_option(CLI::App& app, std::string& precision) {
  return app
      .add_option("--precision", precision,
                  "default (products in the input dtype) or int8 (8-bit Q.K^T, opt-in:\n"
                  "K smoothed, Q and K quantized per token / 64-key block, int32 sums)")
      ->type_name("P")
      ->capture_default_str()
      ->check(precision_name());
}

CLI::Option* add_compensate_option(CLI::App& app, bool& compensate) {
  return app.add_flag("--compensate", compensate,
                      "Approximate the tiles the plan skips instead of dropping them: each\n"
                      "adds its keys through their mean key and value (docs/masks.md)");
}

CLI::Option* add_threads_option(CLI::App& app, std::int64_t& threads) {
  return app.add_option("--threads", threads, "Worker threads (default: all hardware threads)")
      ->type_name("T")
      ->transform(integer_in(1, 4096));
}

CLI::Option* add_seed_option(CLI::App& app, std::uint64_t& seed, const std::string& what) {
  return app.add_option("--seed", seed, what)
      ->type_name("N")
      ->capture_default_str()
      ->transform(integer_in(0, std::numeric_limits<std::int64_t>::max()));
}

CLI::Option* add_head_dim_option(CLI::App& app, std::int64_t& head_dim, const std::string& what) {
  return app.add_option("--head-dim", head_dim, what + ": " + kernel_limits::head_dim_rule())
      ->type_name("D")
      ->transform(head_dim_value());
}

CLI::Option* add_dtype_option(CLI::App& app, std::string& dtype, const std::string& what) {
  return app.add_option("--dtype", dtype, what + ": " + or_list(names_of(kDTypes)))
      ->type_name("DTYPE")
      ->check(dtype_name());
}

CLI::Option* add_samples_option(CLI::App& app, std::int64_t& samples) {
  return app
      .add_option("--samples", samples,
                  "Query rows the router samples per call; 0: one per 1,024 video tokens, "
                  "from 16 to 64 (default_router_samples, docs/masks.md)")
      ->type_name("R")
      ->capture_default_str()
      ->transform(integer_in(0, 1 << 20));
}

std::int64_t samples_in_use(std::int64_t samples, const VideoGeometry& geometry) {
  return samples > 0 ? samples : default_router_samples(geometry.video_range().size());
}

CLI::Option* add_repeats_option(CLI::App& app, std::int64_t& repeats, const std::string& what) {
  return app.add_option("--repeats", repeats, what)
      ->type_name("R")
      ->capture_default_str()
      ->transform(integer_in(1, 1000));
}

std::string presets_text() {
  std::string text = "Presets:\n";
  for (const VideoPreset& preset : video_presets()) {
    text += fmt::format("  {:<18} {} ({} tokens, {} heads x {})\n", preset.name, preset.model,
                        preset.geometry.tokens(), preset.heads, preset.head_dim);
  }
  return text;
}

std::string methods_text() {
  std::string text = "Methods:\n";
  for (const MethodInfo& method : methods()) {
    text += fmt::format("  {:<9} {}\n", method.name, method.summary);
  }
  return text;
}

std::string spec_synopsis() {
  std::string text =
      "Mask SPEC: dense | causal[:offset=K] | local:left=L,right=R[,offset=K] |\n"
      "chunked:size=C | random:density=D,seed=S";
  for (const MethodInfo& method : methods()) {
    if (method.spec) text += " |\n" + std::string(method.spec_syntax);
  }
  return text +
         "\n(GEOM: preset=NAME or frames=F,height=h,width=w[,text=T,text_at=before|after]),\n"
         "joined with | (or) and & (and, binds tighter), parentheses allowed";
}

}  // namespace tilesplash::cli
