// The ladder walk's tracks and block schedule; see ladder_tracks.h.
#include "routing/ladder_tracks.h"

#include <algorithm>
#include <array>
#include <limits>

namespace tilesplash::detail {

void make_tracks(std::span<const Mask> masks, std::span<const std::int64_t> rows,
                 std::int64_t kv_len, std::span<const std::size_t> chain, ChainTracks& s) {
  const std::size_t m = chain.size();
  std::vector<std::uint8_t> keep;
  s.tracks.clear();
  s.level.clear();
  std::size_t& states = s.states;
  states = 0;
  for (std::int64_t j = 0; j < static_cast<std::int64_t>(rows.size()); ++j) {
    const std::int64_t q = rows[static_cast<std::size_t>(j)];
    IndexRange hull{};
    for (const std::size_t c : chain) {
      const IndexRange part = masks[c].kv_hull({q, q + 1}, kv_len);
      if (part.empty()) continue;
      hull = hull.empty()
                 ? part
                 : IndexRange{std::min(hull.begin, part.begin), std::max(hull.end, part.end)};
    }
    const std::size_t n = static_cast<std::size_t>(hull.size());
    keep.assign(m * n, 0);
    for (std::size_t i = 0; i < m && n > 0; ++i) {
      masks[chain[i]].eval_row(q, hull.begin, hull.size(), keep.data() + i * n);
    }
    // Nested: no key kept by rung i and dropped by rung i + 1. Then a key's
    // ring is the first rung that keeps it: m minus the rungs that keep it.
    std::uint8_t dropped = 0;
    for (std::size_t i = 0; i + 1 < m; ++i) {
      const std::uint8_t* a = keep.data() + i * n;
      const std::uint8_t* b = a + n;
      for (std::size_t k = 0; k < n; ++k) dropped |= (a[k] != 0) & (b[k] == 0);
    }
    const std::size_t offset = s.level.size();
    if (dropped == 0) {
      s.level.resize(offset + n, static_cast<std::uint8_t>(m));
      std::uint8_t* level = s.level.data() + offset;
      for (std::size_t i = 0; i < m; ++i) {
        const std::uint8_t* a = keep.data() + i * n;
        for (std::size_t k = 0; k < n; ++k) level[k] -= a[k] != 0;
      }
      s.tracks.push_back({j, hull.begin, hull.end, offset, m, 0, states});
      states += m;
      continue;
    }
    for (std::size_t i = 0; i < m; ++i) {  // each rung on its own: one ring
      const std::size_t at = s.level.size();
      s.level.resize(at + n);
      const std::uint8_t* a = keep.data() + i * n;
      for (std::size_t k = 0; k < n; ++k) s.level[at + k] = a[k] != 0 ? 0 : 1;
      s.tracks.push_back({j, hull.begin, hull.end, at, 1, i, states});
      states += 1;
    }
  }
}

IndexRange walk_range(std::span<const ChainTracks> chains, IndexRange dense) {
  std::int64_t first = dense.empty() ? std::numeric_limits<std::int64_t>::max() : dense.begin;
  std::int64_t last = dense.empty() ? 0 : dense.end;
  for (const ChainTracks& c : chains) {
    for (const Track& t : c.tracks) {
      if (t.begin >= t.end) continue;
      first = std::min(first, t.begin);
      last = std::max(last, t.end);
    }
  }
  return first < last ? IndexRange{first, last} : IndexRange{};
}

namespace {

// Track t's kept keys of [lo, hi) (block from k0), grouped by ring, appended
// to c's visits; nothing when it keeps none there.
void visit(ChainTracks& c, std::uint32_t t, std::int64_t k0, std::int64_t lo, std::int64_t hi) {
  const Track& track = c.tracks[t];
  const std::uint8_t* level = c.level.data() + track.level + (lo - track.begin);
  const std::size_t starts = c.starts.size();
  c.starts.resize(starts + track.rings + 1, 0);
  std::uint32_t* start = c.starts.data() + starts;
  for (std::int64_t k = lo; k < hi; ++k) {
    if (level[k - lo] < track.rings) ++start[level[k - lo] + 1];
  }
  for (std::size_t r = 0; r < track.rings; ++r) start[r + 1] += start[r];
  const std::uint32_t kept = start[track.rings];
  if (kept == 0) {
    c.starts.resize(starts);
    return;
  }
  const std::size_t index = c.index.size();
  c.index.resize(index + kept);
  std::array<std::uint32_t, 256> fill;  // rings are counted in a byte (ladder_chains)
  std::copy(start, start + track.rings, fill.begin());
  c.ring_keys.resize(c.starts.size(), 0);
  std::uint64_t* keys = c.ring_keys.data() + starts;
  for (std::int64_t k = lo; k < hi; ++k) {
    const std::uint8_t ring = level[k - lo];
    if (ring >= track.rings) continue;
    c.index[index + fill[ring]++] = static_cast<std::int32_t>(k - k0);
    keys[ring] |= std::uint64_t{1} << (k - k0);
  }
  c.visits.push_back({t, starts, index});
}

}  // namespace

void schedule_blocks(ChainTracks& c, IndexRange range) {
  c.block_visits.assign(1, 0);
  c.visits.clear();
  c.starts.clear();
  c.ring_keys.clear();
  c.index.clear();
  for (std::int64_t k0 = range.begin; k0 < range.end; k0 += kKeyBlock) {
    const std::int64_t k1 = std::min(k0 + kKeyBlock, range.end);
    for (std::uint32_t t = 0; t < c.tracks.size(); ++t) {
      const std::int64_t lo = std::max(k0, c.tracks[t].begin), hi = std::min(k1, c.tracks[t].end);
      if (lo < hi) visit(c, t, k0, lo, hi);
    }
    c.block_visits.push_back(c.visits.size());
  }
}

}  // namespace tilesplash::detail
