#include "report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

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

nlohmann::ordered_json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::ordered_json(value) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json to_json(const Fields& fields) {
  nlohmann::ordered_json record = nlohmann::ordered_json::object();
  for (const auto& [key, value] : fields) {
    record[key] = std::visit(
        [](const auto& v) -> nlohmann::ordered_json {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, double>) {
            return number_or_null(v);
          } else if constexpr (std::is_same_v<T, NamedNumbers>) {
            nlohmann::ordered_json named = nlohmann::ordered_json::object();
            for (const auto& [name, number] : v) named[name] = number_or_null(number);
            return named;
          } else {
            return v;
          }
        },
        value);
  }
  return record;
}

void scalar_table(const nlohmann::ordered_json& record, std::ostream& out) {
  std::size_t width = 0;
  for (const auto& [key, value] : record.items()) {
    if (value.is_primitive()) width = std::max(width, key.size());
  }
  for (const auto& [key, value] : record.items()) {
    if (!value.is_primitive()) continue;
    out << fmt::format("{:<{}}  {}\n", key, width, format_scalar(value));
  }
}

void blank_line(const nlohmann::ordered_json&, std::ostream& out) { out << '\n'; }

void emit(const Report& report, Format format, std::ostream& out) {
  if (format == Format::kJson) {
    out << report.record.dump() << '\n';
  } else if (format == Format::kTable) {
    if (report.sections.empty()) scalar_table(report.record, out);
    for (const Section& section : report.sections) section(report.record, out);
  }
}

}  // namespace tilesplash::cli
