// Video attention: the shape of one video diffusion sequence and the masks
// Sparse VideoGen runs on it. A VideoGeometry says where the F x (h * w) latent
// tokens and the T text tokens sit in the sequence (frame-major video, text
// before, after or absent); presets name the shapes of the released models
// (Wan 2.1, HunyuanVideo, CogVideoX). The spatial mask keeps a band |q - k| <= W in that
// frame-major order, the temporal mask the same band in token-major order (the same patch of every
// frame side by side); either can OR in the first-frame sink and the text
// rows/columns. Every mask is defined on the original frame-major indices and
// classifies tiles analytically. Because the temporal mask *is* a band after
// the token-major permutation, both kinds execute as one shared band plan:
// video_run_masks() says how, and the permutation functions move Q/K/V rows
// between the two orders (text rows stay in place).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tilesplash/mask.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"

namespace tilesplash {

enum class TextPlacement : std::uint8_t { kNone, kBefore, kAfter };

std::string_view to_string(TextPlacement placement);  // "none", "before", "after"

// One sequence of tokens() = text_tokens() + frames * height * width tokens.
// Video token (f, p), p = y * width + x, sits at video_range().begin + f * P + p.
struct VideoGeometry {
  std::int64_t frames = 1;
  std::int64_t height = 1;  // latent tokens per column
  std::int64_t width = 1;   // latent tokens per row
  std::int64_t text = 0;    // text tokens; placed by text_at (must be kNone iff text == 0)
  TextPlacement text_at = TextPlacement::kNone;

  // Throws std::invalid_argument naming the field and the value it needs.
  void validate() const;

  std::int64_t tokens_per_frame() const { return height * width; }  // P
  std::int64_t video_tokens() const { return frames * tokens_per_frame(); }
  std::int64_t text_tokens() const { return text_at == TextPlacement::kNone ? 0 : text; }
  std::int64_t tokens() const { return video_tokens() + text_tokens(); }  // N
  IndexRange video_range() const;
  IndexRange text_range() const;  // empty without text
  bool is_video(std::int64_t n) const;

  // Sequence index of token n after moving to token-major order (video
  // (f, p) goes to p * F + f within the video range) and back. Text and
  // out-of-range indices map to themselves.
  std::int64_t to_token_major(std::int64_t n) const;
  std::int64_t to_frame_major(std::int64_t n) const;

