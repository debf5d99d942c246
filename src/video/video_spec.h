// The mask SPEC hooks for the video terms. The core SPEC parser hands the
// parameter text of a video term here whole, because these terms take bare
// flags (sink, text_full) that its key=value reader does not.
#pragma once

#include <optional>
#include <string_view>

#include "tilesplash/mask.h"

namespace tilesplash::detail {

// `name` is spatial or temporal, `params` the text after the ':' (nullopt
// without one): GEOM,BAND[,sink][,text_full] with GEOM
// preset=NAME or frames=F,height=h,width=w[,text=T,text_at=before|after] and
// BAND one of band=W, band_frames=M or density=S. Throws
// std::invalid_argument("mask spec: <name>: ...").
Mask parse_video_mask(std::string_view name, std::optional<std::string_view> params);

// `radial:GEOM,decay=D|density=S[,block=B][,sink]` (radial.h); density picks
// the decay whose mask comes closest to it.
Mask parse_radial_mask(std::string_view name, std::optional<std::string_view> params);

// `sta:GEOM,[tile=TTxTHxTW,]window=KTxKHxKW` (sta.h; tile defaults to 6x8x8).
Mask parse_sta_mask(std::string_view name, std::optional<std::string_view> params);

}  // namespace tilesplash::detail
