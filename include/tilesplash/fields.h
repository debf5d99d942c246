// Named values: the one shape in which the library's reports leave it.
// plan_fields() (video_plan.h) and head_fields() (routing.h) return them;
// the CLI's JSON and tables and the Python dicts are renderings of the same
// lists, so what one front end prints the others cannot drift from. A NaN
// double means "no value" (JSON null, Python None).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tilesplash {

// A value per name, in order, e.g. every candidate's sampled MSE.
using NamedNumbers = std::vector<std::pair<std::string, double>>;

using FieldValue = std::variant<std::int64_t, double, std::string, bool, NamedNumbers>;

using Fields = std::vector<std::pair<std::string, FieldValue>>;

}  // namespace tilesplash
