// choose_product_path(): whether bf16 inputs go through the target's bf16 dot
// product or are widened to f32 for the FMA units, decided by measuring both
// peak loops on this CPU rather than by its CPUID. A Zen 4 runs vdpbf16ps at
// twice its f32 FMA rate (one 512-bit operation per cycle either way, two
// multiply-adds per lane for the dot product); a Sapphire Rapids has two
// 512-bit FMA ports but one slower BF16 unit, so the dot product runs at half
// the FMA rate there. The rates are kept in the tuning cache per CPU model and
// target; the decision is remade from them (so a changed threshold applies to
// old entries).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "io/json_cache.h"
#include "kernel/isa_dispatch.h"
#include "runtime/cpu_model.h"
#include "tilesplash/attention.h"

namespace tilesplash {
namespace {

// The dot product must beat the FMA by this much: its kernel spends a larger
// share on the softmax (the products take half the time), and a tie is not
// worth the bf16 rounding of the probabilities.
constexpr double kDotAdvantage = 1.1;

struct Rates {
  double dot = 0.0;  // GFLOP/s, one core
  double fma = 0.0;
  bool cached = false;  // read from the cache file rather than measured now
};

using Clock = std::chrono::steady_clock;

volatile float g_sink = 0.0f;

// Best-of-windows rate of a loop (GFLOP/s), the two loops alternating so that
// a burst of load from other processes hits both.
Rates measure(const kernel::TargetOps& ops) {
  const auto rounds_for = [](const kernel::FmaLoop& loop) {
    constexpr std::int64_t kProbe = 1 << 12;
    g_sink = g_sink + loop.run(kProbe);  // warm-up: vector units and clock up
    const auto start = Clock::now();
    g_sink = g_sink + loop.run(kProbe);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    constexpr double kWindow = 2e-3;
    return std::clamp<std::int64_t>(
        static_cast<std::int64_t>(kProbe * kWindow / std::max(seconds, 1e-9)), 1024,
        std::int64_t{1} << 28);
  };
  const kernel::FmaLoop* loops[2] = {&ops.bf16_peak, &ops.f32_peak};
  const std::int64_t rounds[2] = {rounds_for(ops.bf16_peak), rounds_for(ops.f32_peak)};
  double best[2] = {0.0, 0.0};
  constexpr int kWindows = 8;
  for (int w = 0; w < kWindows; ++w) {
    for (int i = 0; i < 2; ++i) {
      const auto start = Clock::now();
      g_sink = g_sink + loops[i]->run(rounds[i]);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      best[i] = std::max(best[i], static_cast<double>(rounds[i]) * loops[i]->flops_per_round /
                                      std::max(seconds, 1e-9) * 1e-9);
    }
  }
  return {best[0], best[1], false};
}

std::string cache_key(const std::string& isa) {
  return "product-path|cpu=" + runtime::cpu_model() + "|isa=" + isa;
}

std::optional<Rates> read_cached(const io::JsonCache& cache, const std::string& key) {
  const std::optional<nlohmann::json> entry = cache.entry(key);
  if (!entry) return std::nullopt;
  const auto rate = [&](const char* name) {
    return entry->is_object() && entry->contains(name) && (*entry)[name].is_number()
               ? (*entry)[name].get<double>()
               : -1.0;
  };
  const Rates rates{rate("bf16_dot_gflops"), rate("f32_fma_gflops"), true};
  if (!(rates.dot > 0.0 && rates.fma > 0.0 && std::isfinite(rates.dot) &&
        std::isfinite(rates.fma))) {
    io::warn_once("tuning cache " + cache.path().string() + ": invalid entry for " + key +
                  " (expected positive bf16_dot_gflops and f32_fma_gflops); measuring again");
    return std::nullopt;
  }
  return rates;
}

// Once per process and target: from the cache file, else measured and stored.
Rates calibrated_rates(const kernel::TargetOps& ops, const std::string& isa) {
  static std::mutex mutex;
  static std::map<std::string, Rates> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(isa); it != known.end()) return it->second;
  const io::JsonCache cache(io::default_cache_path());
  const std::string key = cache_key(isa);
  Rates rates;
  if (const std::optional<Rates> cached = read_cached(cache, key)) {
    rates = *cached;
  } else {
    rates = measure(ops);
    try {
      cache.put(key, {{"bf16_dot_gflops", rates.dot}, {"f32_fma_gflops", rates.fma}});
    } catch (const std::exception&) {
      // A read-only cache is legitimate: the next process measures again.
    }
  }
  known[isa] = rates;
  return rates;
}

std::string rate_text(double gflops) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", gflops);
  return text;
}

}  // namespace

ProductPathChoice choose_product_path(ProductPath requested) {
  const kernel::TargetOps& ops = kernel::active_target();
  const std::string isa = active_isa();
  const bool has_dot = ops.bf16_peak.run != nullptr;
  std::string source = "product_path";
  if (requested == ProductPath::kAuto) {
    if (const char* env = std::getenv("TILESPLASH_PRODUCT_PATH"); env != nullptr && *env != '\0') {
      const std::optional<ProductPath> forced = parse_product_path(env);
      if (!forced || *forced == ProductPath::kAuto) {
        throw std::invalid_argument(
            std::string("TILESPLASH_PRODUCT_PATH must be dot or widen, got '") + env + "'");
      }
      requested = *forced;
      source = "TILESPLASH_PRODUCT_PATH";
    }
  }
  if (requested == ProductPath::kDot) {
    if (!has_dot) {
      throw std::invalid_argument(source + ": 'dot' needs a target with a bf16 dot product " +
                                  "(avx512bf16, amx); the active target " + isa + " has none");
    }
    return {ProductPath::kDot, "forced (" + source + "=dot)"};
  }
  if (requested == ProductPath::kWiden)
    return {ProductPath::kWiden, "forced (" + source + "=widen)"};
  if (!has_dot) return {ProductPath::kWiden, "the target " + isa + " has no bf16 dot product"};

  const Rates rates = calibrated_rates(ops, isa);
  ProductPathChoice choice;
  choice.path = rates.dot >= kDotAdvantage * rates.fma ? ProductPath::kDot : ProductPath::kWiden;
  choice.dot_gflops = rates.dot;
  choice.fma_gflops = rates.fma;
  choice.reason =
      std::string(rates.cached ? "measured on this CPU model (cached)" : "measured now") +
      ": bf16 dot product " + rate_text(rates.dot) + " GFLOP/s, f32 FMA " + rate_text(rates.fma) +
      " GFLOP/s per core; the dot product when >= 1.1x";
  return choice;
}

KernelProducts kernel_products(DType dtype, Precision precision, ProductPath resolved) {
  const bool dot = dtype == DType::kBF16 && resolved == ProductPath::kDot;
  std::string pv =
      dot ? std::string("bf16 dot product (") + kernel::active_target().bf16_dot_name + ")"
          : "f32 FMA";
  if (!dot && dtype != DType::kF32)
    pv += std::string(" (") + std::string(to_string(dtype)) + " widened)";
  if (precision == Precision::kInt8) {
    return {std::string("int8 ") + kernel::active_target().int8_dot_name, pv};
  }
  return {pv, pv};
}

}  // namespace tilesplash
