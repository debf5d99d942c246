// Candidate masks for video heads: what a head may run, and how it runs.
// A MaskCandidate is one named mask on the original (frame-major) token order
// (what the router scores on sampled rows and what the output equals) plus a
// MaskRun: the order Q, K and V rows are gathered into before the kernel
// (identity, token-major, tile-major, ...), the same mask written over those
// run-order indices, and optionally a second key segment (the first-frame sink
// of the band masks) merged exactly through the log-sum-exps. The output rows
// are scattered back, so a head's result is plain masked attention under the
// candidate's mask whatever its run order. method_candidates() builds the
// list behind each registered method (methods.h: "svg" = spatial and
// temporal, "radial", "sta", "mix", ...), so a binding passes a name, never
// builds masks itself.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tilesplash/mask.h"
#include "tilesplash/video.h"

namespace tilesplash {

// A permutation of a sequence's rows: run position r holds original row
// source(r). Default-constructed it is the identity over any length.
class RowOrder {
 public:
  RowOrder() = default;
  // `source` must be a permutation of [0, source.size()); throws
  // std::invalid_argument naming the first repeated or out-of-range entry.
  RowOrder(std::vector<std::int64_t> source, std::string name);
  // Token-major order: video token (f, p) at p * F + f (the same patch of
  // every frame side by side), text in place.
  static RowOrder token_major(const VideoGeometry& geometry);

  bool is_identity() const { return tables_ == nullptr; }
  std::int64_t size() const;  // 0 for the identity
  std::int64_t source(std::int64_t position) const;
  std::int64_t position(std::int64_t row) const;
  std::span<const std::int64_t> sources() const;    // empty for the identity
  std::span<const std::int64_t> positions() const;  // inverse of sources()
  std::string_view name() const;                    // "original" for the identity

 private:
  struct Tables;
  std::shared_ptr<const Tables> tables_;
};

// A second key segment: keys first + j * stride (run-order indices) for j in
// [0, count), scored by `mask` over run-order query rows x j.
struct KeySegment {
  Mask mask;
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::int64_t stride = 1;
};

// How a mask executes on a sequence of geometry.tokens() rows.
struct MaskRun {
  MaskRun(RowOrder order, Mask mask, std::optional<KeySegment> extra = std::nullopt,
          std::optional<RowOrder> kv_order = std::nullopt)
      : order(std::move(order)),
        mask(std::move(mask)),
        extra(std::move(extra)),
        kv_order(std::move(kv_order)) {}

  RowOrder order;  // Q rows, and K and V rows unless kv_order says otherwise
  Mask mask;       // over run-order indices (queries x keys), tokens x tokens
  std::optional<KeySegment> extra;
  std::optional<RowOrder> kv_order;  // K and V rows when they move apart from Q (svg2)
};

struct MaskCandidate {
  std::string name;      // unique within a list: "spatial", "radial", "sta:3x3x3", ...
  Mask mask;             // on the original order
  MaskRun run;           // how it executes
  double density = 0.0;  // exact kept fraction of mask over tokens x tokens
  // A rung of an error target's density ladder (ladder_candidates()): the
  // candidate's name before "@<density>" and the ladder's density. Empty and
  // 0 for any other candidate. The router's incremental scoring walks a
  // family's rungs together (nested bands), so it groups by these fields,
  // never by parsing names.
  std::string family;
  double rung = 0.0;
};

// The Sparse VideoGen masks as candidates ("spatial", "temporal"): the shared
// band plan in frame-major or token-major order, the sink as its own segment.
MaskCandidate video_candidate(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                              VideoMaskOptions options = {});
// Any mask, run in the original order as it is; its density comes from a plan
// over 256 x 256 tiles (exact, O(tiles) for analytic masks).
MaskCandidate plain_candidate(std::string name, const Mask& mask, std::int64_t tokens);

// The row order pooled heads cut their tiles in (pooled.h: PooledOrder).
enum class PooledOrder;

// What method_candidates() builds each list from.
struct MethodOptions {
  double density = 0.25;  // target density of every candidate, in (0, 1]
  bool sink = false;      // OR the first-frame sink (Wan) into every candidate
  bool text_full = true;  // text rows and columns kept whole
  // Methods that take a band (MethodInfo::takes_band, svg): the shared band's
  // half-width in tokens instead of the one that meets density.
  std::optional<std::int64_t> band = std::nullopt;
  // Methods whose heads rank their own pooled key tiles (pooled.h: "pooled",
  // and "mix" with it among its families); unset: PooledOptions' defaults.
  // p: keep each query tile's key tiles to this cumulative pooled mass
  // instead of meeting density, in (0, 1] (not with an error target, whose
  // ladder is p); floor: key tiles kept per query tile at least, >= 0; gate:
  // key tiles less self-similar than this are always kept, in [-1, 1].
  std::optional<double> p = std::nullopt;
  std::optional<std::int64_t> floor = std::nullopt;
  std::optional<double> gate = std::nullopt;
  // order: the row order those heads cut their tiles in (unset: kAuto, each
  // head's cheaper one).
  std::optional<PooledOrder> order = std::nullopt;
  // Methods that route among other methods' masks ("mix"): the registered
  // methods it routes among, each a mask family with candidates or a method
  // whose heads rank their own pooled tiles; empty: every mask family.
  std::vector<std::string> families = {};
};

// The candidate list of a registered method (methods.h), every candidate
// matched to options.density:
//   "svg"      spatial and temporal on one band (Sparse VideoGen; the default)
//   "spatial", "temporal"  one of the two, each on its own closest band
//   "radial"   the Radial Attention mask (radial.h), decay chosen for the
//              density (text kept whole whatever text_full says)
//   "sta"      sliding-tile windows (sta.h, tiles 6 x 8 x 8): one per
//              temporal window width, each with the spatial window closest
//              to the density; the router picks one per head (no sink, text
//              kept whole)
//   "mix"      the candidates of every method with a SPEC term: spatial and
//              temporal (each on its own band), radial and the sta windows
// Throws std::invalid_argument naming the valid methods. ("svg2" is no
// candidate list: its masks come from each head's data, see clusters.h and
// method_attention_options() in routing.h.)
std::vector<MaskCandidate> method_candidates(std::string_view method, const VideoGeometry& geometry,
                                             const MethodOptions& options = {});
// The registered methods with a candidate list, in registry order: svg,
// spatial, temporal, radial, sta, mix.
std::span<const std::string_view> method_names();

// How `mask` executes when it runs alone (e.g. from a SPEC): as the front
// door runs it for the masks of a registered method's family (temporal in
// token-major order with the sink as its own segment, sta in tile-major
// order), everything else as it is. Throws
// std::invalid_argument when a video mask's token count differs from `tokens`.
MaskRun mask_run(const Mask& mask, std::int64_t tokens);

}  // namespace tilesplash
