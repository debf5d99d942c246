// The SPEC key=value reader; see spec_params.h.
#include "masks/spec_params.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <system_error>

namespace tilesplash::detail {
namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

template <typename T>
bool parse_whole(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return !text.empty() && ec == std::errc() && ptr == end;
}

}  // namespace

SpecParams SpecParams::split(std::string_view text, std::string context) {
  SpecParams params(std::move(context));
  params.given_ = true;
  if (trim(text).empty()) params.fail("expected key=value (empty parameter list)");
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = trim(text.substr(start, comma - start));
    if (item.empty()) {
      params.fail("expected key=value (empty item in '" + std::string(trim(text)) + "')");
    }
    Item parsed;
    const std::size_t eq = item.find('=');
    parsed.key = std::string(trim(item.substr(0, eq)));
    if (eq != std::string_view::npos) parsed.value = std::string(trim(item.substr(eq + 1)));
    if (parsed.key.empty()) {
      params.fail("expected key=value (missing key in '" + std::string(item) + "')");
    }
    for (const Item& seen : params.items_) {
      if (seen.key == parsed.key) params.fail("duplicate key '" + parsed.key + "'");
    }
    params.items_.push_back(std::move(parsed));
    start = comma + 1;
  }
  return params;
}

void SpecParams::fail(const std::string& message) const {
  throw std::invalid_argument(context_ + ": " + message);
}

SpecParams::Item* SpecParams::find(std::string_view key) {
  for (Item& item : items_) {
    if (item.key == key) {
      item.used = true;
      return &item;
    }
  }
  return nullptr;
}

bool SpecParams::has(std::string_view key) const {
  for (const Item& item : items_) {
    if (item.key == key) return true;
  }
  return false;
}

bool SpecParams::flag(std::string_view key) {
  const Item* item = find(key);
  if (item == nullptr) return false;
  if (item->value) {
    fail("'" + std::string(key) + "' is a flag and takes no value, got '" + std::string(key) + "=" +
         *item->value + "'");
  }
  return true;
}

std::optional<std::string> SpecParams::text(std::string_view key) {
  const Item* item = find(key);
  if (item == nullptr) return std::nullopt;
  if (!item->value) {
    const std::string k(key);
    fail("expected '=' after '" + k + "' ('" + k + "' needs a value, " + k + "=...)");
  }
  return *item->value;
}

std::optional<std::int64_t> SpecParams::integer(std::string_view key, std::int64_t min,
                                                std::int64_t max, const char* expected) {
  const std::optional<std::string> value = text(key);
  if (!value) return std::nullopt;
  std::int64_t parsed = 0;
  if (!parse_whole(*value, parsed) || parsed < min || parsed > max) {
    fail("'" + std::string(key) + "' must be " + expected + ", got '" + *value + "'");
  }
  return parsed;
}

std::optional<std::uint64_t> SpecParams::unsigned_integer(std::string_view key,
                                                          const char* expected) {
  const std::optional<std::string> value = text(key);
  if (!value) return std::nullopt;
  std::uint64_t parsed = 0;
  if (!parse_whole(*value, parsed)) {
    fail("'" + std::string(key) + "' must be " + expected + ", got '" + *value + "'");
  }
  return parsed;
}

std::optional<double> SpecParams::number(std::string_view key, double min, double max,
                                         bool min_open, const char* expected) {
  const std::optional<std::string> value = text(key);
  if (!value) return std::nullopt;
  double parsed = 0.0;
  const bool ok = parse_whole(*value, parsed);
  const bool above = min_open ? parsed > min : parsed >= min;
  if (!ok || !std::isfinite(parsed) || !above || parsed > max) {
    fail("'" + std::string(key) + "' must be " + expected + ", got '" + *value + "'");
  }
  return parsed;
}

void SpecParams::require(std::string_view key, const char* what) const {
  if (!has(key)) fail("missing '" + std::string(key) + "' (" + what + ")");
}

void SpecParams::check_known(std::span<const std::string_view> known, const char* expected) const {
  for (const Item& item : items_) {
    bool found = false;
    for (const std::string_view key : known) found = found || item.key == key;
    if (!found) fail("unknown key '" + item.key + "' (expected " + expected + ")");
  }
}

void SpecParams::reject_unused(const char* expected) const {
  for (const Item& item : items_) {
    if (!item.used) fail("unknown key '" + item.key + "' (expected " + expected + ")");
  }
}

}  // namespace tilesplash::detail
