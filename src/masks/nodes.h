// The core mask families as MaskNode types. Internal: users build them through
// Mask's factories; other modules may inspect them (e.g. to recognise a band).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tilesplash/mask_node.h"

namespace tilesplash::detail {

class DenseNode final : public MaskNode {
 public:
  bool keeps(std::int64_t, std::int64_t) const override { return true; }
  TileKind classify(IndexRange, IndexRange) const override { return TileKind::kFull; }
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  std::string to_string() const override { return "dense"; }
  std::size_t hash() const override;
  bool equals(const MaskNode&) const override { return true; }
};

// Keeps (q, k) when lo <= k - q <= hi. Causal and local masks are both this
// shape; in every tile the differences k - q cover one contiguous interval,
// which makes classification two comparisons. Differences and bounds are
// exact 128-bit values (an offset of 2^62 and an index of 2^62 still meet).
class BandNode : public MaskNode {
 public:
  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;

 protected:
  BandNode(__int128 lo, __int128 hi) : lo_(lo), hi_(hi) {}

 private:
  __int128 lo_;  // exact, or -kNoBound / kNoBound for a missing side
  __int128 hi_;
};

class CausalNode final : public BandNode {
 public:
  explicit CausalNode(std::int64_t offset);
  std::int64_t offset() const { return offset_; }
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;

 private:
  std::int64_t offset_;
};

class LocalNode final : public BandNode {
 public:
  // Throws std::invalid_argument on a negative side.
  LocalNode(std::optional<std::int64_t> left, std::optional<std::int64_t> right,
            std::int64_t offset);
  std::optional<std::int64_t> left() const { return left_; }
  std::optional<std::int64_t> right() const { return right_; }
  std::int64_t offset() const { return offset_; }
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;

 private:
  std::optional<std::int64_t> left_;
  std::optional<std::int64_t> right_;
  std::int64_t offset_;
};

// Keeps (q, k) when both lie in the same chunk and k <= q.
class ChunkedCausalNode final : public MaskNode {
 public:
  // Throws std::invalid_argument when chunk < 1.
  explicit ChunkedCausalNode(std::int64_t chunk);
  std::int64_t chunk() const { return chunk_; }
  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;

 private:
  __int128 chunk_start(std::int64_t q) const;  // below INT64_MIN for some q < 0
  std::int64_t chunk_;
};

// Keeps (q, k) when begin <= k < end, whatever q: every row keeps the same
// interval of keys, so a tile is full, empty or partial from its columns alone.
class KeyRangeNode final : public MaskNode {
 public:
  // Throws std::invalid_argument unless 0 <= begin <= end.
  KeyRangeNode(std::int64_t begin, std::int64_t end);
  std::int64_t begin() const { return begin_; }
  std::int64_t end() const { return end_; }
  bool keeps(std::int64_t, std::int64_t k) const override { return k >= begin_ && k < end_; }
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;

 private:
  std::int64_t begin_;
  std::int64_t end_;
};

class RandomNode final : public MaskNode {
 public:
  // Throws std::invalid_argument unless density is in [0, 1].
  RandomNode(double density, std::uint64_t seed);
  double density() const { return density_; }
  std::uint64_t seed() const { return seed_; }
  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  bool is_analytic() const override { return false; }
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;

 private:
  std::uint64_t row_key(std::int64_t q) const;
  double density_;
  std::uint64_t seed_;
  std::uint64_t seed_key_;   // mixed seed, shared by every row
  std::uint64_t threshold_;  // keep when hash < threshold_ (or always_)
  bool always_;              // density 1: 2^64 does not fit the threshold
};

class FunctionNode final : public MaskNode {
 public:
  using Predicate = std::function<bool(std::int64_t, std::int64_t)>;
  // Throws std::invalid_argument on an empty predicate.
  FunctionNode(Predicate keep, std::string name);
  bool keeps(std::int64_t q, std::int64_t k) const override { return keep_(q, k); }
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  bool is_analytic() const override { return false; }
  std::string to_string() const override { return name_; }
  std::size_t hash() const override;
  // Identity: two predicates cannot be compared, so only copies of one
  // function mask are equal.
  bool equals(const MaskNode& other) const override { return this == &other; }

 private:
  Predicate keep_;
  std::string name_;
};

using NodePtr = std::shared_ptr<const MaskNode>;

// OR / AND of two or more children, kept flat (an OR never has an OR child) so
// that equal expressions have equal trees and print back to the same spec.
class CombineNode : public MaskNode {
 public:
  const std::vector<NodePtr>& children() const { return children_; }
  // Analytic when every child is; only tiles where two children are both
  // partial fall back to a scan, and those are boundary tiles.
  bool is_analytic() const override;
  bool equals(const MaskNode& other) const override;
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;

 protected:
  explicit CombineNode(std::vector<NodePtr> children);
  std::size_t hash_with(std::size_t tag) const;
  std::string join(char op, bool parenthesise_or) const;

 private:
  std::vector<NodePtr> children_;
};

class OrNode final : public CombineNode {
 public:
  explicit OrNode(std::vector<NodePtr> children) : CombineNode(std::move(children)) {}
  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
};

class AndNode final : public CombineNode {
 public:
  explicit AndNode(std::vector<NodePtr> children) : CombineNode(std::move(children)) {}
  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
};

}  // namespace tilesplash::detail
