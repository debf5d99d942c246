// Small helpers shared by the mask node implementations (and by other
// modules' nodes): overflow-safe bound arithmetic, hashing, and the interval
// fill that every band-like eval_row reduces to.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "tilesplash/mask_node.h"

namespace tilesplash::detail {

// Indices are any int64 values (keeps() takes any pair; a range [begin, end)
// holds the indices below end). Differences of two indices, and an index plus
// or minus a bound, need 65 bits: nodes compute them in 128 bits, so no
// offset, band or index is ever clamped or wrapped.
using Wide = __int128;

// A missing band side: beyond every difference of two int64 indices (|k - q|
// < 2^64) and every bound made of an offset and a side (< 2^64 in magnitude).
inline constexpr Wide kNoBound = Wide{1} << 66;

// Video bands are half-widths over at most 2^40 tokens: clamping them to
// kUnbounded keeps sums with in-range indices far from int64 overflow and
// cannot change which in-range pairs are kept.
inline constexpr std::int64_t kUnbounded = std::int64_t{1} << 61;

inline std::int64_t clamp_bound(Wide value) {
  if (value > kUnbounded) return kUnbounded;
  if (value < -kUnbounded) return -kUnbounded;
  return static_cast<std::int64_t>(value);
}

// Rounds toward negative infinity, so chunk starts stay correct for q < 0.
inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t quotient = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}

// splitmix64's finaliser: a bijection with full avalanche.
inline std::uint64_t mix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline std::size_t hash_combine(std::size_t seed, std::uint64_t value) {
  return static_cast<std::size_t>(mix64(static_cast<std::uint64_t>(seed) ^ mix64(value)));
}

// keep[i] = (lo <= i && i <= hi) for i in [0, n). Three memsets beat any
// per-element compare: the kept part of a band row is always one interval.
inline void fill_interval(std::uint8_t* keep, std::int64_t n, std::int64_t lo, std::int64_t hi) {
  if (n <= 0) return;
  const std::int64_t begin = std::clamp<std::int64_t>(lo, 0, n);
  const std::int64_t end = std::clamp<std::int64_t>(hi < lo ? begin : hi + 1, begin, n);
  std::memset(keep, 0, static_cast<std::size_t>(begin));
  std::memset(keep + begin, 1, static_cast<std::size_t>(end - begin));
  std::memset(keep + end, 0, static_cast<std::size_t>(n - end));
}

// keep[i] = (lo <= k0 + i && k0 + i <= hi) for i in [0, n): fill_interval
// for key bounds of any size, clipped in 128 bits before narrowing.
inline void fill_keys(std::uint8_t* keep, std::int64_t k0, std::int64_t n, Wide lo, Wide hi) {
  const auto clip = [n](Wide value) {
    return static_cast<std::int64_t>(std::clamp<Wide>(value, -1, n));
  };
  fill_interval(keep, n, clip(lo - k0), clip(hi - k0));
}

// Shortest text that parses back to the same double, so specs round-trip.
inline std::string shortest_double(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

// Structural equality of two nodes (same dynamic type, same parameters).
bool nodes_equal(const MaskNode& a, const MaskNode& b);

}  // namespace tilesplash::detail
