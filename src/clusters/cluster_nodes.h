// Sparse VideoGen 2's cluster masks as MaskNodes (see clusters.h).
// ClusterRunNode is the mask the kernel runs: queries sorted by cluster,
// keys sorted by cluster, text after the video, so a tile covers a rectangle
// of (query cluster, key cluster) pairs and a 2-D prefix sum of the kept
// pairs classifies it in O(1). ClusterMaskNode is the same mask on the
// original order, for checks: it classifies by scanning.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilesplash/candidates.h"
#include "tilesplash/mask.h"
#include "tilesplash/mask_node.h"

namespace tilesplash::detail {

class ClusterRunNode final : public MaskNode {
 public:
  // q_start / k_start: run positions where each (non-empty) cluster starts,
  // plus the end (the video length); kept: q clusters x k clusters bytes;
  // tokens: the whole sequence (text from video length on).
  ClusterRunNode(std::vector<std::int64_t> q_start, std::vector<std::int64_t> k_start,
                 std::vector<std::uint8_t> kept, std::int64_t tokens);

  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  // Plans of cluster masks are built per head and step, never cached:
  // only copies of one mask compare equal.
  bool equals(const MaskNode& other) const override { return this == &other; }
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;

 private:
  bool pair_kept(std::int64_t a, std::int64_t b) const {
    return kept_[static_cast<std::size_t>(a * k_clusters_ + b)] != 0;
  }
  // Kept pairs in query clusters [a0, a1] x key clusters [b0, b1].
  std::int64_t kept_in(std::int64_t a0, std::int64_t a1, std::int64_t b0, std::int64_t b1) const;

  std::vector<std::int64_t> q_start_, k_start_;
  std::vector<std::uint8_t> kept_;
  std::vector<std::int32_t> q_cluster_, k_cluster_;  // cluster of each run position
  std::vector<std::int32_t> prefix_;  // (q clusters + 1) x (k clusters + 1) kept counts
  std::vector<std::int32_t> first_kept_, last_kept_;  // per query cluster; -1: none
  std::int64_t q_clusters_, k_clusters_, video_, tokens_;
};

class ClusterMaskNode final : public MaskNode {
 public:
  // Labels of the video tokens (original order), kept: qc x kc bytes.
  ClusterMaskNode(IndexRange video, std::int64_t tokens, std::vector<std::int32_t> q_labels,
                  std::vector<std::int32_t> k_labels, std::vector<std::uint8_t> kept,
                  std::int64_t k_clusters);

  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  bool is_analytic() const override { return false; }
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override { return this == &other; }
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;

 private:
  IndexRange video_;
  std::int64_t tokens_;
  std::vector<std::int32_t> q_labels_, k_labels_;
  std::vector<std::uint8_t> kept_;
  std::int64_t k_clusters_;
};

// A run-order mask seen on the original order: (q, k) is kept iff the run
// keeps (q_order.position(q), kv_order.position(k)). What svg2's head_mask()
// answers under granularity "tile", where the head ran its run mask rounded
// out to tiles in the run order (no rounding on the original order says the
// same). Classifies by scanning, for checks.
class RunOrderNode final : public MaskNode {
 public:
  RunOrderNode(Mask run, RowOrder q_order, RowOrder kv_order, std::int64_t tokens);

  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  bool is_analytic() const override { return false; }
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override { return this == &other; }
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;

 private:
  Mask run_;
  RowOrder q_order_, kv_order_;
  std::int64_t tokens_;
};

}  // namespace tilesplash::detail
