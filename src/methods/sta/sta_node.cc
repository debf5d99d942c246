// Sliding Tile Attention tile classification and row evaluation; see
// sta_node.h. In one dimension, g(q) = clamp(q, D, n - 1 - D) never falls
// and steps by at most one, so the keys that the query tiles [qa, qb] keep
// form the interval [g(qa) - D, g(qb) + D]: every pair is kept iff the key
// tiles lie within [g(qb) - D, g(qa) + D], some pair iff they meet the first.
#include "methods/sta/sta_node.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "geometry/frame_rects.h"
#include "masks/mask_util.h"

namespace tilesplash::detail {
namespace {

constexpr std::size_t kStaTag = 0x737461;
constexpr std::size_t kStaRunTag = 0x7374617275;

std::string triple(const std::array<std::int64_t, 3>& v) {
  return std::to_string(v[0]) + "x" + std::to_string(v[1]) + "x" + std::to_string(v[2]);
}

std::string describe(const StaMaskInfo& info) {
  return info.geometry.to_string() + ",tile=" + triple(info.options.tile) +
         ",window=" + triple(info.options.window);
}

std::size_t hash_info(std::size_t tag, const StaMaskInfo& info) {
  const VideoGeometry& g = info.geometry;
  std::size_t h = tag;
  for (const std::int64_t value :
       {g.frames, g.height, g.width, g.text, static_cast<std::int64_t>(g.text_at)}) {
    h = hash_combine(h, static_cast<std::uint64_t>(value));
  }
  for (int d = 0; d < 3; ++d) {
    h = hash_combine(h, static_cast<std::uint64_t>(info.options.tile[d]));
    h = hash_combine(h, static_cast<std::uint64_t>(info.options.window[d]));
  }
  return h;
}

void check_tokens(const std::string& mask, std::int64_t tokens, std::int64_t q_len,
                  std::int64_t kv_len) {
  if (q_len == tokens && kv_len == tokens) return;
  throw std::invalid_argument("mask " + mask + ": its geometry has " + std::to_string(tokens) +
                              " tokens, so q_len and kv_len must both be " +
                              std::to_string(tokens) + "; got q_len " + std::to_string(q_len) +
                              ", kv_len " + std::to_string(kv_len));
}

}  // namespace

void check_sta_options(const StaOptions& options) {
  constexpr std::int64_t kMax = std::int64_t{1} << 31;
  for (int d = 0; d < 3; ++d) {
    if (options.tile[d] < 1 || options.tile[d] >= kMax) {
      throw std::invalid_argument("sta mask: tile sizes must be integers in [1, 2^31), got " +
                                  triple(options.tile));
    }
    if (options.window[d] < 1 || options.window[d] >= kMax) {
      throw std::invalid_argument("sta mask: window sizes must be integers in [1, 2^31), got " +
                                  triple(options.window));
    }
  }
}

StaGrid::StaGrid(const VideoGeometry& geometry, const StaOptions& options)
    : dims{geometry.frames, geometry.height, geometry.width}, tile(options.tile) {
  geometry.validate();
  check_sta_options(options);
  for (int d = 0; d < 3; ++d) {
    count[d] = (dims[d] + tile[d] - 1) / tile[d];
    half[d] = options.window[d] >= count[d] ? -1 : options.window[d] / 2;
  }
}

void StaGrid::check(int dim, std::int64_t qa, std::int64_t qb, std::int64_t ka, std::int64_t kb,
                    bool& any, bool& all) const {
  const std::int64_t d = half[dim];
  if (d < 0) return;
  const std::int64_t ga = std::clamp(qa, d, count[dim] - 1 - d);
  const std::int64_t gb = std::clamp(qb, d, count[dim] - 1 - d);
  any = any && ka <= gb + d && kb >= ga - d;
  all = all && kb <= ga + d && ka >= gb - d;
}

bool StaGrid::keeps_tiles(const std::array<std::int64_t, 3>& q,
                          const std::array<std::int64_t, 3>& k) const {
  bool any = true, all = true;
  for (int d = 0; d < 3; ++d) check(d, q[d], q[d], k[d], k[d], any, all);
  return any;
}

std::array<std::int64_t, 2> StaGrid::reach(int dim, std::int64_t qa, std::int64_t qb) const {
  const std::int64_t d = half[dim];
  if (d < 0) return {0, count[dim] - 1};
  const std::int64_t ga = std::clamp(qa, d, count[dim] - 1 - d);
  const std::int64_t gb = std::clamp(qb, d, count[dim] - 1 - d);
  return {std::max<std::int64_t>(0, ga - d), std::min(count[dim] - 1, gb + d)};
}

void StaGrid::check_boxes(const GridBox& q, const GridBox& k, bool& any, bool& all) const {
  bool some = true, every = true;
  for (int d = 0; d < 3; ++d) check(d, q.lo[d], q.hi[d], k.lo[d], k.hi[d], some, every);
  any = any || some;
  all = all && every;
}

std::int64_t StaGrid::extent(int dim, std::int64_t t) const {
  return std::min(tile[dim], dims[dim] - t * tile[dim]);
}

std::int64_t StaGrid::tile_start(const std::array<std::int64_t, 3>& t) const {
  const std::int64_t fa = extent(0, t[0]), hb = extent(1, t[1]);
  return t[0] * tile[0] * dims[1] * dims[2] + t[1] * fa * tile[1] * dims[2] +
         t[2] * fa * hb * tile[2];
}

std::int64_t StaGrid::tile_len(const std::array<std::int64_t, 3>& t) const {
  return extent(0, t[0]) * extent(1, t[1]) * extent(2, t[2]);
}

std::array<std::int64_t, 3> StaGrid::tile_at(std::int64_t position) const {
  // Every tile before the last of a dimension has the full size, so the
  // quotient by the full size finds the slab, row and tile.
  const std::int64_t slab = tile[0] * dims[1] * dims[2];
  const std::int64_t a = std::min(position / slab, count[0] - 1);
  const std::int64_t in_slab = position - a * slab;
  const std::int64_t fa = extent(0, a);
  const std::int64_t b = std::min(in_slab / (fa * tile[1] * dims[2]), count[1] - 1);
  const std::int64_t in_row = in_slab - b * fa * tile[1] * dims[2];
  const std::int64_t hb = extent(1, b);
  const std::int64_t c = std::min(in_row / (fa * hb * tile[2]), count[2] - 1);
  return {a, b, c};
}

std::int64_t StaGrid::linear(const std::array<std::int64_t, 3>& t) const {
  return (t[0] * count[1] + t[1]) * count[2] + t[2];
}

std::int64_t StaGrid::source(std::int64_t position) const {
  const std::array<std::int64_t, 3> t = tile_at(position);
  const std::int64_t offset = position - tile_start(t);
  const std::int64_t hb = extent(1, t[1]), wc = extent(2, t[2]);
  const std::int64_t f = t[0] * tile[0] + offset / (hb * wc);
  const std::int64_t y = t[1] * tile[1] + (offset / wc) % hb;
  const std::int64_t x = t[2] * tile[2] + offset % wc;
  return (f * dims[1] + y) * dims[2] + x;
}

std::array<std::int64_t, 3> StaGrid::token_tile(std::int64_t u) const {
  const std::int64_t f = u / (dims[1] * dims[2]);
  const std::int64_t y = (u / dims[2]) % dims[1];
  const std::int64_t x = u % dims[2];
  return {f / tile[0], y / tile[1], x / tile[2]};
}

StaNode::StaNode(const VideoGeometry& geometry, StaOptions options)
    : info_{geometry, options},
      grid_(geometry, options),
      video_(geometry.video_range()),
      text_(geometry.text_range()),
      tokens_(geometry.tokens()) {}

bool StaNode::keeps(std::int64_t q, std::int64_t k) const {
  if (q < 0 || k < 0 || q >= tokens_ || k >= tokens_) return false;
  const bool q_video = q >= video_.begin && q < video_.end;
  const bool k_video = k >= video_.begin && k < video_.end;
  if (!q_video || !k_video) return true;  // text rows and columns are kept whole
  return grid_.keeps_tiles(grid_.token_tile(q - video_.begin), grid_.token_tile(k - video_.begin));
}

TileKind StaNode::classify_video(IndexRange rows, IndexRange cols) const {
  const IndexRange vr = intersect(rows, video_);
  const IndexRange vc = intersect(cols, video_);
  if (vr.empty() || vc.empty()) return TileKind::kEmpty;
  GridBox row_boxes[5];
  GridBox col_boxes[5];
  const int nr =
      split_boxes(vr.begin - video_.begin, vr.end - 1 - video_.begin, grid_.dims, row_boxes);
  const int nc =
      split_boxes(vc.begin - video_.begin, vc.end - 1 - video_.begin, grid_.dims, col_boxes);
  // Token boxes to tile boxes: every tile between the end tiles is touched.
  for (GridBox* boxes : {row_boxes, col_boxes}) {
    for (int i = 0; i < 5; ++i) {
      for (int d = 0; d < 3; ++d) {
        boxes[i].lo[d] /= grid_.tile[d];
        boxes[i].hi[d] /= grid_.tile[d];
      }
    }
  }
  bool any = false, all = true;
  for (int i = 0; i < nr && (all || !any); ++i) {
    for (int j = 0; j < nc; ++j) grid_.check_boxes(row_boxes[i], col_boxes[j], any, all);
  }
  if (!any) return TileKind::kEmpty;
  return all && vr == rows && vc == cols ? TileKind::kFull : TileKind::kPartial;
}

TileKind StaNode::classify(IndexRange rows, IndexRange cols) const {
  const TileKind video = classify_video(rows, cols);
  const TileKind text = classify_text_area(text_, tokens_, rows, cols);
  if (video == TileKind::kFull || text == TileKind::kFull) return TileKind::kFull;
  if (video == TileKind::kEmpty) return text;
  if (text == TileKind::kEmpty) return video;
  return scan_in_tokens(*this, tokens_, rows, cols);  // text boundary tiles only
}

void StaNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const {
  std::memset(keep, 0, static_cast<std::size_t>(n));
  if (q < 0 || q >= tokens_) return;
  if (q < video_.begin || q >= video_.end) {
    set_ones(keep, k0, n, 0, tokens_);
    return;
  }
  set_ones(keep, k0, n, text_.begin, text_.end);
  const std::int64_t first = std::max(k0, video_.begin) - video_.begin;
  const std::int64_t last = std::min(k0 + n, video_.end) - 1 - video_.begin;
  if (first > last) return;
  const std::array<std::int64_t, 3> t = grid_.token_tile(q - video_.begin);
  std::array<std::int64_t, 3> lo{}, hi{};
  for (int d = 0; d < 3; ++d) {
    const std::array<std::int64_t, 2> tiles = grid_.reach(d, t[d], t[d]);
    lo[d] = tiles[0] * grid_.tile[d];
    hi[d] = std::min(grid_.dims[d], (tiles[1] + 1) * grid_.tile[d]) - 1;
  }
  const std::int64_t h = grid_.dims[1], w = grid_.dims[2];
  // Kept keys: frames [lo0, hi0] x rows [lo1, hi1] x columns [lo2, hi2], one
  // run of columns per (frame, row) within the keys asked for.
  for (std::int64_t f = std::max(lo[0], first / (h * w)); f <= std::min(hi[0], last / (h * w));
       ++f) {
    for (std::int64_t y = lo[1]; y <= hi[1]; ++y) {
      const std::int64_t row = video_.begin + (f * h + y) * w;
      set_ones(keep, k0, n, row + lo[2], row + hi[2] + 1);
    }
  }
}

std::string StaNode::to_string() const { return "sta:" + describe(info_); }

std::size_t StaNode::hash() const { return hash_info(kStaTag, info_); }

bool StaNode::equals(const MaskNode& other) const {
  const StaMaskInfo& o = static_cast<const StaNode&>(other).info_;
  return info_.geometry == o.geometry && info_.options == o.options;
}

void StaNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  check_tokens(to_string(), tokens_, q_len, kv_len);
}

