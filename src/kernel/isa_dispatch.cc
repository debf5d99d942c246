#include "kernel/isa_dispatch.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace tilesplash::kernel {

#if TILESPLASH_HAVE_X86_ISAS
namespace avx512bf16 {
void forward(const ForwardParams&, Workspace&, runtime::ThreadPool&);
}
namespace avx512 {
void forward(const ForwardParams&, Workspace&, runtime::ThreadPool&);
}
namespace avx2 {
void forward(const ForwardParams&, Workspace&, runtime::ThreadPool&);
}
#endif
namespace generic {
void forward(const ForwardParams&, Workspace&, runtime::ThreadPool&);
}

namespace {

struct IsaEntry {
  const char* name;
  bool (*supported)();
  ForwardFn forward;
};

// Best first.
const std::vector<IsaEntry>& isa_table() {
  static const std::vector<IsaEntry> table = {
#if TILESPLASH_HAVE_X86_ISAS
    {"avx512bf16",
     [] {
       return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
              __builtin_cpu_supports("avx512bf16");
     },
     &avx512bf16::forward},
    {"avx512",
     [] {
       return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
     },
     &avx512::forward},
    {"avx2",
     [] {
       return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              __builtin_cpu_supports("f16c");
     },
     &avx2::forward},
#endif
    {"generic", [] { return true; }, &generic::forward},
  };
  return table;
}

// `source` names where the name came from ("isa" for set_isa(), the
// environment variable otherwise), so the message points at what to fix.
const IsaEntry* find_supported(const std::string& name, const std::string& source = "isa") {
  for (const IsaEntry& entry : isa_table()) {
    if (name == entry.name) {
      if (!entry.supported()) {
        throw std::invalid_argument(source + ": this CPU does not support '" + name + "'");
      }
      return &entry;
    }
  }
  std::string known;
  for (const IsaEntry& entry : isa_table())
    known += std::string(known.empty() ? "" : ", ") + entry.name;
  throw std::invalid_argument(source + ": unknown target '" + name +
                              "' (expected one of: " + known + ")");
}

const IsaEntry* best_supported() {
  if (const char* forced = std::getenv("TILESPLASH_ISA"); forced != nullptr && *forced != '\0') {
    return find_supported(forced, "TILESPLASH_ISA");
  }
  for (const IsaEntry& entry : isa_table()) {
    if (entry.supported()) return &entry;
  }
  return &isa_table().back();
}

std::atomic<const IsaEntry*> g_active{nullptr};
std::once_flag g_init;

const IsaEntry* active_entry() {
  std::call_once(g_init, [] {
    const IsaEntry* expected = nullptr;
    g_active.compare_exchange_strong(expected, best_supported());
  });
  return g_active.load();
}

}  // namespace

ForwardFn active_forward() { return active_entry()->forward; }

}  // namespace tilesplash::kernel

namespace tilesplash {

std::vector<std::string> available_isas() {
  std::vector<std::string> names;
  for (const auto& entry : kernel::isa_table()) {
    if (entry.supported()) names.emplace_back(entry.name);
  }
  return names;
}

std::string active_isa() { return kernel::active_entry()->name; }

void set_isa(const std::string& name) {
  kernel::active_entry();  // finish automatic initialisation first
  kernel::g_active.store(name.empty() ? kernel::best_supported() : kernel::find_supported(name));
}

}  // namespace tilesplash
