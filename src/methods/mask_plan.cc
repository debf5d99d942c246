// plan_mask() and plan_fields(): the plan a mask runs as, from the mask
// family's registry entry when it plans another mask (its run-order mask),
// and the account of both.
#include "methods/registry.h"
#include "tilesplash/video_plan.h"

namespace tilesplash {

MaskPlan plan_mask(const Mask& mask, std::int64_t q_len, std::int64_t kv_len, BlockSizes blocks,
                   PlanCache* plans) {
  const detail::PlanSource build = [&](const Mask& m, std::int64_t rows, std::int64_t cols) {
    return plans != nullptr
               ? plans->get(m, rows, cols, blocks)
               : std::make_shared<const TilePlan>(TilePlan::build(m, rows, cols, blocks));
  };
  MaskPlan result{.mask = mask};
  for (const detail::MethodEntry* method : detail::method_registry()) {
    if (method->plan != nullptr && method->plan(mask, q_len, kv_len, build, result)) break;
  }
  if (result.plan == nullptr) result.plan = build(mask, q_len, kv_len);
  return result;
}

Fields plan_fields(const MaskPlan& result) {
  const TilePlan& plan = *result.plan;
  const PlanStats& stats = plan.stats();
  Fields fields = {
      {"mask", result.mask.to_string()},
      {"q_len", plan.q_len()},
      {"kv_len", plan.kv_len()},
      {"block_q", plan.blocks().block_q},
      {"block_kv", plan.blocks().block_kv},
      {"q_blocks", plan.num_q_blocks()},
      {"kv_blocks", plan.num_kv_blocks()},
      {"full", stats.full},
      {"partial", stats.partial},
      {"empty", stats.empty},
      {"distinct_partial", stats.distinct_partial},
      {"kept_pairs", stats.kept_pairs},
      {"density", stats.density},
      {"plan_bytes", stats.plan_bytes},
      {"build_seconds", stats.build_seconds},
  };
  fields.insert(fields.end(), result.fields.begin(), result.fields.end());
  return fields;
}

}  // namespace tilesplash