StaRunNode::StaRunNode(const VideoGeometry& geometry, StaOptions options)
    : info_{geometry, options},
      grid_(geometry, options),
      video_tokens_(geometry.video_tokens()),
      tokens_(geometry.tokens()) {}

bool StaRunNode::keeps(std::int64_t q, std::int64_t k) const {
  if (q < 0 || k < 0 || q >= tokens_ || k >= tokens_) return false;
  if (q >= video_tokens_ || k >= video_tokens_) return true;
  return grid_.keeps_tiles(grid_.tile_at(q), grid_.tile_at(k));
}

TileKind StaRunNode::classify_video(IndexRange rows, IndexRange cols) const {
  const IndexRange vr = intersect(rows, {0, video_tokens_});
  const IndexRange vc = intersect(cols, {0, video_tokens_});
  if (vr.empty() || vc.empty()) return TileKind::kEmpty;
  GridBox row_boxes[5];
  GridBox col_boxes[5];
  const int nr = split_boxes(grid_.linear(grid_.tile_at(vr.begin)),
                             grid_.linear(grid_.tile_at(vr.end - 1)), grid_.count, row_boxes);
  const int nc = split_boxes(grid_.linear(grid_.tile_at(vc.begin)),
                             grid_.linear(grid_.tile_at(vc.end - 1)), grid_.count, col_boxes);
  bool any = false, all = true;
  for (int i = 0; i < nr && (all || !any); ++i) {
    for (int j = 0; j < nc; ++j) grid_.check_boxes(row_boxes[i], col_boxes[j], any, all);
  }
  if (!any) return TileKind::kEmpty;
  return all && vr == rows && vc == cols ? TileKind::kFull : TileKind::kPartial;
}

