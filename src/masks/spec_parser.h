// The grammar of the mask SPEC language, apart from its families:
//   expr   := term ('|' term)*
//   term   := factor ('&' factor)*
//   factor := '(' expr ')' | atom
//   atom   := name [':' params]
// where params run to the next | & ( or ) and are read by the one key=value
// reader (spec_params.h). Which names exist, and what their parameters
// mean, is the families' business: the core ones are below, the video
// method families register in src/methods/registry.cc, and
// parse_mask_spec() (src/methods/spec.cc) hands this parser both. Internal.
#pragma once

#include <span>
#include <string_view>

#include "masks/spec_params.h"
#include "tilesplash/mask.h"

namespace tilesplash::detail {

// One family of the SPEC language. `params` has context "mask spec: <name>"
// and given() false when the term has no ':'.
struct SpecFamily {
  std::string_view name;
  Mask (*parse)(SpecParams& params) = nullptr;
};

// dense, causal, local, chunked, random, keys: the families of mask.h.
std::span<const SpecFamily> core_spec_families();

// Throws std::invalid_argument("mask spec: ...") on malformed input; the
// "unknown mask" error lists `families` in their order.
Mask parse_spec(std::string_view text, std::span<const SpecFamily> families);

}  // namespace tilesplash::detail
