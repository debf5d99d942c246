// The one key=value reader of the SPEC language: the parameters of a mask
// term ("local:left=3,right=4", "spatial:preset=...,density=0.25,sink") and
// of a GEOM string (parse_video_geometry). Items are separated by commas;
// spaces around items, keys and values are ignored; an item without '=' is a
// bare flag. Every error names its context and the key:
// "<context>: '<key>' must be <expected>, got '<value>'". Internal: shared by
// the core families (mask_families.cc), the SPEC parser and the families
// registered with the methods (src/methods).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tilesplash::detail {

class SpecParams {
 public:
  struct Item {
    std::string key;
    std::optional<std::string> value;  // nullopt for a bare flag
    bool used = false;
  };

  // No parameters at all (a term written without ':').
  explicit SpecParams(std::string context) : context_(std::move(context)) {}

  // Splits "a=1, b=x ,flag". Throws std::invalid_argument("<context>: ...")
  // on an empty list or item, an empty key and a duplicate key.
  static SpecParams split(std::string_view text, std::string context);

  // True when the term had a parameter list (':' given).
  bool given() const { return given_; }
  const std::string& context() const { return context_; }

  bool has(std::string_view key) const;
  // A bare flag: true when present; an error when given a value.
  bool flag(std::string_view key);
  std::optional<std::string> text(std::string_view key);
  // Integers in [min, max]; `expected` completes "must be ..." in errors.
  std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max,
                                      const char* expected);
  std::optional<std::uint64_t> unsigned_integer(std::string_view key, const char* expected);
  // Finite numbers in [min, max], or (min, max] when min_open.
  std::optional<double> number(std::string_view key, double min, double max, bool min_open,
                               const char* expected);
  // Throws "missing '<key>' (<what>)" when the key is absent.
  void require(std::string_view key, const char* what) const;
  // Throws naming the first key not in `known`; call before reading values
  // so that a misspelt key is reported as such.
  void check_known(std::initializer_list<std::string_view> known, const char* expected) const {
    check_known(std::span<const std::string_view>(known.begin(), known.size()), expected);
  }
  void check_known(std::span<const std::string_view> known, const char* expected) const;
  // Throws naming the first key nothing asked for.
  void reject_unused(const char* expected) const;
  [[noreturn]] void fail(const std::string& message) const;

 private:
  Item* find(std::string_view key);

  std::string context_;
  std::vector<Item> items_;
  bool given_ = false;
};

}  // namespace tilesplash::detail
