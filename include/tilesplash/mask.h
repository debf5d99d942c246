// Masks: *what* is attended. A Mask is an immutable, cheaply copyable value
// that answers two questions exactly: is the pair (q, k) kept, and is the tile
// [q0, q1) x [k0, k1) empty, full or partial. Built-in masks answer the tile
// question from the index ranges in O(1); user functions (and the random test
// mask) fall back to scanning. Masks compose with | and &, compare equal and
// hash, so plans built from them can be cached. Nothing here knows about tiles
// sizes or kernels: see plan.h for the plan and attention.h for the kernel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tilesplash {

// Numbering follows JAX splash attention's MaskInfo: 0 empty, 1 partial, 2 full.
enum class TileKind : std::uint8_t { kEmpty = 0, kPartial = 1, kFull = 2 };

char to_char(TileKind kind);  // 'E', 'P' or 'F'

// Half-open index range [begin, end).
struct IndexRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t size() const { return end > begin ? end - begin : 0; }
  bool empty() const { return end <= begin; }
  friend bool operator==(const IndexRange&, const IndexRange&) = default;
};

namespace detail {
class MaskNode;
}

class Mask {
 public:
  // Every pair kept.
  static Mask dense();
  // Kept when q + offset >= k.
  static Mask causal(std::int64_t offset = 0);
  // Kept when q + offset - left <= k <= q + offset + right; a missing side is
  // unbounded. Sides must be >= 0 when given.
  static Mask local(std::optional<std::int64_t> left, std::optional<std::int64_t> right,
                    std::int64_t offset = 0);
  // Kept when floor(q / chunk) == floor(k / chunk) and q >= k. chunk must be >= 1.
  static Mask chunked_causal(std::int64_t chunk);
  // Kept when begin <= k < end, for every query: the keys a padded sequence
  // really holds (key padding, e.g. a prompt shorter than its text slots:
  // mask & key_range(0, valid_length)). Tiles are full inside the range,
  // empty outside it, so a plan never visits the padding. 0 <= begin <= end.
  static Mask key_range(std::int64_t begin, std::int64_t end);
  // Bernoulli(density) per pair from a counter-based hash of (seed, q, k):
  // reproducible, for tests. density in [0, 1].
  static Mask random(double density, std::uint64_t seed);
  // Any predicate. `name` identifies it in to_string(); two function masks are
  // equal only when they share the same predicate object. Tiles are classified
  // by scanning, so plans over function masks cost O(visited area) to build.
  static Mask function(std::function<bool(std::int64_t q, std::int64_t k)> keep,
                       std::string name = "function");

  // Builds a mask from one of the library's node types (see mask_node.h).
  explicit Mask(std::shared_ptr<const detail::MaskNode> node);

  Mask operator|(const Mask& other) const;  // kept when either keeps
  Mask operator&(const Mask& other) const;  // kept when both keep

  // Indices are any int64 values, ranges any [begin, end) of them: every
  // built-in mask answers exactly over the whole range (no offset or index is
  // clamped or wraps), and a video mask keeps nothing outside its tokens.
  bool keeps(std::int64_t q, std::int64_t k) const;
  // Exact kind of the tile rows x cols (both non-empty).
  TileKind classify(IndexRange rows, IndexRange cols) const;
  // A range of keys that contains every kept key of every row in `rows`,
  // clipped to [0, kv_len). Conservative (may be wider than needed); lets the
  // planner skip empty tiles without classifying them.
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const;
  // keep[i] = keeps(q, k0 + i) for i in [0, n): the vectorisable predicate the
  // kernel's `element` mode evaluates on every pair of every visited tile.
  // Throws std::invalid_argument when k0 + n passes INT64_MAX.
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const;
  // True when classify() runs in O(1) without scanning elements.
  bool is_analytic() const;
  // Throws std::invalid_argument naming the mask when it knows its sequence
  // length (a video mask covers exactly its geometry's tokens) and q_len or
  // kv_len differ; TilePlan::build calls it, so no kernel runs such a plan.
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const;

  // Canonical text in the CLI's SPEC syntax where one exists.
  std::string to_string() const;
  std::size_t hash() const;
  friend bool operator==(const Mask& a, const Mask& b);

  const detail::MaskNode& node() const { return *node_; }

 private:
  std::shared_ptr<const detail::MaskNode> node_;
};

}  // namespace tilesplash

template <>
struct std::hash<tilesplash::Mask> {
  std::size_t operator()(const tilesplash::Mask& mask) const noexcept { return mask.hash(); }
};
