#include "kernel/isa_dispatch.h"

#include <atomic>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel/target_list.h"

#if TILESPLASH_ARCH_X86
#include <cpuid.h>
#endif
#if TILESPLASH_ARCH_X86 && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if TILESPLASH_ARCH_AARCH64 && defined(__linux__)
#include <sys/auxv.h>
#define TILESPLASH_HAVE_GETAUXVAL 1
#else
#define TILESPLASH_HAVE_GETAUXVAL 0
#endif

namespace tilesplash::kernel {

// Each target's translation unit defines <name>::target_ops().
#define TILESPLASH_TARGET(name, arch, features, flags) \
  namespace name {                                     \
  TargetOps target_ops();                              \
  }
#include "kernel/targets.def"
#undef TILESPLASH_TARGET

namespace {

#if TILESPLASH_ARCH_X86
// Whether this process may use the AMX tiles the CPU reports
// (__builtin_cpu_supports only reads CPUID): the OS must enable the tile
// configuration and data state in XCR0 (bits 17 and 18), and Linux (5.16+)
// hands the 8 KiB of tile data to a process only after it asks, once, with
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); without that the first
// tile instruction faults. Asked once per process (the permission is the
// process's, for all its threads), under the static's initialisation lock.
bool amx_state_usable() {
  static const bool usable = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & bit_OSXSAVE) == 0) return false;
    unsigned xcr0_low = 0, xcr0_high = 0;
    __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
    constexpr unsigned kTileCfg = 1u << 17, kTileData = 1u << 18;
    if ((xcr0_low & (kTileCfg | kTileData)) != (kTileCfg | kTileData)) return false;
#if defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023;  // <asm/prctl.h>, not in every libc's headers
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return true;
#endif
  }();
  return usable;
}
#endif

// One CPU feature by the name targets.def uses, from this arch's table;
// nullopt for a name the table lacks.
std::optional<bool> arch_cpu_feature(const std::string& feature) {
#if TILESPLASH_ARCH_X86
  // __builtin_cpu_supports takes only string literals, hence the table.
  // CPUID first: the AMX state is probed (and Linux asked) only on a CPU with tiles.
  if (feature == "amx-tile") return __builtin_cpu_supports("amx-tile") && amx_state_usable();
  if (feature == "amx-bf16") return __builtin_cpu_supports("amx-bf16") && amx_state_usable();
  if (feature == "amx-int8") return __builtin_cpu_supports("amx-int8") && amx_state_usable();
  if (feature == "avx512bf16") return __builtin_cpu_supports("avx512bf16");
  if (feature == "avx512vnni") return __builtin_cpu_supports("avx512vnni");
  if (feature == "avxvnni") return __builtin_cpu_supports("avxvnni");
  if (feature == "avx512f") return __builtin_cpu_supports("avx512f");
  if (feature == "avx512bw") return __builtin_cpu_supports("avx512bw");
  if (feature == "avx512dq") return __builtin_cpu_supports("avx512dq");
  if (feature == "avx512vl") return __builtin_cpu_supports("avx512vl");
  if (feature == "avx2") return __builtin_cpu_supports("avx2");
  if (feature == "fma") return __builtin_cpu_supports("fma");
  if (feature == "f16c") return __builtin_cpu_supports("f16c");
#elif TILESPLASH_ARCH_AARCH64 && TILESPLASH_HAVE_GETAUXVAL
  // The names of /proc/cpuinfo's Features line, from the hardware capability
  // bits Linux puts in the auxiliary vector.
  const unsigned long hwcap = getauxval(AT_HWCAP);
  const unsigned long hwcap2 = getauxval(AT_HWCAP2);
  if (feature == "asimd") return (hwcap & HWCAP_ASIMD) != 0;
  if (feature == "asimdhp") return (hwcap & HWCAP_ASIMDHP) != 0;
  if (feature == "asimddp") return (hwcap & HWCAP_ASIMDDP) != 0;
  if (feature == "sve") return (hwcap & HWCAP_SVE) != 0;
  if (feature == "i8mm") return (hwcap2 & HWCAP2_I8MM) != 0;
  if (feature == "bf16") return (hwcap2 & HWCAP2_BF16) != 0;
#elif TILESPLASH_ARCH_AARCH64
  // No auxiliary vector (not Linux): NEON, which every AArch64 CPU has, and
  // nothing else, so the targets that need more are never chosen here.
  return feature == "asimd";
#endif
  return std::nullopt;
}

