// Radial Attention tile classification and row evaluation; see radial_node.h.
//
// For a row rectangle (frames [i0, i1] x patches [r0, r1]) against a column
// rectangle (frames [j0, j1] x patches [c0, c1]) every combination occurs, so
// the patch differences c - r fill [c0 - r1, c1 - r0] and the frame
// distances |i - j| fill an interval [dlo, dhi] (frame 0 set aside when the
// sink keeps it). A band |c - r| <= w keeps all of the patch pairs iff both
// ends of that interval lie within [-w, w], and some iff they overlap it.
// Distances d <= 1 keep everything; each bitlen class of larger d keeps the
// band of its window on the multiples of its stride.
#include "methods/radial/radial_node.h"

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "masks/mask_util.h"

namespace tilesplash::detail {
namespace {

constexpr std::size_t kRadialTag = 0x72616469616c;

int bit_length(std::int64_t x) { return std::bit_width(static_cast<std::uint64_t>(x)); }

}  // namespace

void check_radial_options(const RadialOptions& options) {
  if (!(std::isfinite(options.decay) && options.decay >= 0.0)) {
    throw std::invalid_argument("radial mask: decay must be a finite number >= 0, got " +
                                shortest_double(options.decay));
  }
  if (options.block < 1 || options.block >= (std::int64_t{1} << 40)) {
    throw std::invalid_argument("radial mask: block must be an integer in [1, 2^40), got " +
                                std::to_string(options.block));
  }
}

RadialRule radial_rule(const VideoGeometry& geometry, const RadialOptions& options, int bits) {
  const std::int64_t p = geometry.tokens_per_frame();
  const int bits_p = bit_length(p);
  const double l = std::ldexp(1.0, bits_p - bits);  // L(d), exact
  const double block = static_cast<double>(options.block);
  const double w = std::max(l * options.decay, block);
  RadialRule rule;
  rule.window = w >= static_cast<double>(p) ? p : static_cast<std::int64_t>(std::floor(w));
  if (l < block) {
    // floor(B / L) = floor(B * 2^(bits - bits_p)): exact in double.
    const double stride = std::floor(std::ldexp(block, bits - bits_p));
    rule.stride = stride >= 0x1p62 ? std::int64_t{1} << 62 : static_cast<std::int64_t>(stride);
  }
  return rule;
}

RadialNode::RadialNode(const VideoGeometry& geometry, RadialOptions options)
    : info_{geometry, options}, layout_((geometry.validate(), geometry)) {
  check_radial_options(options);
  for (int bits = 2; bits < 64; ++bits) rules_[bits] = radial_rule(geometry, options, bits);
}

std::int64_t RadialNode::frame_window(std::int64_t i, std::int64_t j) const {
  const std::int64_t d = std::llabs(i - j);
  if (d <= 1 || (info_.options.sink && j == 0)) return layout_.patches;
  const RadialRule& rule = rules_[bit_length(d)];
  return d % rule.stride == 0 ? rule.window : -1;
}

bool RadialNode::keeps(std::int64_t q, std::int64_t k) const {
  if (q < 0 || k < 0 || q >= layout_.tokens || k >= layout_.tokens) return false;
  const IndexRange v = layout_.video;
  const bool q_video = q >= v.begin && q < v.end;
  const bool k_video = k >= v.begin && k < v.end;
  if (!q_video || !k_video) return true;  // text rows and columns are kept whole
  const std::int64_t p = layout_.patches;
  const std::int64_t w = frame_window((q - v.begin) / p, (k - v.begin) / p);
  return w >= 0 && std::llabs((q - v.begin) % p - (k - v.begin) % p) <= w;
}

void RadialNode::accumulate(const FrameRect& rows, const FrameRect& cols, bool& any,
                            bool& all) const {
  const std::int64_t lo_diff = cols.p0 - rows.p1, hi_diff = cols.p1 - rows.p0;
  // Some / every frame distance of a group keeps the band of width w.
  const auto add = [&](bool some, bool every, std::int64_t w) {
    any = any || (some && lo_diff <= w && hi_diff >= -w);
    all = all && every && lo_diff >= -w && hi_diff <= w;
  };
  std::int64_t j0 = cols.f0;
  if (info_.options.sink && j0 == 0) {
    any = true;
    j0 = 1;
  }
  if (j0 > cols.f1) return;
  const std::int64_t e0 = rows.f0 - cols.f1, e1 = rows.f1 - j0;  // i - j
  std::int64_t dlo = 0, dhi = 0;
  if (e0 > 0) {
    dlo = e0;
    dhi = e1;
  } else if (e1 < 0) {
    dlo = -e1;
    dhi = -e0;
  } else {
    dhi = std::max(-e0, e1);
  }
  if (dlo <= 1) {
    any = true;
    dlo = 2;
  }
  for (int bits = bit_length(dlo); dlo <= dhi && bits < 64; ++bits) {
    const std::int64_t hi = std::min(dhi, (std::int64_t{1} << bits) - 1);
    const RadialRule& rule = rules_[bits];
    if (rule.stride == 1) {
      add(true, true, rule.window);
    } else {
      const std::int64_t first = ceil_div(dlo, rule.stride) * rule.stride;
      add(first <= hi, dlo == hi && dlo % rule.stride == 0, rule.window);
    }
    if (any && !all) return;
    dlo = hi + 1;
  }
}

TileKind RadialNode::classify_video(IndexRange rows, IndexRange cols) const {
  const IndexRange vr = intersect(rows, layout_.video);
  const IndexRange vc = intersect(cols, layout_.video);
  if (vr.empty() || vc.empty()) return TileKind::kEmpty;
  const std::int64_t base = layout_.video.begin;
  FrameRect row_rects[3];
  FrameRect col_rects[3];
  const int nr = split_frames(vr.begin - base, vr.end - base, layout_.patches, row_rects);
  const int nc = split_frames(vc.begin - base, vc.end - base, layout_.patches, col_rects);
  bool any = false;
  bool all = true;
  for (int i = 0; i < nr; ++i) {
    for (int j = 0; j < nc; ++j) accumulate(row_rects[i], col_rects[j], any, all);
  }
  if (!any) return TileKind::kEmpty;
  return all && vr == rows && vc == cols ? TileKind::kFull : TileKind::kPartial;
}

TileKind RadialNode::classify(IndexRange rows, IndexRange cols) const {
  const TileKind video = classify_video(rows, cols);
  const TileKind text = classify_text_area(layout_.text, layout_.tokens, rows, cols);
  if (video == TileKind::kFull || text == TileKind::kFull) return TileKind::kFull;
  if (video == TileKind::kEmpty) return text;
  if (text == TileKind::kEmpty) return video;
  // Both partial: they may still cover the tile between them (tiles on the
  // text boundary only).
  return scan_in_tokens(*this, layout_.tokens, rows, cols);
}

void RadialNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n,
                          std::uint8_t* keep) const {
  std::memset(keep, 0, static_cast<std::size_t>(n));
  if (q < 0 || q >= layout_.tokens) return;
  const IndexRange v = layout_.video;
  if (q < v.begin || q >= v.end) {
    set_ones(keep, k0, n, 0, layout_.tokens);
    return;
  }
  set_ones(keep, k0, n, layout_.text.begin, layout_.text.end);
  const std::int64_t p = layout_.patches;
  const std::int64_t i = (q - v.begin) / p, r = (q - v.begin) % p;
  const std::int64_t first = std::max(k0, v.begin), last = std::min(k0 + n, v.end) - 1;
  if (first > last) return;
  for (std::int64_t j = (first - v.begin) / p; j <= (last - v.begin) / p; ++j) {
    const std::int64_t w = frame_window(i, j);
    if (w < 0) continue;
    const std::int64_t frame = v.begin + j * p;
    set_ones(keep, k0, n, frame + std::max<std::int64_t>(0, r - w), frame + std::min(p, r + w + 1));
  }
}

