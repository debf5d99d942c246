// The CLI's error-target options; see error_target_options.h.
#include "error_target_options.h"

#include <stdexcept>
#include <vector>

#include "head_png.h"
#include "options.h"

namespace tilesplash::cli {
namespace {

double parse_number(const std::string& text, const char* flag, const char* expected) {
  try {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(std::string(flag) + ": expected " + expected + ", got '" + text +
                              "'");
}

std::vector<double> parse_ladder(const std::string& text) {
  std::vector<std::string> parts(1);
  for (const char c : text) {
    if (c == ',') {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  std::vector<double> ladder;
  for (const std::string& part : parts) {
    ladder.push_back(parse_number(part, "--densities", "numbers in (0, 1] separated by commas"));
  }
  check_density_ladder(ladder, "--densities");
  return ladder;
}

}  // namespace

void add_error_target_options(CLI::App& app, ErrorTargetOptions& options, bool with_png) {
  app.add_option("--error", options.error,
                 "Error target: each head runs the least dense candidate of the ladder whose\n"
                 "sampled relative L2 error against dense is <= E (docs/masks.md)")
      ->type_name("E")
      ->check(non_empty("a relative L2 error > 0"));
  app.add_option("--densities", options.densities,
                 "With --error: the density ladder (default 0.05,0.1,0.15,0.25,0.4)")
      ->type_name("D,...")
      ->check(non_empty("numbers in (0, 1] separated by commas"));
  app.add_flag("--bands", options.bands,
               "Workload of band heads (spatial-band, temporal-band; 3% to 40% of the keys)");
  if (!with_png) return;
  app.add_option("--png", options.png,
                 "Write a picture of every head: density, mask family, sampled error")
      ->type_name("PATH")
      ->check(non_empty("a file path"));
}

std::optional<ErrorTarget> error_target(const ErrorTargetOptions& options) {
  if (options.error.empty()) {
    if (!options.densities.empty()) {
      throw std::invalid_argument("--densities: a density ladder applies with --error only");
    }
    return std::nullopt;
  }
  ErrorTarget target;
  target.error = parse_number(options.error, "--error", "a relative L2 error > 0");
  check_error_target(target.error, "--error");
  if (!options.densities.empty()) target.densities = parse_ladder(options.densities);
  return target;
}

WorkloadOptions error_target_workload(const ErrorTargetOptions& options, std::int64_t heads,
                                      std::uint64_t seed, WorkloadOptions plain) {
  if (!options.bands) return plain;
  WorkloadOptions bands = planted_band_options(heads, seed);
  bands.head_dim = plain.head_dim;
  bands.dtype = plain.dtype;
  bands.threads = plain.threads;
  return bands;
}

void report_error_target(const ErrorTargetOptions& options, const LayerReport& report,
                         nlohmann::ordered_json& record) {
  double density = 0.0, error = 0.0;
  std::int64_t routed = 0, missed = 0;
  for (const HeadReport& head : report.heads) {
    density += head.density;
    if (head.routed) {
      ++routed;
      error += head.error;
      missed += head.target_met ? 0 : 1;
    }
  }
  const auto heads = static_cast<double>(std::max<std::size_t>(1, report.heads.size()));
  record["error_target"] = report.heads.empty() || options.error.empty()
                               ? nlohmann::ordered_json(nullptr)
                               : nlohmann::ordered_json(std::stod(options.error));
  record["mean_density"] = density / heads;
  record["mean_error"] = routed > 0 ? nlohmann::ordered_json(error / static_cast<double>(routed))
                                    : nlohmann::ordered_json(nullptr);
  record["target_missed"] = missed;
  if (!options.png.empty()) {
    write_png(options.png, render_head_choices(report));
    record["png"] = options.png;
  }
}

}  // namespace tilesplash::cli
