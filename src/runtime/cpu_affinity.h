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

// Pins the calling thread to `cpu` while it lives, then gives the thread back
// the CPUs it had: the peak measurement pins the threads of a context that
// outlives it (the calling thread among them).
class ScopedPin {
 public:
  explicit ScopedPin(int cpu);
  ~ScopedPin();
  ScopedPin(const ScopedPin&) = delete;
  ScopedPin& operator=(const ScopedPin&) = delete;

 private:
  std::vector<int> previous_;  // empty: nothing to give back
};

}  // namespace tilesplash::runtime
