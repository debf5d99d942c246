// Masks with no structure to exploit: the seeded random test mask and user
// predicates. Both classify by scanning.
#include <charconv>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>
#include <system_error>

#include "masks/mask_util.h"
#include "masks/nodes.h"

namespace tilesplash::detail {
namespace {

constexpr std::size_t kRandomTag = 0x72616e646f6d;

std::string format_double(double value) {
  // Shortest text that parses back to the same double, so specs round-trip.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

}  // namespace

RandomNode::RandomNode(double density, std::uint64_t seed)
    : density_(density), seed_(seed), seed_key_(mix64(seed)), threshold_(0), always_(false) {
  if (!(density >= 0.0 && density <= 1.0)) {
    throw std::invalid_argument("Mask::random: density must be in [0, 1], got " +
                                format_double(density));
  }
  always_ = density == 1.0;
  // density < 1 is at most 1 - 2^-53, so the product stays below 2^64.
  if (!always_) threshold_ = static_cast<std::uint64_t>(std::ldexp(density, 64));
}

std::uint64_t RandomNode::row_key(std::int64_t q) const {
  return mix64(seed_key_ ^ static_cast<std::uint64_t>(q));
}

bool RandomNode::keeps(std::int64_t q, std::int64_t k) const {
  return always_ || mix64(row_key(q) ^ static_cast<std::uint64_t>(k)) < threshold_;
}

TileKind RandomNode::classify(IndexRange rows, IndexRange cols) const {
  if (always_) return TileKind::kFull;
  if (threshold_ == 0) return TileKind::kEmpty;
  return classify_by_scan(*this, rows, cols);
}

void RandomNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n,
                          std::uint8_t* keep) const {
  const std::uint64_t key = row_key(q);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint64_t h = mix64(key ^ static_cast<std::uint64_t>(k0 + i));
    keep[i] = static_cast<std::uint8_t>(always_ | (h < threshold_));
  }
}

std::string RandomNode::to_string() const {
  return "random:density=" + format_double(density_) + ",seed=" + std::to_string(seed_);
}

std::size_t RandomNode::hash() const {
  // +0.0 normalises -0.0, which compares equal.
  const double density = density_ + 0.0;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &density, sizeof(bits));
  return hash_combine(hash_combine(kRandomTag, bits), seed_);
}

bool RandomNode::equals(const MaskNode& other) const {
  const auto& o = static_cast<const RandomNode&>(other);
  return density_ == o.density_ && seed_ == o.seed_;
}

FunctionNode::FunctionNode(Predicate keep, std::string name)
    : keep_(std::move(keep)), name_(std::move(name)) {
  if (!keep_) throw std::invalid_argument("Mask::function: the predicate is empty");
}

TileKind FunctionNode::classify(IndexRange rows, IndexRange cols) const {
  return classify_by_scan(*this, rows, cols);
}

std::size_t FunctionNode::hash() const { return std::hash<const void*>{}(this); }

}  // namespace tilesplash::detail
