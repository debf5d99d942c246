// Which CPUs this process may run on, and pinning a thread to one of them. The
// peak measurement pins each of its workers to its own core, so that two
// workers never share a core while another stands idle (an unpinned 2-thread
// peak once read a single core's worth).
#pragma once

#include <vector>

namespace tilesplash::runtime {

// The CPUs in this process's affinity mask, ascending; empty where the
// platform cannot tell.
std::vector<int> allowed_cpus();

// Pins the calling thread to `cpu`; false (and no change) where that fails or
// the platform has no affinity call.
bool pin_current_thread(int cpu);

}  // namespace tilesplash::runtime
