// The core families of the SPEC language, the masks of mask.h: each a name
// and a parser of its key=value list. The video method families register
// beside their methods (src/methods/registry.cc), above this layer.
#include <array>
#include <cstdint>
#include <limits>
#include <optional>

#include "masks/spec_parser.h"

namespace tilesplash::detail {
namespace {

constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

Mask parse_dense(SpecParams& params) {
  params.check_known({}, "no parameters");
  return Mask::dense();
}

Mask parse_causal(SpecParams& params) {
  params.check_known({"offset"}, "offset");
  return Mask::causal(params.integer("offset", kMin, kMax, "an integer").value_or(0));
}

Mask parse_local(SpecParams& params) {
  params.check_known({"left", "right", "offset"}, "left, right or offset");
  const std::optional<std::int64_t> left = params.integer("left", 0, kMax, "an integer >= 0");
  const std::optional<std::int64_t> right = params.integer("right", 0, kMax, "an integer >= 0");
  const std::int64_t offset = params.integer("offset", kMin, kMax, "an integer").value_or(0);
  return Mask::local(left, right, offset);
}

Mask parse_chunked(SpecParams& params) {
  params.check_known({"size"}, "size");
  params.require("size", "the chunk length, an integer >= 1");
  return Mask::chunked_causal(*params.integer("size", 1, kMax, "an integer >= 1"));
}

Mask parse_keys(SpecParams& params) {
  params.check_known({"begin", "end"}, "begin or end");
  params.require("end", "the end of the kept keys, an integer >= 0");
  const std::int64_t begin = params.integer("begin", 0, kMax, "an integer >= 0").value_or(0);
  return Mask::key_range(begin, *params.integer("end", 0, kMax, "an integer >= 0"));
}

Mask parse_random(SpecParams& params) {
  params.check_known({"density", "seed"}, "density or seed");
  params.require("density", "a number in [0, 1]");
  const double density = *params.number("density", 0.0, 1.0, false, "a number in [0, 1]");
  const std::uint64_t seed = params.unsigned_integer("seed", "an integer in [0, 2^64)").value_or(0);
  return Mask::random(density, seed);
}

constexpr std::array kFamilies = {
    SpecFamily{"dense", parse_dense},   SpecFamily{"causal", parse_causal},
    SpecFamily{"local", parse_local},   SpecFamily{"chunked", parse_chunked},
    SpecFamily{"random", parse_random}, SpecFamily{"keys", parse_keys},
};

}  // namespace

std::span<const SpecFamily> core_spec_families() { return kFamilies; }

}  // namespace tilesplash::detail
