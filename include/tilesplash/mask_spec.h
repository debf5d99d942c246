// The mask SPEC language shared by the CLI and the bindings:
//   dense | causal | causal:offset=K | local:left=L,right=R[,offset=K]
//   chunked:size=C | random:density=D,seed=S
//   spatial:GEOM,BAND[,sink][,text_full] | temporal:GEOM,BAND[,sink][,text_full]
// (video masks, see video.h: GEOM is preset=NAME or frames=F,height=h,width=w
// [,text=T,text_at=before|after]; BAND is band=W, band_frames=M or density=S)
// joined with '|' (OR) and '&' (AND); '&' binds tighter than '|'. A side of
// local may be omitted (unbounded). Parentheses group, so that an OR inside an
// AND (which Mask::to_string prints bracketed) parses back. Errors name the
// offending part.
#pragma once

#include <string_view>
#include <vector>

#include "tilesplash/mask.h"

namespace tilesplash {

// Throws std::invalid_argument("mask spec: ...") on any malformed input.
Mask parse_mask_spec(std::string_view spec);

// The family names the parser knows ("dense", "causal", ..., "temporal"), in
// the order of its error messages. Families register in one table.
std::vector<std::string_view> mask_spec_names();

}  // namespace tilesplash
