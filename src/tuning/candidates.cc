// The tile sizes the tuner tries, in one list, and the fallback when nothing
// is cached. The list spans small tiles that hug a band's diagonal edge (few
// wasted pairs, short inner loops) to the article's 3,328-row query tile
// (long dense loops, more boundary work); block_kv stays within the kernel's
// limits (a multiple of 64 up to 1024) and at most 512, past which a tile's
// K and V no longer share L2 with the scores at d = 128.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "tilesplash/kernel_limits.h"
#include "tilesplash/tuning.h"

namespace tilesplash {
namespace {

// Small tiles first. Pruned by hand from {32..3328} x {64..512}: tiny query
// tiles with wide kv tiles (and the reverse) lose on both counts.
constexpr std::array<BlockSizes, 19> kCandidates{{
    {32, 64},    {32, 128},                            //
    {64, 64},    {64, 128},   {64, 256},               //
    {128, 64},   {128, 128},  {128, 256}, {128, 512},  //
    {256, 128},  {256, 256},  {256, 512},              //
    {512, 128},  {512, 256},  {512, 512},              //
    {1024, 256}, {1024, 512},                          //
    {3328, 256}, {3328, 512},                          //
}};

// block_kv comes in these steps: a kv block wider than the keys rounded up to
// one step changes nothing.
constexpr std::int64_t kKvGranule = kernel_limits::kBlockKvMultiple;

std::int64_t round_up(std::int64_t value, std::int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// The loop variants (KernelVariant): one, two or four register tiles of rows
// per pass over a key panel and V slice, with and without prefetching the
// next tile. The default (one, no prefetch) first: on a Zen 4 a 64-key f32
// K panel (32 KiB at d = 128) fills the whole L1, and the tile streams from
// L2 at a third of its bandwidth, so reuse from L1 has little to win there;
// a core with two 512-bit FMA ports needs twice the bytes per cycle.
constexpr std::array<KernelVariant, 6> kVariants{{
    {1, false},
    {2, false},
    {4, false},
    {1, true},
    {2, true},
    {4, true},
}};

}  // namespace

std::span<const BlockSizes> tile_candidates() { return kCandidates; }

std::span<const KernelVariant> kernel_variants() { return kVariants; }

std::vector<BlockSizes> tile_candidates_for(std::int64_t q_len, std::int64_t kv_len) {
  // Clamp each side to the smallest candidate value that already covers the
  // whole length; candidates that clamp to the same pair are one plan.
  auto cover = [](std::int64_t length, std::int64_t value, auto member) {
    std::int64_t smallest_cover = -1;
    for (const BlockSizes& c : kCandidates) {
      const std::int64_t v = c.*member;
      if (v >= length && (smallest_cover < 0 || v < smallest_cover)) smallest_cover = v;
    }
    return (smallest_cover >= 0 && value > smallest_cover) ? smallest_cover : value;
  };
  const std::int64_t kv_cover = round_up(std::max<std::int64_t>(kv_len, 1), kKvGranule);
  std::vector<BlockSizes> out;
  for (const BlockSizes& c : kCandidates) {
    const BlockSizes clamped{cover(q_len, c.block_q, &BlockSizes::block_q),
                             cover(kv_cover, c.block_kv, &BlockSizes::block_kv)};
    if (std::find(out.begin(), out.end(), clamped) == out.end()) out.push_back(clamped);
  }
  return out;
}

// One default for every target, because it measures best on both ISAs:
// - avx512bf16 (Zen 4, the README's tile-size tables): on wan2.1-14b-720p's
//   spatial band at 10%, 25% and 50% density, 256 x 256 ran within 3.5% of the
//   fastest candidate of a full-run sweep in both bf16 and f32, while the
//   least-boundary tile (32 x 64) was 1.3-1.7x slower and the article's
//   3,328-row query tile 1.4-1.8x slower.
// - avx2 (Zen 3, docs/kernel.md): dense f32 at N = 8192 ran fastest at
//   256-512 query rows (512 x 256 within 1% of 256 x 256 on two threads,
//   128-row tiles 3-5% slower: each tile's K and V come from L3 for the first
//   row group, so fewer rows amortise that worse); on the 25% band of 32,760
//   tokens 256 x 256 was the fastest tile in CPU time, sparse_vs_ideal 1.07.
// Shorter sequences get a query tile no longer than the sequence.
BlockSizes heuristic_blocks(std::int64_t q_len, std::int64_t kv_len, std::int64_t head_dim,
                            DType dtype) {
  static_cast<void>(head_dim);
  static_cast<void>(dtype);
  const std::int64_t block_q = std::clamp<std::int64_t>(q_len, 1, 256);
  const std::int64_t block_kv =
      std::clamp<std::int64_t>(round_up(std::max<std::int64_t>(kv_len, 1), kKvGranule), 64, 256);
  return {block_q, block_kv};
}

}  // namespace tilesplash
