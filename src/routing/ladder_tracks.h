// The ladder walk's tracks and their block schedule (routing/ladder_scorer.cc):
// for every sampled row and chain, the keys of its hull with each key's ring,
// and, for every 64-key block of the walk, the kept keys of each track grouped
// by ring. Masks and rows are the same for every head, so all of this is
// built once per call and only the scores, weights and sums run per head.
// Memory: one byte per (track, hull key) for the rings and one int32 per
// (track, kept key) for the schedule, e.g. 64 rows x 2 chains x 0.4 of 75,600
// keys, about 16 MB, at 720p; nothing per head.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tilesplash/mask.h"

namespace tilesplash::detail {

// Keys per block of the walk: every track (a sampled row's ladder) visits a
// block in turn, so the block's K and V rows are converted and read from
// memory once for all the head's sampled rows. 64: the bf16 dot product's V
// panel (kernel::kWalkDotBlock); 32 ran no faster on the f32 loops.
inline constexpr std::int64_t kKeyBlock = 64;
static_assert(kKeyBlock <= 64, "a block's keys are the bits of one word (ring_keys)");

// One sampled row's walk over one chain: the keys [begin, end) of its hull,
// each with its ring (level[i] < rings) or none (level[i] >= rings). A row on
// which the chain is nested is one track of m rings; otherwise it is m tracks
// of one ring each (rung `rung` alone).
struct Track {
  std::int64_t row = 0;  // index into rows
  std::int64_t begin = 0, end = 0;
  std::size_t level = 0;  // offset into ChainTracks::level
  std::size_t rings = 0;
  std::size_t rung = 0;   // rings == 1: the chain's rung it scores
  std::size_t state = 0;  // offset of its first ring's state
};

// A track's kept keys in one block: index[starts[r] .. starts[r + 1]) are
// ring r's (offsets from the block's first key, ascending), and the bits of
// ring_keys[starts + r] the same keys (bit j: key j of the block).
struct BlockVisit {
  std::uint32_t track = 0;
  std::size_t starts = 0;  // into ChainTracks::starts: rings + 1 entries
  std::size_t index = 0;   // into ChainTracks::index
};

// A chain's tracks for every sampled row, and the visits of every block of
// the walk's key range: block b's are visits[block_visits[b] ..
// block_visits[b + 1]).
struct ChainTracks {
  std::vector<Track> tracks;
  std::vector<std::uint8_t> level;
  std::size_t states = 0;
  std::vector<std::size_t> block_visits;
  std::vector<BlockVisit> visits;
  std::vector<std::uint32_t> starts;
  std::vector<std::uint64_t> ring_keys;  // one per entry of starts
  std::vector<std::int32_t> index;
};

// The tracks of `chain` (indices into masks, narrowest rung first) for every
// sampled row: hulls, rings, nesting.
void make_tracks(std::span<const Mask> masks, std::span<const std::int64_t> rows,
                 std::int64_t kv_len, std::span<const std::size_t> chain, ChainTracks& s);

// The keys the walk covers: every track's hull and `dense` (empty: none).
IndexRange walk_range(std::span<const ChainTracks> chains, IndexRange dense);

// c's visits of every kKeyBlock block of `range`, from range.begin.
void schedule_blocks(ChainTracks& c, IndexRange range);

}  // namespace tilesplash::detail