TileKind StaRunNode::classify(IndexRange rows, IndexRange cols) const {
  const TileKind video = classify_video(rows, cols);
  const TileKind text = classify_text_area({video_tokens_, tokens_}, tokens_, rows, cols);
  if (video == TileKind::kFull || text == TileKind::kFull) return TileKind::kFull;
  if (video == TileKind::kEmpty) return text;
  if (text == TileKind::kEmpty) return video;
  return scan_in_tokens(*this, tokens_, rows, cols);
}

IndexRange StaRunNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  const IndexRange r = intersect(rows, {0, tokens_});
  if (r.empty()) return {};
  if (r.end > video_tokens_) return intersect({0, tokens_}, {0, kv_len});  // text rows
  GridBox boxes[5];
  const int count = split_boxes(grid_.linear(grid_.tile_at(r.begin)),
                                grid_.linear(grid_.tile_at(r.end - 1)), grid_.count, boxes);
  std::int64_t begin = video_tokens_, end = 0;
  for (int i = 0; i < count; ++i) {
    std::array<std::int64_t, 3> lo{}, hi{};
    for (int d = 0; d < 3; ++d) {
      const std::array<std::int64_t, 2> tiles = grid_.reach(d, boxes[i].lo[d], boxes[i].hi[d]);
      lo[d] = tiles[0];
      hi[d] = tiles[1];
    }
    // Raster order: the box's first tile starts first, its last ends last.
    begin = std::min(begin, grid_.tile_start(lo));
    end = std::max(end, grid_.tile_start(hi) + grid_.tile_len(hi));
  }
  if (tokens_ > video_tokens_) end = tokens_;  // the text columns
  return intersect({begin, end}, {0, kv_len});
}

void StaRunNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n,
                          std::uint8_t* keep) const {
  std::memset(keep, 0, static_cast<std::size_t>(n));
  if (q < 0 || q >= tokens_) return;
  if (q >= video_tokens_) {
    set_ones(keep, k0, n, 0, tokens_);
    return;
  }
  set_ones(keep, k0, n, video_tokens_, tokens_);
  const std::array<std::int64_t, 3> t = grid_.tile_at(q);
  std::array<std::array<std::int64_t, 2>, 3> reach{};
  for (int d = 0; d < 3; ++d) reach[d] = grid_.reach(d, t[d], t[d]);
  // A row of key tiles (fixed t, h tile) is one contiguous run of keys.
  for (std::int64_t a = reach[0][0]; a <= reach[0][1]; ++a) {
    for (std::int64_t b = reach[1][0]; b <= reach[1][1]; ++b) {
      const std::array<std::int64_t, 3> first{a, b, reach[2][0]}, last{a, b, reach[2][1]};
      set_ones(keep, k0, n, grid_.tile_start(first), grid_.tile_start(last) + grid_.tile_len(last));
    }
  }
}

std::string StaRunNode::to_string() const { return "sta_tile_major:" + describe(info_); }

std::size_t StaRunNode::hash() const { return hash_info(kStaRunTag, info_); }

bool StaRunNode::equals(const MaskNode& other) const {
  const StaMaskInfo& o = static_cast<const StaRunNode&>(other).info_;
  return info_.geometry == o.geometry && info_.options == o.options;
}

void StaRunNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  check_tokens(to_string(), tokens_, q_len, kv_len);
}

}  // namespace tilesplash::detail
