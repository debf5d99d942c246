// The extension point behind Mask: one node type per mask family. The video
// module adds its own nodes (spatial, temporal, sink, text) the same way the
// core masks are written, so every family classifies tiles analytically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "tilesplash/mask.h"

namespace tilesplash::detail {

class MaskNode {
 public:
  virtual ~MaskNode() = default;
  virtual bool keeps(std::int64_t q, std::int64_t k) const = 0;
  // Exact; rows and cols non-empty.
  virtual TileKind classify(IndexRange rows, IndexRange cols) const = 0;
  // Defaults to [0, kv_len).
  virtual IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const;
  // Defaults to a loop over keeps(); built-in nodes override it with a
  // branch-free loop the compiler vectorises.
  virtual void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const;
  virtual bool is_analytic() const { return true; }
  // Masks defined over a sequence of a known length (the video masks) throw
  // std::invalid_argument when the plan's lengths differ; others accept any.
  virtual void check_lengths(std::int64_t /*q_len*/, std::int64_t /*kv_len*/) const {}
  virtual std::string to_string() const = 0;
  virtual std::size_t hash() const = 0;
  // Called only when typeid matches.
  virtual bool equals(const MaskNode& other) const = 0;
};

// Exact classification by evaluating every pair of the tile (row by row with
// eval_row). The fallback for non-analytic masks and ambiguous combinations.
TileKind classify_by_scan(const MaskNode& node, IndexRange rows, IndexRange cols);

}  // namespace tilesplash::detail
