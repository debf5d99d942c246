// The temporal-mask view of `tilesplash plan`; see video_plan.h.
#include "video_plan.h"

#include <fmt/format.h>

#include <optional>
#include <stdexcept>

#include "tilesplash/radial.h"
#include "tilesplash/sta.h"
#include "tilesplash/video.h"

namespace tilesplash::cli {

Mask plan_mask_for(const Mask& mask, std::int64_t q_len, std::int64_t kv_len, BlockSizes blocks,
                   nlohmann::ordered_json& record) {
  if (const std::optional<RadialMaskInfo> radial = radial_mask_info(mask)) {
    record["block_vote_density"] = radial_block_density(radial->geometry, radial->options);
  }
  if (const std::optional<StaMaskInfo> sta = sta_mask_info(mask)) {
    mask.check_lengths(q_len, kv_len);
    const MaskRun run = mask_run(mask, q_len);
    record["plan_order"] = std::string(run.order.name());
    record["plan_note"] =
        "sta mask: the plan shown is in tile-major order (Q/K/V permuted, text after the video), "
        "where every key tile is a run of keys";
    record["plan_mask"] = run.mask.to_string();
    record["mask_kept_pairs"] = sta_kept_pairs(sta->geometry, sta->options);
    record["mask_density"] = sta_density(sta->geometry, sta->options);
    return run.mask;
  }
  const std::optional<VideoMaskInfo> info = video_mask_info(mask);
  if (!info || info->kind != VideoMaskKind::kTemporal) return mask;
  const std::int64_t n = info->geometry.tokens();
  if (q_len != n || kv_len != n) {
    throw std::invalid_argument(fmt::format(
        "--q-len/--kv-len: a temporal mask runs permuted over all {} tokens of its geometry; "
        "give --q-len {} (got {} x {})",
        n, n, q_len, kv_len));
  }
  const VideoRunMasks run = video_run_masks(info->kind, info->geometry, info->band, info->options);
  record["plan_order"] = std::string(to_string(run.order));
  record["plan_note"] =
      "temporal mask: the plan shown is its band in token-major order (Q/K/V permuted, text in "
      "place), the plan spatial heads share" +
      std::string(run.sink ? "; frame-0 keys run as the sink segment (sink_*)" : "");
  record["plan_mask"] = run.band.to_string();
  if (run.sink) {
    const std::int64_t p = info->geometry.tokens_per_frame();
    const TilePlan sink = TilePlan::build(*run.sink, n, p, blocks);
    record["sink_kv_len"] = p;
    record["sink_full"] = sink.stats().full;
    record["sink_partial"] = sink.stats().partial;
    record["sink_empty"] = sink.stats().empty;
    record["sink_distinct_partial"] = sink.stats().distinct_partial;
    record["sink_kept_pairs"] = sink.stats().kept_pairs;
  }
  record["mask_kept_pairs"] =
      count_kept_pairs(info->kind, info->geometry, info->band, info->options);
  record["mask_density"] =
      video_mask_density(info->kind, info->geometry, info->band, info->options);
  return run.band;
}

}  // namespace tilesplash::cli
