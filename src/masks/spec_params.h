// The key=value parameters of one SPEC atom, as the core reader splits them,
// and the family table entry type. Internal to the SPEC parser and the
// families that register in src/masks/mask_families.cc.
#pragma once

#include <charconv>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "tilesplash/mask.h"

namespace tilesplash::detail {

[[noreturn]] inline void spec_fail(const std::string& message) {
  throw std::invalid_argument("mask spec: " + message);
}

struct Param {
  std::string key;
  std::string value;
  bool used = false;
};

// The parameters of one atom, checked against what its mask accepts.
class Params {
 public:
  Params(std::string mask, std::vector<Param> params)
      : mask_(std::move(mask)), params_(std::move(params)) {}

  // Every key must be one of `allowed` ("left, right or offset" names them).
  void check_keys(std::initializer_list<const char*> allowed, const char* expected) const {
    for (const Param& p : params_) {
      bool known = false;
      for (const char* key : allowed) known |= p.key == key;
      if (!known) spec_fail(mask_ + ": unknown key '" + p.key + "' (expected " + expected + ")");
    }
  }

  const Param* find(const char* key) const {
    for (const Param& p : params_) {
      if (p.key == key) return &p;
    }
    return nullptr;
  }

  const Param& require(const char* key, const char* what) const {
    const Param* p = find(key);
    if (!p) spec_fail(mask_ + ": missing '" + key + "' (" + what + ")");
    return *p;
  }

  std::int64_t integer(const Param& p, std::int64_t min, const char* expected) const {
    std::int64_t value = 0;
    const char* begin = p.value.data();
    const char* end = begin + p.value.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    if (p.value.empty() || ec != std::errc() || ptr != end || value < min) {
      spec_fail(mask_ + ": '" + p.key + "' must be " + expected + ", got '" + p.value + "'");
    }
    return value;
  }

  std::uint64_t unsigned_integer(const Param& p) const {
    std::uint64_t value = 0;
    const char* begin = p.value.data();
    const char* end = begin + p.value.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    if (p.value.empty() || ec != std::errc() || ptr != end) {
      spec_fail(mask_ + ": '" + p.key + "' must be an integer in [0, 2^64), got '" + p.value + "'");
    }
    return value;
  }

  double probability(const Param& p) const {
    double value = 0.0;
    const char* begin = p.value.data();
    const char* end = begin + p.value.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    if (p.value.empty() || ec != std::errc() || ptr != end || !(value >= 0.0 && value <= 1.0)) {
      spec_fail(mask_ + ": '" + p.key + "' must be a number in [0, 1], got '" + p.value + "'");
    }
    return value;
  }

 private:
  std::string mask_;
  std::vector<Param> params_;
};

// One mask family of the SPEC language. Exactly one of the two parsers is
// set: `from_params` gets the atom's key=value pairs as the core reader split
// them; `from_text` gets the raw text after ':' (up to the next | & ( or ),
// nullopt without a ':'), for families that take bare flags.
struct MaskFamily {
  std::string_view name;
  Mask (*from_params)(const Params& params) = nullptr;
  Mask (*from_text)(std::string_view name, std::optional<std::string_view> text) = nullptr;
};

// Every family, in the order error messages list them; null when unknown.
const MaskFamily* find_mask_family(std::string_view name);

}  // namespace tilesplash::detail
