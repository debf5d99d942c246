#pragma once

namespace tilesplash {
inline constexpr const char* kVersion = "0.1.0";
}
