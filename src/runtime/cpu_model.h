// The CPU's model name, read once: the CPU backend's device_name(), which
// tuning-cache keys record, so a cached choice follows the machine.
#pragma once

#include <string>

namespace tilesplash::runtime {

// /proc/cpuinfo's first "model name", trimmed; "unknown" where there is none.
const std::string& cpu_model();

}  // namespace tilesplash::runtime