bool cpu_has(const std::string& feature) {
#if TILESPLASH_EMULATE_AVX512
  // Test-only build: the avx512* targets run on SIMDe
  // (cmake/TilesplashIsa.cmake). avx2vnni is compiled natively (-mavxvnni),
  // so it runs only where the CPU has AVX-VNNI: claiming it here made the
  // emulated tests execute VEX vpdpbusd on a Zen 4 (SIGILL).
  if (feature.starts_with("avx512")) return true;
#endif
  if (const std::optional<bool> has = arch_cpu_feature(feature)) return *has;
  // A feature this table does not know is a mistake in targets.def, caught by
  // the dispatch test rather than silently treated as present.
  throw std::logic_error("targets.def names an unknown CPU feature '" + feature + "'");
}

}  // namespace

std::vector<std::string> missing_cpu_features(const char* features) {
  std::vector<std::string> missing;
  std::istringstream words(features);
  std::string feature;
  while (words >> feature) {
    if (!cpu_has(feature)) missing.push_back(feature);
  }
  return missing;
}

namespace {

struct TargetEntry {
  const char* name;
  const char* features;
  TargetOps ops;
  const char* twin_of;  // test targets only (register_test_target), else null
};

// The compiled targets, best first. A target of another arch is left out:
// its branch below is discarded, so its (absent) symbol is never referenced.
const std::vector<TargetEntry>& target_table() {
  static const std::vector<TargetEntry> table = [] {
    std::vector<TargetEntry> entries;
#define TILESPLASH_TARGET(name, arch, features, flags)                 \
  if constexpr (kArch_##arch) {                                        \
    entries.push_back({#name, features, name::target_ops(), nullptr}); \
  }
#include "kernel/targets.def"
#undef TILESPLASH_TARGET
    return entries;
  }();
  return table;
}

// Test-only targets (register_test_target): a deque, so that the entries'
// addresses, which g_active holds, never move.
std::deque<TargetEntry>& test_table() {
  static std::deque<TargetEntry> table;
  return table;
}

bool supported(const TargetEntry& entry) { return missing_cpu_features(entry.features).empty(); }

// `source` names where the name came from ("isa" for set_isa(), the
// environment variable otherwise), so the message points at what to fix.
const TargetEntry* find_supported(const std::string& name, const std::string& source = "isa") {
  std::vector<const TargetEntry*> entries;
  for (const TargetEntry& entry : target_table()) entries.push_back(&entry);
  for (const TargetEntry& entry : test_table()) entries.push_back(&entry);
  for (const TargetEntry* candidate : entries) {
    const TargetEntry& entry = *candidate;
    if (name == entry.name) {
      if (!supported(entry)) {
        std::string missing;
        for (const std::string& feature : missing_cpu_features(entry.features)) {
          missing += " " + feature;
        }
        throw std::invalid_argument(source + ": this CPU does not support '" + name +
                                    "' (it lacks" + missing + ")");
      }
      return &entry;
    }
  }
  std::string known;
  for (const TargetEntry* entry : entries)
    known += std::string(known.empty() ? "" : ", ") + entry->name;
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

void register_test_target(const char* name, const char* twin_of, const char* features,
                          TargetOps ops) {
  test_table().push_back({name, features, ops, twin_of});
}

std::vector<TestTarget> test_targets() {
  std::vector<TestTarget> targets;
  for (const TargetEntry& entry : test_table())
    targets.push_back({entry.name, entry.twin_of, entry.features});
  return targets;
}

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
