// Option validators shared by the subcommands. They run while CLI11 parses,
// so a bad value is reported as "--option: expected ..., got '...'" before
// any work starts.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>

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

// Mask SPEC, dtype name and mask-mode name, checked with the library's parsers.
CLI::Validator mask_spec();
CLI::Validator dtype_name();
CLI::Validator mask_mode_name();

}  // namespace tilesplash::cli
