// Parsing of the video key/value lists; see video_parse.h.
#include "video/video_parse.h"

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

}  // namespace

void KeyValueList::fail(const std::string& message) const {
  throw std::invalid_argument(context_ + ": " + message);
}

KeyValue* KeyValueList::find(std::string_view key) {
  for (KeyValue& item : items_) {
    if (item.key == key) {
      item.used = true;
      return &item;
    }
  }
  return nullptr;
}

bool KeyValueList::has(std::string_view key) const {
  for (const KeyValue& item : items_) {
    if (item.key == key) return true;
  }
  return false;
}

bool KeyValueList::flag(std::string_view key) {
  const KeyValue* item = find(key);
  if (item == nullptr) return false;
  if (item->value) {
    fail("'" + std::string(key) + "' is a flag and takes no value, got '" + std::string(key) + "=" +
         *item->value + "'");
  }
  return true;
}

std::optional<std::string> KeyValueList::text(std::string_view key) {
  const KeyValue* item = find(key);
  if (item == nullptr) return std::nullopt;
  if (!item->value)
    fail("'" + std::string(key) + "' needs a value ('" + std::string(key) + "=...')");
  return *item->value;
}

std::optional<std::int64_t> KeyValueList::integer(std::string_view key, std::int64_t min,
                                                  std::int64_t max, const char* expected) {
  const std::optional<std::string> value = text(key);
  if (!value) return std::nullopt;
  std::int64_t parsed = 0;
  const char* end = value->data() + value->size();
  const auto [ptr, ec] = std::from_chars(value->data(), end, parsed);
  if (ec != std::errc() || ptr != end || parsed < min || parsed > max) {
    fail("'" + std::string(key) + "' must be " + expected + ", got '" + *value + "'");
  }
  return parsed;
}

std::optional<double> KeyValueList::number(std::string_view key, double min, double max,
                                           bool min_open, const char* expected) {
  const std::optional<std::string> value = text(key);
  if (!value) return std::nullopt;
  double parsed = 0.0;
  const char* end = value->data() + value->size();
  const auto [ptr, ec] = std::from_chars(value->data(), end, parsed);
  const bool above = min_open ? parsed > min : parsed >= min;
  if (ec != std::errc() || ptr != end || !std::isfinite(parsed) || !above || parsed > max) {
    fail("'" + std::string(key) + "' must be " + expected + ", got '" + *value + "'");
  }
  return parsed;
}

void KeyValueList::check_known(std::initializer_list<std::string_view> known,
                               const char* expected) const {
  for (const KeyValue& item : items_) {
    bool found = false;
    for (const std::string_view key : known) found = found || item.key == key;
    if (!found) fail("unknown key '" + item.key + "' (expected " + expected + ")");
  }
}

void KeyValueList::reject_unused(const char* expected) const {
  for (const KeyValue& item : items_) {
    if (!item.used) fail("unknown key '" + item.key + "' (expected " + expected + ")");
  }
}

KeyValueList split_key_values(std::string_view text, std::string context) {
  std::vector<KeyValue> items;
  const auto bad = [&context](const std::string& message) {
    throw std::invalid_argument(context + ": " + message);
  };
  if (trim(text).empty()) bad("empty parameter list");
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = trim(text.substr(start, comma - start));
    if (item.empty()) bad("empty item in '" + std::string(text) + "'");
    KeyValue kv;
    const std::size_t eq = item.find('=');
    kv.key = std::string(trim(item.substr(0, eq)));
    if (eq != std::string_view::npos) kv.value = std::string(trim(item.substr(eq + 1)));
    if (kv.key.empty()) bad("missing key in '" + std::string(item) + "'");
    if (kv.value && kv.value->empty()) bad("missing value for '" + kv.key + "'");
    for (const KeyValue& seen : items) {
      if (seen.key == kv.key) bad("duplicate key '" + kv.key + "'");
    }
    items.push_back(std::move(kv));
    start = comma + 1;
  }
  return KeyValueList(std::move(context), std::move(items));
}

VideoGeometry take_geometry(KeyValueList& items) {
  constexpr std::int64_t kMax = std::int64_t{1} << 31;
  if (const std::optional<std::string> preset = items.text("preset")) {
    for (const char* key : {"frames", "height", "width", "text", "text_at"}) {
      if (items.has(key)) {
        items.fail(std::string("'") + key + "' cannot be combined with 'preset' (give either " +
                   "preset=NAME or frames, height, width [, text, text_at])");
      }
    }
    try {
      return video_preset(*preset).geometry;
    } catch (const std::invalid_argument& e) {
      items.fail(e.what());
    }
  }
  VideoGeometry geometry;
  const char* positive = "an integer in [1, 2^31)";
  const auto required = [&](const char* key) {
    const std::optional<std::int64_t> value = items.integer(key, 1, kMax - 1, positive);
    if (!value) {
      items.fail(std::string("missing '") + key +
                 "' (give preset=NAME or frames=F,height=h,width=w)");
    }
    return *value;
  };
  geometry.frames = required("frames");
  geometry.height = required("height");
  geometry.width = required("width");
  geometry.text = items.integer("text", 0, kMax - 1, "an integer in [0, 2^31)").value_or(0);
  if (const std::optional<std::string> at = items.text("text_at")) {
    if (*at == "before") {
      geometry.text_at = TextPlacement::kBefore;
    } else if (*at == "after") {
      geometry.text_at = TextPlacement::kAfter;
    } else if (*at == "none") {
      geometry.text_at = TextPlacement::kNone;
    } else {
      items.fail("'text_at' must be before, after or none, got '" + *at + "'");
    }
  } else if (geometry.text > 0) {
    items.fail("'text=" + std::to_string(geometry.text) +
               "' needs 'text_at=before' or 'text_at=after'");
  }
  try {
    geometry.validate();
  } catch (const std::invalid_argument& e) {
    // validate() already says "video geometry: "; the list adds its own context.
    constexpr std::string_view kPrefix = "video geometry: ";
    std::string_view message = e.what();
    if (message.substr(0, kPrefix.size()) == kPrefix) message.remove_prefix(kPrefix.size());
    items.fail(std::string(message));
  }
  return geometry;
}

}  // namespace tilesplash::detail
