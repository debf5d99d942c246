// One record, two renderings: the subcommands fill an ordered JSON object and
// print it either as exactly one JSON document (for scripts) or as an aligned
// key/value table (for people), so the two outputs cannot drift apart.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "tilesplash/fields.h"

namespace tilesplash::cli {

// The library's named values (plan_fields, head_fields) as a JSON object, in
// order: a NaN number becomes null, NamedNumbers an object.
nlohmann::ordered_json to_json(const Fields& fields);

// A number, or null when it is not finite (no value).
nlohmann::ordered_json number_or_null(double value);

// Prints `record` as one line of JSON.
void print_json(const nlohmann::ordered_json& record, std::ostream& out);

// Prints the scalar fields of `record` as "key  value" rows with the values
// aligned; arrays and objects are left to the caller.
void print_table(const nlohmann::ordered_json& record, std::ostream& out);

}  // namespace tilesplash::cli
