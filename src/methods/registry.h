// The registry's entries: what each video attention method brings (see
// tilesplash/methods.h for the public face). Each method's folder defines
// its entry; src/methods/registry.cc lists them. Internal to the methods
// layer and the front door above it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "masks/spec_params.h"
#include "tilesplash/candidates.h"
#include "tilesplash/clusters.h"
#include "tilesplash/mask.h"
#include "tilesplash/methods.h"
#include "tilesplash/plan.h"
#include "tilesplash/pooled.h"
#include "tilesplash/video.h"
#include "tilesplash/video_plan.h"

namespace tilesplash::detail {

// Builds (or takes from a cache) the plan of a mask over rows x cols.
using PlanSource =
    std::function<std::shared_ptr<const TilePlan>(const Mask&, std::int64_t, std::int64_t)>;

struct MethodEntry {
  MethodInfo info;
  // The SPEC term `<name>:...` (info.spec): the term's key=value list,
  // given() false without a ':'. Throws std::invalid_argument("mask spec:
  // <name>: ...").
  Mask (*parse)(SpecParams& params) = nullptr;
  // The candidates matched to options.density (info.candidates); the caller
  // has validated the geometry and the density.
  std::vector<MaskCandidate> (*candidates)(const VideoGeometry& geometry,
                                           const MethodOptions& options) = nullptr;
  // Methods whose heads run their own semantic clusters instead (svg2).
  ClusterOptions (*clusters)(const VideoGeometry& geometry, const MethodOptions& options) = nullptr;
  // Methods whose heads rank their own pooled key tiles (pooled, instead of
  // candidates; mix, beside them when its families name pooled): their
  // options from options.density, p, floor and gate; nullopt when this
  // call's heads rank none. Throws std::invalid_argument naming a bad option.
  std::optional<PooledOptions> (*pooled)(const VideoGeometry& geometry,
                                         const MethodOptions& options) = nullptr;
  // It routes among other methods' masks and takes MethodOptions::families
  // (mix); the others refuse them.
  bool routes_families = false;
  // How a mask of this method's family executes, its row order included;
  // nullopt when `mask` is not of the family (mask_run).
  std::optional<MaskRun> (*run)(const Mask& mask) = nullptr;
  // plan_mask()'s account of a mask of this family: sets out.plan when the
  // family plans another mask than the one given (its run-order mask), and
  // the family's own fields; returns false when `mask` is not of the family.
  bool (*plan)(const Mask& mask, std::int64_t q_len, std::int64_t kv_len, const PlanSource& build,
               MaskPlan& out) = nullptr;
};

// Every method, in registry order.
std::span<const MethodEntry* const> method_registry();
// The method front doors run when none is named (methods.h: default_method).
const MethodEntry& default_method_entry();
// The name of the registered family whose masks `mask` is one of (the entry
// whose `run` recognises it: "spatial", "sta", ...); empty for any other.
std::string_view mask_family(const Mask& mask);
// The entry of that name, or null.
const MethodEntry* find_method(std::string_view name);
// The pooled options of `options` (MethodOptions::p, floor, gate, density,
// sink, text_full): p given, the heads keep mass p instead of the density.
PooledOptions pooled_options_of(const MethodOptions& options);

}  // namespace tilesplash::detail
