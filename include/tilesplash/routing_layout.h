// The video front door (routing.h) on whole tensors as callers hold them
// (layouts of tensor_layout.h, any element strides): one forward() per batch
// entry, all heads of that entry routed together. LayoutVideoAttention is
// the front door for callers whose head dim and dtype arrive with each call
// (the Python bindings, the CLI's attend): it keeps one VideoAttention per
// (head dim, dtype), every one on the same threading context, with the tiles
// `tilesplash tune --preset ... --method ...` stored for that head dim and
// dtype unless the caller fixed them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "tilesplash/batched_attention.h"
#include "tilesplash/routing.h"
#include "tilesplash/tensor_layout.h"
#include "tilesplash/threading.h"
#include "tilesplash/tuning.h"

namespace tilesplash {

// q_len and kv_len must equal the geometry's tokens. key_limits: empty (no
// padding) or one per batch entry, that entry's VideoAttention::forward()
// key_limit (prompts of different lengths padded to one text length). One
// report per batch entry; none without batch entries or heads.
std::vector<LayerReport> layout_video_attention(VideoAttention& attention, const LayoutArgs& args,
                                                std::int64_t layer = 0, std::int64_t step = 0,
                                                const BatchProgress& progress = {},
                                                std::span<const std::int64_t> key_limits = {});

// The mask whose tiles a front door runs best on, and the one `tilesplash
// tune --preset --method` times: its first candidate's run mask (for the
// default spatial and temporal pair, the band plan every band head shares;
// the sink runs as its own key segment and is not in it), or the band plan
// when the heads run clusters (their own plans use ClusterOptions::blocks;
// only dense heads take these tiles).
Mask tuning_mask(const VideoAttention& attention);

class LayoutVideoAttention {
 public:
  // Validates the geometry and options now (the front door's errors).
  // block_q / block_kv: fixed tiles; an unset side comes from
  // cached_block_choice(tuning_mask(...)) per head dim and dtype, and
  // options.blocks is ignored for it. context: shared with whoever else
  // holds it; null: a private one.
  LayoutVideoAttention(const VideoGeometry& geometry, VideoAttentionOptions options,
                       std::optional<std::int64_t> block_q = std::nullopt,
                       std::optional<std::int64_t> block_kv = std::nullopt,
                       std::shared_ptr<ThreadingContext> context = nullptr);
  ~LayoutVideoAttention();
  LayoutVideoAttention(const LayoutVideoAttention&) = delete;
  LayoutVideoAttention& operator=(const LayoutVideoAttention&) = delete;

  const VideoGeometry& geometry() const;
  const VideoAttentionOptions& options() const;
  std::int64_t band() const;
  const std::vector<MaskCandidate>& candidates() const;
  const std::string& candidate_family(std::size_t index) const;  // VideoAttention's
  Mask mask(const HeadMask& choice) const;
  // The query rows the router samples at this layer and step
  // (VideoAttention::sampled_rows).
  std::vector<std::int64_t> sampled_rows(std::int64_t layer, std::int64_t step) const;
  // svg2: the cluster mask head `head` ran in the last forward() (its last
  // batch entry); throws std::invalid_argument before any call.
  Mask head_mask(std::int64_t head) const;
  void reset_clusters();

  struct Result {
    std::vector<LayerReport> reports;  // one per batch entry
    BlockSizes blocks;                 // the tiles this call ran
    bool blocks_tuned = false;         // from the tuning cache rather than the heuristic
  };
  // One call at a time; throws std::invalid_argument naming the argument.
  // key_limits: as layout_video_attention's.
  Result forward(const LayoutArgs& args, std::int64_t layer = 0, std::int64_t step = 0,
                 const BatchProgress& progress = {}, std::span<const std::int64_t> key_limits = {});

 private:
  struct Entry {
    std::unique_ptr<VideoAttention> attention;
    bool tuned = false;
  };
  Entry& entry_for(std::int64_t head_dim, DType dtype);

  std::optional<std::int64_t> block_q_;
  std::optional<std::int64_t> block_kv_;
  std::shared_ptr<ThreadingContext> context_;
  std::unique_ptr<VideoAttention> probe_;  // the options as validated; band and candidates
  const VideoAttention* last_ = nullptr;   // the entry of the last call
  std::map<std::pair<std::int64_t, DType>, Entry> entries_;
};

}  // namespace tilesplash
