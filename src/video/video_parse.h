// The `key=value,flag,...` lists of the video SPEC terms and the GEOM syntax.
// Internal: shared by parse_video_geometry() and the mask SPEC hook, so both
// report errors the same way ("<context>: '<key>' must be ..., got '...'").
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tilesplash/video.h"

namespace tilesplash::detail {

struct KeyValue {
  std::string key;
  std::optional<std::string> value;  // nullopt for a bare flag
  bool used = false;
};

class KeyValueList {
 public:
  KeyValueList(std::string context, std::vector<KeyValue> items)
      : context_(std::move(context)), items_(std::move(items)) {}

  bool has(std::string_view key) const;
  // A bare flag: true when present; an error when given a value.
  bool flag(std::string_view key);
  std::optional<std::string> text(std::string_view key);
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max,
                                      const char* expected);
  std::optional<double> number(std::string_view key, double min, double max, bool min_open,
                               const char* expected);
  // Throws naming the first key not in `known`; call before reading values so
  // that a misspelt key is reported as such.
  void check_known(std::initializer_list<std::string_view> known, const char* expected) const;
  // Throws naming the first key nothing asked for.
  void reject_unused(const char* expected) const;
  [[noreturn]] void fail(const std::string& message) const;

 private:
  KeyValue* find(std::string_view key);
  std::string context_;
  std::vector<KeyValue> items_;
};

// Splits "a=1, b=x ,flag" on commas; spaces around items, keys and values are
// ignored. Throws on empty items, empty keys or values and duplicate keys.
KeyValueList split_key_values(std::string_view text, std::string context);

// Consumes preset=NAME, or frames, height, width [, text, text_at]; validated.
VideoGeometry take_geometry(KeyValueList& items);

}  // namespace tilesplash::detail
