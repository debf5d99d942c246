// plan_mask() and plan_fields(): the temporal and sta substitutions and their
// account.
#include <stdexcept>
#include <string>

#include "tilesplash/candidates.h"
#include "tilesplash/radial.h"
#include "tilesplash/sta.h"
#include "tilesplash/video_plan.h"

namespace tilesplash {

MaskPlan plan_mask(const Mask& mask, std::int64_t q_len, std::int64_t kv_len, BlockSizes blocks,
                   PlanCache* plans) {
  const auto build = [&](const Mask& m, std::int64_t rows, std::int64_t cols) {
    return plans != nullptr
               ? plans->get(m, rows, cols, blocks)
               : std::make_shared<const TilePlan>(TilePlan::build(m, rows, cols, blocks));
  };
  MaskPlan result{mask, nullptr, std::nullopt, std::nullopt, std::nullopt};
  if (const std::optional<RadialMaskInfo> radial = radial_mask_info(mask)) {
    result.block_vote_density = radial_block_density(radial->geometry, radial->options);
  }
  if (const std::optional<StaMaskInfo> sta = sta_mask_info(mask)) {
    mask.check_lengths(q_len, kv_len);
    const MaskRun run = mask_run(mask, q_len);
    result.sta = TileMajorRun{std::string(run.order.name()), run.mask,
                              sta_kept_pairs(sta->geometry, sta->options),
                              sta_density(sta->geometry, sta->options)};
    result.plan = build(run.mask, q_len, kv_len);
    return result;
  }
  const std::optional<VideoMaskInfo> info = video_mask_info(mask);
  if (!info || info->kind != VideoMaskKind::kTemporal) {
    result.plan = build(mask, q_len, kv_len);
    return result;
  }
  const std::int64_t n = info->geometry.tokens();
  if (q_len != n || kv_len != n) {
    throw std::invalid_argument(
        "q_len: a temporal mask runs permuted over all " + std::to_string(n) +
        " tokens of its geometry; expected q_len = " + "kv_len = " + std::to_string(n) + ", got " +
        std::to_string(q_len) + " x " + std::to_string(kv_len));
  }
  const VideoRunMasks run = video_run_masks(info->kind, info->geometry, info->band, info->options);
  TemporalRun temporal{run.order, run.band, std::nullopt, 0, 0, 0.0};
  if (run.sink) {
    temporal.sink_kv_len = info->geometry.tokens_per_frame();
    temporal.sink = build(*run.sink, n, temporal.sink_kv_len)->stats();
  }
  temporal.mask_kept_pairs =
      count_kept_pairs(info->kind, info->geometry, info->band, info->options);
  temporal.mask_density = video_mask_density(info->kind, info->geometry, info->band, info->options);
  result.plan = build(run.band, n, n);
  result.temporal = std::move(temporal);
  return result;
}

std::vector<std::pair<std::string, FieldValue>> plan_fields(const MaskPlan& result) {
  const TilePlan& plan = *result.plan;
  const PlanStats& stats = plan.stats();
  std::vector<std::pair<std::string, FieldValue>> fields = {
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
  if (result.block_vote_density) {
    fields.emplace_back("block_vote_density", *result.block_vote_density);
  }
  if (result.sta) {
    const TileMajorRun& run = *result.sta;
    fields.emplace_back("plan_order", run.order);
    fields.emplace_back("plan_note",
                        std::string("sta mask: the plan shown is in tile-major order (Q/K/V "
                                    "permuted, text after the video), where every key tile is a "
                                    "run of keys"));
    fields.emplace_back("plan_mask", run.run_mask.to_string());
    fields.emplace_back("mask_kept_pairs", run.mask_kept_pairs);
    fields.emplace_back("mask_density", run.mask_density);
  }
  if (!result.temporal) return fields;
  const TemporalRun& run = *result.temporal;
  fields.emplace_back("plan_order", std::string(to_string(run.order)));
  fields.emplace_back(
      "plan_note",
      "temporal mask: the plan shown is its band in token-major order (Q/K/V permuted, text in "
      "place), the plan spatial heads share" +
          std::string(run.sink ? "; frame-0 keys run as the sink segment (sink_*)" : ""));
  fields.emplace_back("plan_mask", run.band.to_string());
  if (run.sink) {
    fields.emplace_back("sink_kv_len", run.sink_kv_len);
    fields.emplace_back("sink_full", run.sink->full);
    fields.emplace_back("sink_partial", run.sink->partial);
    fields.emplace_back("sink_empty", run.sink->empty);
    fields.emplace_back("sink_distinct_partial", run.sink->distinct_partial);
    fields.emplace_back("sink_kept_pairs", run.sink->kept_pairs);
  }
  fields.emplace_back("mask_kept_pairs", run.mask_kept_pairs);
  fields.emplace_back("mask_density", run.mask_density);
  return fields;
}

}  // namespace tilesplash
