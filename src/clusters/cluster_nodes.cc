// The cluster masks' classification; see cluster_nodes.h. Positions sorted
// by cluster make every tile side a contiguous range of clusters, all of them
// present (empty clusters are dropped before the node is built), so the
// tile's pairs are all kept iff the rectangle's prefix-sum count equals its
// area, and some are iff the count is positive.
#include "clusters/cluster_nodes.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <stdexcept>

#include "geometry/frame_rects.h"
#include "masks/mask_util.h"

namespace tilesplash::detail {
namespace {

void check_tokens(const std::string& mask, std::int64_t tokens, std::int64_t q_len,
                  std::int64_t kv_len) {
  if (q_len == tokens && kv_len == tokens) return;
  throw std::invalid_argument("mask " + mask + ": it covers " + std::to_string(tokens) +
                              " tokens, so q_len and kv_len must both be " +
                              std::to_string(tokens) + "; got q_len " + std::to_string(q_len) +
                              ", kv_len " + std::to_string(kv_len));
}

std::vector<std::int32_t> cluster_of_positions(const std::vector<std::int64_t>& start) {
  std::vector<std::int32_t> cluster(static_cast<std::size_t>(start.back()));
  for (std::size_t c = 0; c + 1 < start.size(); ++c) {
    std::fill(cluster.begin() + start[c], cluster.begin() + start[c + 1],
              static_cast<std::int32_t>(c));
  }
  return cluster;
}

}  // namespace

ClusterRunNode::ClusterRunNode(std::vector<std::int64_t> q_start, std::vector<std::int64_t> k_start,
                               std::vector<std::uint8_t> kept, std::int64_t tokens)
    : q_start_(std::move(q_start)),
      k_start_(std::move(k_start)),
      kept_(std::move(kept)),
      q_clusters_(static_cast<std::int64_t>(q_start_.size()) - 1),
      k_clusters_(static_cast<std::int64_t>(k_start_.size()) - 1),
      video_(q_start_.empty() ? 0 : q_start_.back()),
      tokens_(tokens) {
  if (q_clusters_ < 1 || k_clusters_ < 1 || k_start_.back() != video_ || q_start_.front() != 0 ||
      k_start_.front() != 0 ||
      static_cast<std::int64_t>(kept_.size()) != q_clusters_ * k_clusters_ || tokens_ < video_) {
    throw std::invalid_argument("cluster mask: inconsistent cluster boundaries or kept pairs");
  }
  for (const auto* start : {&q_start_, &k_start_}) {
    for (std::size_t c = 0; c + 1 < start->size(); ++c) {
      if ((*start)[c] >= (*start)[c + 1]) {
        throw std::invalid_argument("cluster mask: every cluster must be non-empty");
      }
    }
  }
  q_cluster_ = cluster_of_positions(q_start_);
  k_cluster_ = cluster_of_positions(k_start_);
  const std::int64_t width = k_clusters_ + 1;
  prefix_.assign(static_cast<std::size_t>((q_clusters_ + 1) * width), 0);
  first_kept_.assign(static_cast<std::size_t>(q_clusters_), -1);
  last_kept_.assign(static_cast<std::size_t>(q_clusters_), -1);
  for (std::int64_t a = 0; a < q_clusters_; ++a) {
    std::int32_t row = 0;
    for (std::int64_t b = 0; b < k_clusters_; ++b) {
      if (pair_kept(a, b)) {
        ++row;
        if (first_kept_[a] < 0) first_kept_[a] = static_cast<std::int32_t>(b);
        last_kept_[a] = static_cast<std::int32_t>(b);
      }
      prefix_[static_cast<std::size_t>((a + 1) * width + b + 1)] =
          prefix_[static_cast<std::size_t>(a * width + b + 1)] + row;
    }
  }
}

std::int64_t ClusterRunNode::kept_in(std::int64_t a0, std::int64_t a1, std::int64_t b0,
                                     std::int64_t b1) const {
  const std::int64_t width = k_clusters_ + 1;
  const auto at = [&](std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(prefix_[static_cast<std::size_t>(a * width + b)]);
  };
  return at(a1 + 1, b1 + 1) - at(a0, b1 + 1) - at(a1 + 1, b0) + at(a0, b0);
}

bool ClusterRunNode::keeps(std::int64_t q, std::int64_t k) const {
  if (q < 0 || k < 0 || q >= tokens_ || k >= tokens_) return false;
  if (q >= video_ || k >= video_) return true;  // text rows and columns are kept whole
  return pair_kept(q_cluster_[static_cast<std::size_t>(q)],
                   k_cluster_[static_cast<std::size_t>(k)]);
}

TileKind ClusterRunNode::classify(IndexRange rows, IndexRange cols) const {
  const IndexRange r = intersect(rows, {0, tokens_});
  const IndexRange c = intersect(cols, {0, tokens_});
  if (r.empty() || c.empty()) return TileKind::kEmpty;
  // Every pair with a text row or column is kept; the video part is a
  // rectangle of cluster pairs, each of which it meets.
  const bool text = r.end > video_ || c.end > video_;
  const IndexRange vr = intersect(r, {0, video_});
  const IndexRange vc = intersect(c, {0, video_});
  bool any = text, all = true;
  if (!vr.empty() && !vc.empty()) {
    const std::int64_t a0 = q_cluster_[static_cast<std::size_t>(vr.begin)];
    const std::int64_t a1 = q_cluster_[static_cast<std::size_t>(vr.end - 1)];
    const std::int64_t b0 = k_cluster_[static_cast<std::size_t>(vc.begin)];
    const std::int64_t b1 = k_cluster_[static_cast<std::size_t>(vc.end - 1)];
    const std::int64_t kept = kept_in(a0, a1, b0, b1);
    any = any || kept > 0;
    all = kept == (a1 - a0 + 1) * (b1 - b0 + 1);
  }
  if (!any) return TileKind::kEmpty;
  return all && r == rows && c == cols ? TileKind::kFull : TileKind::kPartial;
}

IndexRange ClusterRunNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  const IndexRange r = intersect(rows, {0, tokens_});
  if (r.empty()) return {};
  if (r.end > video_) return intersect({0, tokens_}, {0, kv_len});
  std::int64_t first = k_clusters_, last = -1;
  for (std::int64_t a = q_cluster_[static_cast<std::size_t>(r.begin)];
       a <= q_cluster_[static_cast<std::size_t>(r.end - 1)]; ++a) {
    if (first_kept_[a] < 0) continue;
    first = std::min<std::int64_t>(first, first_kept_[a]);
    last = std::max<std::int64_t>(last, last_kept_[a]);
  }
  IndexRange hull = last < 0 ? IndexRange{} : IndexRange{k_start_[first], k_start_[last + 1]};
  if (tokens_ > video_) hull = {hull.empty() ? video_ : hull.begin, tokens_};
  return intersect(hull, {0, kv_len});
}

void ClusterRunNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n,
                              std::uint8_t* keep) const {
  std::memset(keep, 0, static_cast<std::size_t>(n));
  if (q < 0 || q >= tokens_) return;
  if (q >= video_) {
    set_ones(keep, k0, n, 0, tokens_);
    return;
  }
  set_ones(keep, k0, n, video_, tokens_);
  const std::int64_t first = std::max<std::int64_t>(k0, 0), last = std::min(k0 + n, video_) - 1;
  if (first > last) return;
  const std::int64_t a = q_cluster_[static_cast<std::size_t>(q)];
  for (std::int64_t b = k_cluster_[static_cast<std::size_t>(first)];
       b <= k_cluster_[static_cast<std::size_t>(last)]; ++b) {
    if (pair_kept(a, b)) set_ones(keep, k0, n, k_start_[b], k_start_[b + 1]);
  }
}

std::string ClusterRunNode::to_string() const {
  return "clusters_run:queries=" + std::to_string(q_clusters_) +
         ",keys=" + std::to_string(k_clusters_) + ",tokens=" + std::to_string(tokens_);
}

std::size_t ClusterRunNode::hash() const {
  return hash_combine(0x636c7573, reinterpret_cast<std::uintptr_t>(this));
}

void ClusterRunNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  check_tokens(to_string(), tokens_, q_len, kv_len);
}

ClusterMaskNode::ClusterMaskNode(IndexRange video, std::int64_t tokens,
                                 std::vector<std::int32_t> q_labels,
                                 std::vector<std::int32_t> k_labels, std::vector<std::uint8_t> kept,
                                 std::int64_t k_clusters)
    : video_(video),
      tokens_(tokens),
      q_labels_(std::move(q_labels)),
      k_labels_(std::move(k_labels)),
      kept_(std::move(kept)),
      k_clusters_(k_clusters) {}

bool ClusterMaskNode::keeps(std::int64_t q, std::int64_t k) const {
  if (q < 0 || k < 0 || q >= tokens_ || k >= tokens_) return false;
  const bool q_video = q >= video_.begin && q < video_.end;
  const bool k_video = k >= video_.begin && k < video_.end;
  if (!q_video || !k_video) return true;
  const std::int64_t a = q_labels_[static_cast<std::size_t>(q - video_.begin)];
  const std::int64_t b = k_labels_[static_cast<std::size_t>(k - video_.begin)];
  return kept_[static_cast<std::size_t>(a * k_clusters_ + b)] != 0;
}

TileKind ClusterMaskNode::classify(IndexRange rows, IndexRange cols) const {
  return scan_in_tokens(*this, tokens_, rows, cols);
}

std::string ClusterMaskNode::to_string() const {
  return "clusters:tokens=" + std::to_string(tokens_) + ",keys=" + std::to_string(k_clusters_);
}

std::size_t ClusterMaskNode::hash() const {
  return hash_combine(0x636c6d61, reinterpret_cast<std::uintptr_t>(this));
}

void ClusterMaskNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  check_tokens(to_string(), tokens_, q_len, kv_len);
}

RunOrderNode::RunOrderNode(Mask run, RowOrder q_order, RowOrder kv_order, std::int64_t tokens)
    : run_(std::move(run)),
      q_order_(std::move(q_order)),
      kv_order_(std::move(kv_order)),
      tokens_(tokens) {}

bool RunOrderNode::keeps(std::int64_t q, std::int64_t k) const {
  if (q < 0 || k < 0 || q >= tokens_ || k >= tokens_) return false;
  const std::int64_t rq = q_order_.is_identity() ? q : q_order_.position(q);
  const std::int64_t rk = kv_order_.is_identity() ? k : kv_order_.position(k);
  return run_.keeps(rq, rk);
}

TileKind RunOrderNode::classify(IndexRange rows, IndexRange cols) const {
  return scan_in_tokens(*this, tokens_, rows, cols);
}

std::string RunOrderNode::to_string() const {
  return "run-order:tokens=" + std::to_string(tokens_) + "," + run_.to_string();
}

std::size_t RunOrderNode::hash() const {
  return hash_combine(0x72756e6f, reinterpret_cast<std::uintptr_t>(this));
}

void RunOrderNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  check_tokens(to_string(), tokens_, q_len, kv_len);
}

}  // namespace tilesplash::detail
