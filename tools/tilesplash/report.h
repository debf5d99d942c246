// One report shape, one emitter. Every subcommand resolves its options, runs,
// and fills a Report: an ordered JSON record (what --json prints, exactly
// one JSON document for scripts) and the sections people read, each rendered
// from that same record, so the two outputs cannot drift apart. emit() is
// the one place that prints either.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "tilesplash/fields.h"

namespace tilesplash::cli {

// How a command's report is printed: --json, the table, or nothing (--quiet).
enum class Format { kTable, kJson, kNone };

// Renders part of the table form from the record.
using Section = std::function<void(const nlohmann::ordered_json& record, std::ostream& out)>;

struct Report {
  nlohmann::ordered_json record;
  // The table form, in order; empty means the record's scalar table alone.
  std::vector<Section> sections;
};

// --json or the table.
inline Format table_or_json(bool json) { return json ? Format::kJson : Format::kTable; }

// Prints `report` in `format`: the record as one line of JSON, or each section.
void emit(const Report& report, Format format, std::ostream& out);

// Sections: the record's scalar fields as "key  value" rows with the values
// aligned (arrays and objects are left to other sections), and an empty line.
void scalar_table(const nlohmann::ordered_json& record, std::ostream& out);
void blank_line(const nlohmann::ordered_json& record, std::ostream& out);

// The library's named values (plan_fields, head_fields) as a JSON object, in
// order: a NaN number becomes null, NamedNumbers an object.
nlohmann::ordered_json to_json(const Fields& fields);

// A number, or null when it is not finite (no value).
nlohmann::ordered_json number_or_null(double value);

}  // namespace tilesplash::cli
