// The video front door on whole tensors (routing_layout.h): batch entries
// one forward() each, and the front doors kept per head dim and dtype.
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "batched/entry_views.h"
#include "tilesplash/routing_layout.h"
#include "tilesplash/video_plan.h"

namespace tilesplash {

using detail::Axes;
using detail::axes_of;
using detail::EntryViews;
using detail::in_entry;

std::vector<LayerReport> layout_video_attention(VideoAttention& attention, const LayoutArgs& args,
                                                std::int64_t layer, std::int64_t step,
                                                const BatchProgress& progress,
                                                std::span<const std::int64_t> key_limits) {
  const LayoutShape shape = check_layout_args(args);
  if (!key_limits.empty() && static_cast<std::int64_t>(key_limits.size()) != shape.batch) {
    throw std::invalid_argument("key_limits: expected one per batch entry (" +
                                std::to_string(shape.batch) + "), got " +
                                std::to_string(key_limits.size()));
  }
  // Lengths first, for every batch entry at once (and for none), so that a
  // per-entry error below can only be about that entry's data.
  const std::int64_t tokens = attention.geometry().tokens();
  for (const auto& [name, len] : {std::pair{"q", shape.q_len}, std::pair{"k", shape.kv_len}}) {
    if (len != tokens) {
      throw std::invalid_argument(std::string(name) + ": sequence length " + std::to_string(len) +
                                  " does not match the geometry's tokens (" +
                                  std::to_string(tokens) + ")");
    }
  }
  std::vector<LayerReport> reports;
  if (shape.batch == 0 || shape.heads == 0) return reports;
  const Axes a = axes_of(args);
  EntryViews entry;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    reports.push_back(in_entry(b, shape.batch, [&] {
      const std::optional<std::int64_t> limit =
          key_limits.empty() ? std::nullopt
                             : std::optional<std::int64_t>(key_limits[static_cast<std::size_t>(b)]);
      return attention.forward(entry.views(args, a, b, b * shape.heads * shape.q_len), layer, step,
                               limit);
    }));
    if (progress) progress(b, 1);
  }
  return reports;
}

Mask tuning_mask(const VideoAttention& attention) {
  if (attention.candidates().empty()) {
    const VideoAttentionOptions& o = attention.options();
    return video_band_mask(attention.geometry(), attention.band(), {false, o.text_full});
  }
  return attention.candidates().front().run.mask;
}

LayoutVideoAttention::LayoutVideoAttention(const VideoGeometry& geometry,
                                           VideoAttentionOptions options,
                                           std::optional<std::int64_t> block_q,
                                           std::optional<std::int64_t> block_kv,
                                           std::shared_ptr<ThreadingContext> context)
    : block_q_(block_q),
      block_kv_(block_kv),
      context_(context ? std::move(context) : std::make_shared<ThreadingContext>()) {
  check_block_sizes(block_q, block_kv);
  probe_ = std::make_unique<VideoAttention>(geometry, std::move(options), context_);
}

LayoutVideoAttention::~LayoutVideoAttention() = default;

const VideoGeometry& LayoutVideoAttention::geometry() const { return probe_->geometry(); }
const VideoAttentionOptions& LayoutVideoAttention::options() const { return probe_->options(); }
std::int64_t LayoutVideoAttention::band() const { return probe_->band(); }
const std::vector<MaskCandidate>& LayoutVideoAttention::candidates() const {
  return probe_->candidates();
}
const std::string& LayoutVideoAttention::candidate_family(std::size_t index) const {
  return probe_->candidate_family(index);
}
Mask LayoutVideoAttention::mask(const HeadMask& choice) const { return probe_->mask(choice); }

std::vector<std::int64_t> LayoutVideoAttention::sampled_rows(std::int64_t layer,
                                                             std::int64_t step) const {
  return probe_->sampled_rows(layer, step);
}

Mask LayoutVideoAttention::head_mask(std::int64_t head) const {
  if (last_ == nullptr) throw std::invalid_argument("head_mask: no call has run yet");
  return last_->head_mask(head);
}

void LayoutVideoAttention::reset_clusters() {
  for (auto& [key, entry] : entries_) entry.attention->reset_clusters();
}

LayoutVideoAttention::Entry& LayoutVideoAttention::entry_for(std::int64_t head_dim, DType dtype) {
  const auto key = std::make_pair(head_dim, dtype);
  const auto found = entries_.find(key);
  if (found != entries_.end()) return found->second;
  VideoAttentionOptions options = probe_->options();
  options.band = probe_->band();
  Entry entry;
  if (!block_q_ || !block_kv_) {
    const std::int64_t n = probe_->geometry().tokens();
    const BlockChoice choice =
        cached_block_choice(tuning_mask(*probe_), n, n, head_dim, dtype,
                            context_->resolve(options.threads), options.precision);
    options.blocks = choice.blocks;
    entry.tuned = choice.from_cache;
  }
  if (block_q_) options.blocks.block_q = *block_q_;
  if (block_kv_) options.blocks.block_kv = *block_kv_;
  entry.attention = std::make_unique<VideoAttention>(probe_->geometry(), options, context_);
  return entries_.emplace(key, std::move(entry)).first->second;
}

LayoutVideoAttention::Result LayoutVideoAttention::forward(
    const LayoutArgs& args, std::int64_t layer, std::int64_t step, const BatchProgress& progress,
    std::span<const std::int64_t> key_limits) {
  if (layer < 0) throw std::invalid_argument("layer: must be >= 0, got " + std::to_string(layer));
  if (step < 0) throw std::invalid_argument("step: must be >= 0, got " + std::to_string(step));
  const LayoutShape shape = check_layout_args(args);
  Entry& entry = entry_for(shape.head_dim, args.q.dtype);
  Result result;
  result.blocks = entry.attention->options().blocks;
  result.blocks_tuned = entry.tuned;
  result.reports =
      layout_video_attention(*entry.attention, args, layer, step, progress, key_limits);
  last_ = entry.attention.get();
  return result;
}

}  // namespace tilesplash
