#include "report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <string>

namespace tilesplash::cli {
namespace {

std::string format_scalar(const nlohmann::ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  // Four significant digits: timings and ratios are noisy beyond that.
  if (value.is_number_float()) return fmt::format("{:.4g}", value.get<double>());
  return value.dump();
}

}  // namespace

void print_json(const nlohmann::ordered_json& record, std::ostream& out) {
  out << record.dump() << '\n';
}

void print_table(const nlohmann::ordered_json& record, std::ostream& out) {
  std::size_t width = 0;
  for (const auto& [key, value] : record.items()) {
    if (value.is_primitive()) width = std::max(width, key.size());
  }
  for (const auto& [key, value] : record.items()) {
    if (!value.is_primitive()) continue;
    out << fmt::format("{:<{}}  {}\n", key, width, format_scalar(value));
  }
}

}  // namespace tilesplash::cli
