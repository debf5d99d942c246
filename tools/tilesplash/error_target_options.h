// The CLI's error-target options (`route` and `demo`: --error, --densities,
// --bands, --png), kept apart from the commands so that each command adds
// them in a few lines: parsing into the front-door options (routing.h's
// ladder), the band workload, and the report fields and picture.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tilesplash/routing.h"
#include "tilesplash/workload.h"

namespace tilesplash::cli {

struct ErrorTargetOptions {
  std::string error;      // empty: unset (route by --density)
  std::string densities;  // the ladder with --error, comma-separated; empty: the default
  bool bands = false;     // the band workload (planted_band_options) instead of the default
  std::string png;        // the picture of every head's choice (head_png.h)
};

// with_png: also --png (route; demo has its own --png directory).
void add_error_target_options(CLI::App& app, ErrorTargetOptions& options, bool with_png = true);

// --error and --densities as the core's error target (nullopt without
// --error), for method_attention_options(), which sets the ladder up.
// Throws std::invalid_argument naming the flag.
std::optional<ErrorTarget> error_target(const ErrorTargetOptions& options);

// The workload of `heads` heads: planted_band_options() with --bands, else `plain`.
WorkloadOptions error_target_workload(const ErrorTargetOptions& options, std::int64_t heads,
                                      std::uint64_t seed, WorkloadOptions plain);

// error_target, mean_density, mean_error (over routed heads), target_missed,
// and png (after writing it) into `record`.
void report_error_target(const ErrorTargetOptions& options, const LayerReport& report,
                         nlohmann::ordered_json& record);

}  // namespace tilesplash::cli
