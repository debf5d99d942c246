// The GEOM part of a SPEC term or of parse_video_geometry(): preset=NAME, or
// frames, height, width [, text, text_at], read through the one key=value
// reader (masks/spec_params.h) so both report errors alike. Internal.
#pragma once

#include <initializer_list>
#include <string_view>

#include "masks/spec_params.h"
#include "tilesplash/video.h"

namespace tilesplash::detail {

// check_known() for a video family's term: the GEOM keys and the family's
// own; `expected` lists them all for the message.
void check_video_keys(const SpecParams& params, std::initializer_list<std::string_view> own,
                      const char* expected);

// Consumes preset=NAME, or frames, height, width [, text, text_at]; validated.
VideoGeometry take_geometry(SpecParams& params);

}  // namespace tilesplash::detail
