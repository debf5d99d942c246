#include "kernel/isa_dispatch.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace tilesplash::kernel {

// Each target's translation unit defines <name>::target_ops().
#define TILESPLASH_TARGET(name, arch, features, flags) \
  namespace name {                                     \
  TargetOps target_ops();                              \
  }
#include "kernel/targets.def"
#undef TILESPLASH_TARGET

namespace {

// Whether targets of an arch column of targets.def are compiled in this build
// (CMake defines TILESPLASH_ARCH_X86 to match).
constexpr bool kArch_any = true;
constexpr bool kArch_x86 = TILESPLASH_ARCH_X86 != 0;

// One CPU feature by the name targets.def uses. __builtin_cpu_supports takes
// only string literals, hence the table.
bool cpu_has(const std::string& feature) {
#if TILESPLASH_EMULATE_AVX512
  // Test-only build: the avx512* targets run on SIMDe (cmake/TilesplashIsa.cmake).
  if (feature.starts_with("avx512")) return true;
#endif
#if TILESPLASH_ARCH_X86
  if (feature == "avx512bf16") return __builtin_cpu_supports("avx512bf16");
  if (feature == "avx512f") return __builtin_cpu_supports("avx512f");
  if (feature == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (feature == "avx512dq") return __builtin_cpu_supports("avx512dq");
  if (feature == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (feature == "avx2") return __builtin_cpu_supports("avx2");
  if (feature == "fma") return __builtin_cpu_supports("fma");
  if (feature == "f16c") return __builtin_cpu_supports("f16c");
#endif
  // A feature this table does not know is a mistake in targets.def, caught by
  // the dispatch test rather than silently treated as present.
  throw std::logic_error("targets.def names an unknown CPU feature '" + feature + "'");
}

bool cpu_has_all(const char* features) {
  std::istringstream words(features);
  std::string feature;
  while (words >> feature) {
    if (!cpu_has(feature)) return false;
  }
  return true;
}

struct TargetEntry {
  const char* name;
  const char* features;
  TargetOps ops;
};

// The compiled targets, best first. A target of another arch is left out:
// its branch below is discarded, so its (absent) symbol is never referenced.
const std::vector<TargetEntry>& target_table() {
  static const std::vector<TargetEntry> table = [] {
    std::vector<TargetEntry> entries;
#define TILESPLASH_TARGET(name, arch, features, flags)        \
  if constexpr (kArch_##arch) {                               \
    entries.push_back({#name, features, name::target_ops()}); \
  }
#include "kernel/targets.def"
#undef TILESPLASH_TARGET
    return entries;
  }();
  return table;
}

bool supported(const TargetEntry& entry) { return cpu_has_all(entry.features); }

// `source` names where the name came from ("isa" for set_isa(), the
// environment variable otherwise), so the message points at what to fix.
const TargetEntry* find_supported(const std::string& name, const std::string& source = "isa") {
  for (const TargetEntry& entry : target_table()) {
    if (name == entry.name) {
      if (!supported(entry)) {
        throw std::invalid_argument(source + ": this CPU does not support '" + name + "'");
      }
      return &entry;
    }
  }
  std::string known;
  for (const TargetEntry& entry : target_table())
    known += std::string(known.empty() ? "" : ", ") + entry.name;
  throw std::invalid_argument(source + ": unknown target '" + name +
                              "' (expected one of: " + known + ")");
}

const TargetEntry* best_supported() {
  if (const char* forced = std::getenv("TILESPLASH_ISA"); forced != nullptr && *forced != '\0') {
    return find_supported(forced, "TILESPLASH_ISA");
  }
  for (const TargetEntry& entry : target_table()) {
    if (supported(entry)) return &entry;
  }
  return &target_table().back();
}

std::atomic<const TargetEntry*> g_active{nullptr};
std::once_flag g_init;

const TargetEntry* active_entry() {
  std::call_once(g_init, [] {
    const TargetEntry* expected = nullptr;
    g_active.compare_exchange_strong(expected, best_supported());
  });
  return g_active.load();
}

}  // namespace

const TargetOps& active_target() { return active_entry()->ops; }

}  // namespace tilesplash::kernel

namespace tilesplash {

std::vector<std::string> available_isas() {
  std::vector<std::string> names;
  for (const auto& entry : kernel::target_table()) {
    if (kernel::supported(entry)) names.emplace_back(entry.name);
  }
  return names;
}

std::string active_isa() { return kernel::active_entry()->name; }

void set_isa(const std::string& name) {
  kernel::active_entry();  // finish automatic initialisation first
  kernel::g_active.store(name.empty() ? kernel::best_supported() : kernel::find_supported(name));
}

}  // namespace tilesplash
