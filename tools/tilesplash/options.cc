#include "options.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>
#include <system_error>

#include "tilesplash/attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/mask_spec.h"
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

CLI::Validator dtype_name() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (parse_dtype(text)) return {};
        return fmt::format("expected f32, bf16 or f16, got '{}'", text);
      },
      "");
}

CLI::Validator mask_mode_name() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (parse_mask_mode(text)) return {};
        return fmt::format("expected tile, element or bitmask, got '{}'", text);
      },
      "");
}

}  // namespace tilesplash::cli
