// The routing and warm-up decisions (routing.h: RoutePolicy, WarmupPolicy),
// written once: the C++ front door, the bindings (flex backend, JAX) and the
// CLI all call these, so a change here changes every device alike. Also the
// density ladder of an error target and its candidates.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/registry.h"
#include "tilesplash/candidates.h"
#include "tilesplash/methods.h"
#include "tilesplash/routing.h"

namespace tilesplash {
namespace {

std::atomic<bool> g_inverted{false};

// Densities are exact ratios; the tolerance only absorbs their rounding.
bool within_budget(double density, const std::optional<double>& budget) {
  return !budget || density <= *budget * (1.0 + 1e-12);
}

// The shortest %g form of at least 6 significant digits that reads back as
// `value`: the usual ladders keep short names ("spatial@0.1"), and two
// densities never share a name (0.1 and 0.1000001 would both be "%g" 0.1),
// since force=, mask() and the report find a candidate by its name.
std::string number(double value) {
  char text[32];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  return text;
}

// "a, b or c".
std::string join_names(std::span<const std::string_view> names) {
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  }
  return text;
}

}  // namespace

bool WarmupPolicy::is_dense(std::int64_t layer, std::int64_t step) const {
  const bool dense = layer < dense_layers || step < dense_steps;
  return g_inverted.load(std::memory_order_relaxed) ? !dense : dense;
}

void set_policy_inverted_for_tests(bool inverted) {
  g_inverted.store(inverted, std::memory_order_relaxed);
}

double sampled_error(double mse, double power) {
  if (power > 0.0) return std::sqrt(mse / power);
  return mse > 0.0 ? std::numeric_limits<double>::infinity() : 0.0;
}

RouteChoice decide_route(std::span<const double> densities, std::span<const double> mse,
                         double power, const RoutePolicy& policy) {
  if (densities.empty() || densities.size() != mse.size()) {
    throw std::invalid_argument(
        "decide_route: expected one MSE per candidate (at least one), got " +
        std::to_string(mse.size()) + " MSEs for " + std::to_string(densities.size()) +
        " candidates");
  }
  const std::size_t n = densities.size();
  std::vector<bool> allowed(n);
  for (std::size_t i = 0; i < n; ++i)
    allowed[i] = within_budget(densities[i], policy.density_budget);
  if (std::none_of(allowed.begin(), allowed.end(), [](bool a) { return a; })) {
    // Nothing within the budget: the least dense one alone (the first on a tie).
    const auto least = std::min_element(densities.begin(), densities.end());
    allowed.assign(n, false);
    allowed[static_cast<std::size_t>(least - densities.begin())] = true;
  }
  // Errors order like MSEs within a head (one denominator), so the plain
  // rule compares MSEs: unchanged where the dense rows are all zero.
  const auto better = [&](std::size_t a, std::size_t b) {
    return g_inverted.load(std::memory_order_relaxed) ? mse[a] > mse[b] : mse[a] < mse[b];
  };
  RouteChoice choice;
  bool found = false;
  if (policy.error && !g_inverted.load(std::memory_order_relaxed)) {
    for (std::size_t i = 0; i < n; ++i) {
      if (!allowed[i] || !(sampled_error(mse[i], power) <= *policy.error)) continue;
      if (!found || densities[i] < densities[choice.index] ||
          (densities[i] == densities[choice.index] && mse[i] < mse[choice.index])) {
        choice.index = i;
        found = true;
      }
    }
    if (found) return choice;
    choice.target_met = false;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (allowed[i] && (!found || better(i, choice.index))) {
      choice.index = i;
      found = true;
    }
  }
  return choice;
}

std::string ladder_name(std::string_view name, double density) {
  return std::string(name) + "@" + number(density);
}

std::span<const double> default_density_ladder() {
  static const std::vector<double> ladder = {0.05, 0.10, 0.15, 0.25, 0.40};
  return ladder;
}

void check_density_ladder(std::span<const double> densities, const std::string& who) {
  if (densities.empty()) {
    throw std::invalid_argument(who + ": expected at least one density in (0, 1], got none");
  }
  for (std::size_t i = 0; i < densities.size(); ++i) {
    const double d = densities[i];
    if (!(d > 0.0 && d <= 1.0)) {
      throw std::invalid_argument(who + "[" + std::to_string(i) +
                                  "]: expected a density in (0, 1], got " + number(d));
    }
    if (i > 0 && !(d > densities[i - 1])) {
      throw std::invalid_argument(who + ": expected strictly increasing densities, got " +
                                  number(densities[i - 1]) + " then " + number(d));
    }
  }
}

void check_error_target(double error, const std::string& who) {
  if (!(error > 0.0) || !std::isfinite(error)) {
    throw std::invalid_argument(who + ": expected a relative L2 error > 0 (e.g. 0.05), got " +
                                number(error));
  }
}

std::vector<MaskCandidate> ladder_candidates(std::string_view method, const VideoGeometry& geometry,
                                             const MethodOptions& options,
                                             std::span<const double> densities) {
  check_density_ladder(densities, "densities");
  const detail::MethodEntry* entry = detail::find_method(method);
  if (entry == nullptr) {
    throw std::invalid_argument("ladder_candidates: unknown method '" + std::string(method) +
                                "' (expected " + method_list_text() + ")");
  }
  // Heads that rank their own pooled tiles step over p themselves
  // (VideoAttentionOptions::pooled): no candidates to add for them.
  if (entry->pooled != nullptr && entry->candidates == nullptr) return {};
  if (entry->candidates == nullptr) {
    throw std::invalid_argument("error: method '" + std::string(method) +
                                "' runs each head's own clusters and has no density ladder; "
                                "use a method with candidates (" +
                                join_names(method_names()) + ")");
  }
  std::vector<MaskCandidate> ladder;
  for (const double density : densities) {
    MethodOptions at = options;
    at.density = density;
    at.band = std::nullopt;
    std::vector<MaskCandidate> rung = entry->candidates(geometry, at);
    for (MaskCandidate& c : rung) {
      c.family = c.name;
      c.rung = density;
      c.name = ladder_name(c.name, density);
      ladder.push_back(std::move(c));
    }
  }
  return ladder;
}

}  // namespace tilesplash