std::string RadialNode::to_string() const {
  std::string text =
      "radial:" + info_.geometry.to_string() + ",decay=" + shortest_double(info_.options.decay);
  if (info_.options.block != RadialOptions{}.block) {
    text += ",block=" + std::to_string(info_.options.block);
  }
  if (info_.options.sink) text += ",sink";
  return text;
}

std::size_t RadialNode::hash() const {
  const VideoGeometry& g = info_.geometry;
  std::size_t h = kRadialTag;
  for (const std::int64_t value : {g.frames, g.height, g.width, g.text,
                                   static_cast<std::int64_t>(g.text_at), info_.options.block}) {
    h = hash_combine(h, static_cast<std::uint64_t>(value));
  }
  std::uint64_t decay_bits = 0;
  const double decay = info_.options.decay + 0.0;  // -0 and +0 hash alike
  std::memcpy(&decay_bits, &decay, sizeof(decay));
  return hash_combine(hash_combine(h, decay_bits), info_.options.sink ? 1u : 0u);
}

bool RadialNode::equals(const MaskNode& other) const {
  const RadialMaskInfo& o = static_cast<const RadialNode&>(other).info_;
  return info_.geometry == o.geometry && info_.options == o.options;
}

void RadialNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  if (q_len == layout_.tokens && kv_len == layout_.tokens) return;
  throw std::invalid_argument(
      "mask " + to_string() + ": its geometry has " + std::to_string(layout_.tokens) +
      " tokens, so q_len and kv_len must both be " + std::to_string(layout_.tokens) +
      "; got q_len " + std::to_string(q_len) + ", kv_len " + std::to_string(kv_len));
}

}  // namespace tilesplash::detail