  // "frames=F,height=h,width=w[,text=T,text_at=before|after]"
  std::string to_string() const;
  friend bool operator==(const VideoGeometry&, const VideoGeometry&) = default;
};

// Parses "preset=NAME" or "frames=F,height=h,width=w[,text=T,text_at=before|after]".
// Throws std::invalid_argument naming the bad part.
VideoGeometry parse_video_geometry(std::string_view text);

// A released model's shape: geometry, heads, head dim and layers.
struct VideoPreset {
  std::string_view name;
  VideoGeometry geometry;
  std::int64_t heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t layers = 0;
  std::string_view model;
};

// wan2.1-1.3b-480p, wan2.1-14b-720p, wan2.1-14b-1440p, hunyuan-720p, cogvideox1.5-768p.
std::span<const VideoPreset> video_presets();
// Throws std::invalid_argument listing the valid names.
const VideoPreset& video_preset(std::string_view name);

// A video shape as a caller names it: a preset's, or a custom geometry.
struct VideoShape {
  VideoGeometry geometry;
  const VideoPreset* preset = nullptr;  // the preset it was named by, if any
  // The preset's head dim, else `fallback`.
  std::int64_t head_dim(std::int64_t fallback = 128) const {
    return preset != nullptr ? preset->head_dim : fallback;
  }
};

// One string that names a shape: a preset name, or GEOM (anything with '=';
// "preset=NAME" counts as the preset). Validated; throws
// std::invalid_argument naming the bad part.
VideoShape parse_video_shape(std::string_view text);

// The one rule for a preset name and a GEOM given side by side (the CLI's
// --preset and --geometry): at most one of them (both: an error, never one
// silently overriding the other); neither: `fallback_preset`, or an error
// when it is empty. The labels name the two in messages ("give exactly one
// of --preset NAME or --geometry GEOM, got both").
VideoShape choose_video_shape(std::string_view preset, std::string_view geometry,
                              std::string_view fallback_preset = {},
                              std::string_view preset_label = "preset",
                              std::string_view geometry_label = "geometry");

enum class VideoMaskKind : std::uint8_t { kSpatial, kTemporal };
std::string_view to_string(VideoMaskKind kind);  // "spatial", "temporal"

struct VideoMaskOptions {
  bool sink = false;       // OR: every video query keeps every key of frame 0
  bool text_full = false;  // OR: every pair with a text query or a text key
  friend bool operator==(const VideoMaskOptions&, const VideoMaskOptions&) = default;
};

// The Sparse VideoGen masks on the original (frame-major) indices, pairs with
// an index outside [0, tokens()) never kept:
//   spatial:  q, k both video and |q - k| <= band
//   temporal: q, k both video and |q' - k'| <= band, q' = to_token_major(q)
// ORed with the sink and text areas the options ask for. band >= 0, in tokens.
// The mask prints as its SPEC (`spatial:frames=...,band=W[,sink][,text_full]`).
Mask video_mask(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                VideoMaskOptions options = {});
inline Mask spatial_mask(const VideoGeometry& geometry, std::int64_t band,
                         VideoMaskOptions options = {}) {
  return video_mask(VideoMaskKind::kSpatial, geometry, band, options);
}
inline Mask temporal_mask(const VideoGeometry& geometry, std::int64_t band,
                          VideoMaskOptions options = {}) {
  return video_mask(VideoMaskKind::kTemporal, geometry, band, options);
}

// What a mask built by video_mask() was built from; nullopt for any other mask.
struct VideoMaskInfo {
  VideoMaskKind kind = VideoMaskKind::kSpatial;
  VideoGeometry geometry;
  std::int64_t band = 0;
  VideoMaskOptions options;
};
std::optional<VideoMaskInfo> video_mask_info(const Mask& mask);

// Exact number of kept pairs of video_mask(kind, geometry, band, options)
// over tokens() x tokens(), in O(P).
std::int64_t count_kept_pairs(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                              VideoMaskOptions options = {});
double video_mask_density(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                          VideoMaskOptions options = {});

// The half-width whose mask, text and sink areas included, keeps the fraction
// of the tokens() x tokens() map closest to `density` (in (0, 1]); the smaller
// band on a tie. Without a kind, the band whose spatial and temporal densities
// average closest: with the sink the two differ slightly (the band overlaps
// frame 0 differently), and one band lets both kinds share one plan.
std::int64_t band_for_density(const VideoGeometry& geometry, double density,
                              VideoMaskOptions options = {},
                              std::optional<VideoMaskKind> kind = std::nullopt);
// round(frames * P): Sparse VideoGen writes the band as a multiple of a frame.
std::int64_t band_for_frames(const VideoGeometry& geometry, double frames);

// The three ways to give a band: in tokens, in frames, or as the target
// density it should meet. Exactly one must be set.
struct BandForm {
  std::optional<std::int64_t> band;   // >= 0, in tokens
  std::optional<double> band_frames;  // >= 0, in frames (band_for_frames)
  std::optional<double> density;      // in (0, 1] (band_for_density for this kind)
};
// The one rule every front end (SPEC terms, the bindings' Mask.spatial /
// Mask.temporal) applies. Throws std::invalid_argument("band: missing band
// form ..." or "band: more than one band form ...", or naming the bad value).
std::int64_t resolve_band(VideoMaskKind kind, const VideoGeometry& geometry, const BandForm& form,
                          VideoMaskOptions options = {});

enum class TokenOrder : std::uint8_t { kFrameMajor, kTokenMajor };
std::string_view to_string(TokenOrder order);  // "frame-major", "token-major"

// How the front door executes video_mask(kind, ...): Q, K and V in `order`
// (frame-major for spatial, token-major for temporal), then
//  - `band` over tokens() x tokens(): the band with the text area, which is
//    the same mask for both kinds, so spatial and temporal heads share a plan;
//  - with the sink, `sink` over tokens() x P: queries in `order` against the
//    P keys of frame 0 (key j is patch j of frame 0), keeping exactly the sink
//    pairs the band does not already keep. The two partial results merge
//    exactly through their log-sum-exps.
// Frame 0 is strided in token-major order; running it as its own segment is
// what keeps the temporal band plan from turning dense.
struct VideoRunMasks {
  TokenOrder order = TokenOrder::kFrameMajor;
  Mask band;
  std::optional<Mask> sink;
};
VideoRunMasks video_run_masks(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                              VideoMaskOptions options = {});

// Row permutations of [heads, tokens(), dim] tensors (any strides): dst gets
// src's rows in the other order, text rows unchanged. src and dst must share
// dtype, heads and dim, have len == tokens() and not overlap. Runs on
// `context` (null: default_threading_context()) with `threads` threads (0:
// the context's). Exact (bytes are copied); throws std::invalid_argument
// naming the mismatched argument.
void permute_to_token_major(const VideoGeometry& geometry, const TensorView& src,
                            const MutableTensorView& dst, int threads = 0,
                            ThreadingContext* context = nullptr);
void permute_to_frame_major(const VideoGeometry& geometry, const TensorView& src,
                            const MutableTensorView& dst, int threads = 0,
                            ThreadingContext* context = nullptr);

}  // namespace tilesplash
