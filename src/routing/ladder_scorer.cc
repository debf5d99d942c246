// Incremental scoring of nested density ladders; see ladder_scorer.h.
#include "routing/ladder_scorer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>

#include "kernel/isa_dispatch.h"
#include "routing/ladder_tracks.h"

namespace tilesplash::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
static_assert(kKeyBlock == kernel::kWalkDotBlock, "the walk's blocks are the dot product's");

inline float to_f32(float x) { return x; }
inline float to_f32(std::uint16_t bits) {  // bf16: the high half of an f32
  const std::uint32_t wide = static_cast<std::uint32_t>(bits) << 16;
  float x;
  std::memcpy(&x, &wide, sizeof x);
  return x;
}

// The sampled rows are padded to a multiple of every target's lanes.
constexpr std::int64_t kRowPad = 16;

struct Scratch {
  std::vector<float> qt;                // [d, rows_padded] in f32
  std::vector<std::uint32_t> qt_pairs;  // [d / 2, rows_padded] pairs of bf16 (the dot product)
  std::int64_t rows_padded = 0;
  std::vector<float> max, sum, acc;   // per (track, ring); acc [.., dv]
  std::vector<float> score;           // a block's kept keys' scores, then weights
  std::vector<float> weights, alpha;  // the dense rows' weights [rows, keys] and rescales
  std::int64_t weights_stride = 0;    // between the rows of weights
  std::vector<float> kb, vb;          // the current key block's K and V rows in f32
  std::vector<std::uint32_t> vp;      // or its V as key pairs of bf16 (the dot product)
  std::vector<std::uint32_t> probs;   // the dense rows' weights in bf16 pairs [rows, keys / 2]
  bool pairs = false;                 // the block's V is in vp, not vb
  std::vector<float> block_scores;    // [kKeyBlock, rows_padded]: every sampled row's scores
  std::vector<std::int32_t> index;    // the dense rows' keys of a block
  std::vector<double> out, rung_err;
};

struct Inputs {
  const kernel::TargetOps& ops;  // the active SIMD target's walk loops
  const TensorView& q;
  const TensorView& k;
  const TensorView& v;
  std::span<const Mask> masks;
  std::span<const std::int64_t> rows;
  float scale;
  const float* reference;
  std::int64_t reference_rows;
  CompensationTerms* terms;  // null: no compensation
  DenseRows dense;           // out null: the reference rows are given
  bool dot;                  // bf16 inputs on the dot product (kernel::WalkDotOps)
};

template <typename T>
const T* row_of(const TensorView& t, std::int64_t h, std::int64_t n) {
  return static_cast<const T*>(t.data) + h * t.head_stride + n * t.row_stride;
}

// One track's visit of a block (its kept keys grouped by ring, scheduled
// once per call) into its rings' online-softmax states, each ring on its own
// maximum: the keys' scores gathered from the block's, then per ring its
// maximum raised once (its sum and weighted V rescaled, folded into the
// weighted sum) and the weights.
void walk_block_own(const Inputs& in, const ChainTracks& c, std::size_t base,
                    const BlockVisit& visit, Scratch& s) {
  const std::int64_t dv = in.v.dim;
  const Track& t = c.tracks[visit.track];
  const std::uint32_t* start = c.starts.data() + visit.starts;
  const std::int32_t* index = c.index.data() + visit.index;
  const std::size_t kept = start[t.rings];
  s.score.resize(kept);
  const float* row_scores = s.block_scores.data() + t.row;
  for (std::size_t i = 0; i < kept; ++i) s.score[i] = row_scores[index[i] * s.rows_padded];
  for (std::size_t r = 0; r < t.rings; ++r) {
    const std::size_t b = start[r], e = start[r + 1];
    if (b == e) continue;
    const std::size_t at = base + t.state + r;
    const float block_max = *std::max_element(s.score.begin() + b, s.score.begin() + e);
    float alpha = 1.0f;
    if (block_max > s.max[at]) {
      if (s.sum[at] > 0.0f) alpha = std::exp(s.max[at] - block_max);
      s.sum[at] *= alpha;
      s.max[at] = block_max;
    }
    s.sum[at] +=
        in.ops.exp_weights(s.score.data() + b, static_cast<std::int64_t>(e - b), s.max[at]);
    float* acc = s.acc.data() + at * static_cast<std::size_t>(dv);
    const auto count = static_cast<std::int64_t>(e - b);
    if (s.pairs) {
      in.ops.walk_dot.gather_axpy(s.score.data() + b, index + b, count, s.vp.data(), dv, alpha,
                                  acc);
    } else {
      in.ops.gather_axpy(s.score.data() + b, s.vb.data(), dv, index + b, count, alpha, acc);
    }
  }
}

// The same visit with the rings on their row's running maximum, the dense
// row's (walked first): each key's weight is the dense row's, exp'd and
// rounded once for the row and every chain, so a ring only rescales (when
// the row's maximum rose since its last visit) and sums its keys' weights
// and values. A ring's state is (the maximum it is scaled to, sum, weighted
// V), as on its own maximum, so the merges are the same; score_head checks
// afterwards that no ring fell so far below its row that its weights lost
// precision.
void walk_block_shared(const Inputs& in, const ChainTracks& c, std::size_t base,
                       std::size_t dense_base, const BlockVisit& visit, Scratch& s) {
  const std::int64_t dv = in.v.dim;
  const Track& t = c.tracks[visit.track];
  const std::uint32_t* start = c.starts.data() + visit.starts;
  const std::int32_t* index = c.index.data() + visit.index;
  const float top = s.max[dense_base + static_cast<std::size_t>(t.row)];
  const float* w = s.weights.data() + t.row * s.weights_stride;
  for (std::size_t r = 0; r < t.rings; ++r) {
    const std::size_t b = start[r], e = start[r + 1];
    if (b == e) continue;
    const std::size_t at = base + t.state + r;
    float alpha = 1.0f;
    if (top > s.max[at]) {
      if (s.sum[at] > 0.0f) alpha = std::exp(s.max[at] - top);
      s.sum[at] *= alpha;
      s.max[at] = top;
    }
    float* acc = s.acc.data() + at * static_cast<std::size_t>(dv);
    if (s.pairs) {
      s.sum[at] +=
          in.ops.walk_dot.masked_axpy(w, s.probs.data() + t.row * (kKeyBlock / 2),
                                      c.ring_keys[visit.starts + r], s.vp.data(), dv, alpha, acc);
      continue;
    }
    const auto count = static_cast<std::int64_t>(e - b);
    s.score.resize(static_cast<std::size_t>(count));
    float sum = 0.0f;
    for (std::int64_t i = 0; i < count; ++i) {
      s.score[static_cast<std::size_t>(i)] = w[index[b + static_cast<std::size_t>(i)]];
      sum += s.score[static_cast<std::size_t>(i)];
    }
    s.sum[at] += sum;
    in.ops.gather_axpy(s.score.data(), s.vb.data(), dv, index + b, count, alpha, acc);
  }
}

// Every key of `part` (within the block from k0) into the dense states of
// the `rows` sampled rows from `base`: the reference rows, when the walk
// computes them. The weighted sums of all rows on the register tile; on the
// dot product the weights sit at their keys' places in the block, zero
// elsewhere.
void dense_block_rows(const Inputs& in, std::size_t base, std::int64_t rows, std::int64_t k0,
                      IndexRange part, Scratch& s) {
  const std::int64_t n = part.size(), offset = part.begin - k0;
  const std::int64_t stride = s.pairs ? kKeyBlock : n;
  s.weights_stride = stride;
  s.weights.assign(static_cast<std::size_t>(rows * stride), 0.0f);
  s.alpha.resize(static_cast<std::size_t>(rows));
  for (std::int64_t j = 0; j < rows; ++j) {
    const std::size_t at = base + static_cast<std::size_t>(j);
    const float* scores = s.block_scores.data() + offset * s.rows_padded + j;
    float* w = s.weights.data() + j * stride + (s.pairs ? offset : 0);
    for (std::int64_t i = 0; i < n; ++i) w[i] = scores[i * s.rows_padded];
    const float block_max = *std::max_element(w, w + n);
    float alpha = 1.0f;
    if (block_max > s.max[at]) {
      if (s.sum[at] > 0.0f) alpha = std::exp(s.max[at] - block_max);
      s.sum[at] *= alpha;
      s.max[at] = block_max;
    }
    s.sum[at] += in.ops.exp_weights(w, n, s.max[at]);
    s.alpha[static_cast<std::size_t>(j)] = alpha;
  }
  const std::int64_t dv = in.v.dim;
  float* acc = s.acc.data() + base * static_cast<std::size_t>(dv);
  if (s.pairs) {
    s.probs.resize(static_cast<std::size_t>(rows * kKeyBlock / 2));
    in.ops.walk_dot.rows_axpy(s.weights.data(), kKeyBlock, s.vp.data(), dv, s.alpha.data(), rows,
                              acc, dv, s.probs.data());
    return;
  }
  s.index.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    s.index[static_cast<std::size_t>(i)] = std::int32_t(offset + i);
  in.ops.rows_axpy(s.weights.data(), n, s.vb.data(), dv, s.index.data(), n, s.alpha.data(), rows,
                   acc, dv);
}

// Where a rung's output goes: its compensation term, when there are terms,
// merged in (candidate `c` of head `h`, sampled row `j`).
struct RungTerm {
  const CompensationTerms* terms = nullptr;
  std::int64_t h = 0, j = 0;
  const std::vector<std::size_t>* chain = nullptr;
};

// Merges a track's rings in order (log-sum-exp, in double); after ring r the
// squared error of the merged output (with its rung's compensation term)
// against `ref` goes to err[r].
void merge_rings(const Scratch& s, std::size_t base, const Track& t, const float* ref,
                 std::int64_t dv, std::vector<double>& out, double* err, const RungTerm& term) {
  double m = -std::numeric_limits<double>::infinity(), sum = 0.0;
  out.assign(static_cast<std::size_t>(dv), 0.0);
  std::vector<double> rung;
  for (std::size_t r = 0; r < t.rings; ++r) {
    const std::size_t at = base + t.state + r;
    if (s.sum[at] > 0.0f) {
      const double ring_max = s.max[at];
      const double top = std::max(m, ring_max);
      const double a = sum > 0.0 ? std::exp(m - top) : 0.0;
      const double b = std::exp(ring_max - top);
      const float* acc = s.acc.data() + at * static_cast<std::size_t>(dv);
      sum = sum * a + static_cast<double>(s.sum[at]) * b;
      for (std::int64_t c = 0; c < dv; ++c) {
        out[static_cast<std::size_t>(c)] = out[static_cast<std::size_t>(c)] * a + acc[c] * b;
      }
      m = top;
    }
    double e = 0.0;
    const double inv = sum > 0.0 ? 1.0 / sum : 0.0;  // no key: an output of 0
    if (term.terms != nullptr) {
      rung.resize(static_cast<std::size_t>(dv));
      for (std::int64_t c = 0; c < dv; ++c) {
        rung[static_cast<std::size_t>(c)] = out[static_cast<std::size_t>(c)] * inv;
      }
      double lse = sum > 0.0 ? m + std::log(sum) : -std::numeric_limits<double>::infinity();
      const std::size_t candidate = (*term.chain)[t.rings == 1 ? t.rung : r];
      term.terms->merge(term.h, term.j, static_cast<std::int64_t>(candidate), rung.data(), lse);
      for (std::int64_t c = 0; c < dv; ++c) {
        const double diff = rung[static_cast<std::size_t>(c)] - ref[c];
        e += diff * diff;
      }
      err[r] += e;
      continue;
    }
    for (std::int64_t c = 0; c < dv; ++c) {
      const double diff = out[static_cast<std::size_t>(c)] * inv - ref[c];
      e += diff * diff;
    }
    err[r] += e;
  }
}

// The head's sampled rows transposed into s.qt, [d][rows_padded], zero past
// the last: the rows are the vector lanes of the scores (kernel::KeyScoresFn).
template <typename T>
void transpose_rows(const Inputs& in, std::int64_t h, Scratch& s) {
  const std::int64_t d = in.q.dim, r = static_cast<std::int64_t>(in.rows.size());
  s.rows_padded = (r + kRowPad - 1) / kRowPad * kRowPad;
  s.qt.assign(static_cast<std::size_t>(d * s.rows_padded), 0.0f);
  for (std::int64_t j = 0; j < r; ++j) {
    const T* q_row = row_of<T>(in.q, h, in.rows[static_cast<std::size_t>(j)]);
    for (std::int64_t c = 0; c < d; ++c) {
      s.qt[static_cast<std::size_t>(c * s.rows_padded + j)] = to_f32(q_row[c]);
    }
  }
}

// The same rows as pairs of bf16 channels into s.qt_pairs, [d / 2][rows_padded]
// (the dot product's scores, kernel::WalkDotOps::key_scores): the bits of the rows.
void transpose_row_pairs(const Inputs& in, std::int64_t h, Scratch& s) {
  const std::int64_t pairs = in.q.dim / 2, r = static_cast<std::int64_t>(in.rows.size());
  s.rows_padded = (r + kRowPad - 1) / kRowPad * kRowPad;
  s.qt_pairs.assign(static_cast<std::size_t>(pairs * s.rows_padded), 0u);
  for (std::int64_t j = 0; j < r; ++j) {
    const std::uint16_t* q_row =
        row_of<std::uint16_t>(in.q, h, in.rows[static_cast<std::size_t>(j)]);
    for (std::int64_t c = 0; c < pairs; ++c) {
      std::uint32_t pair;
      std::memcpy(&pair, q_row + 2 * c, sizeof pair);
      s.qt_pairs[static_cast<std::size_t>(c * s.rows_padded + j)] = pair;
    }
  }
}

// The block's scores of every sampled row into s.block_scores: on the bf16
// dot product from K in place, else from K widened to f32 (into s.kb).
void score_block(const Inputs& in, std::int64_t h, std::int64_t k0, std::int64_t n, Scratch& s) {
  const std::int64_t d = in.q.dim;
  s.block_scores.resize(static_cast<std::size_t>(kKeyBlock * s.rows_padded));
  if (in.dot) {
    in.ops.walk_dot.key_scores(s.qt_pairs.data(), s.rows_padded, d,
                               row_of<std::uint16_t>(in.k, h, k0), in.k.row_stride, n, in.scale,
                               s.block_scores.data());
    return;
  }
  s.kb.resize(static_cast<std::size_t>(kKeyBlock * d));
  in.ops.widen_rows(in.k, h, k0, n, s.kb.data());
  in.ops.key_scores(s.qt.data(), s.rows_padded, d, s.kb.data(), n, in.scale, s.block_scores.data());
}

// The dense states from `base` as the head's reference rows, into dense.out.
void write_dense_rows(const Inputs& in, std::int64_t h, std::size_t base, const Scratch& s) {
  const std::int64_t dv = in.v.dim;
  for (std::int64_t j = 0; j < static_cast<std::int64_t>(in.rows.size()); ++j) {
    const std::size_t at = base + static_cast<std::size_t>(j);
    const float inv = s.sum[at] > 0.0f ? 1.0f / s.sum[at] : 0.0f;
    float* out = in.dense.out + (h * in.reference_rows + j) * dv;
    for (std::int64_t c = 0; c < dv; ++c) out[c] = s.acc[at * dv + c] * inv;
  }
}

// Where a head's states are: each chain's ring states from base[c], then,
// with dense rows to compute, one state per sampled row from base.back().
struct HeadStates {
  std::vector<std::size_t> base;
  bool dense = false;
  // Rings on their row's running maximum (walk_block_shared): the dense rows
  // are walked and cover every key a ring keeps.
  bool shared = false;
};

// The head's walk over every block of `range`: the states of every chain's
// rings and of the dense rows.
void walk_head(const Inputs& in, std::int64_t h, std::span<const ChainTracks> walks,
               IndexRange range, const HeadStates& hs, Scratch& s) {
  const std::int64_t dv = in.v.dim;
  const std::int64_t r = static_cast<std::int64_t>(in.rows.size());
  const std::size_t dense_base = hs.base.back();
  const std::size_t states = dense_base + (hs.dense ? static_cast<std::size_t>(r) : 0);
  s.max.assign(states, kNegInf);
  s.sum.assign(states, 0.0f);
  s.acc.assign(states * static_cast<std::size_t>(dv), 0.0f);
  for (std::int64_t k0 = range.begin, b = 0; k0 < range.end; k0 += kKeyBlock, ++b) {
    const std::int64_t k1 = std::min(k0 + kKeyBlock, range.end);
    const IndexRange dense_part{std::max(k0, in.dense.keys.begin), std::min(k1, in.dense.keys.end)};
    const bool dense_block = hs.dense && !dense_part.empty();
    const auto visits = [&](const ChainTracks& c) {
      return std::span(c.visits).subspan(c.block_visits[b],
                                         c.block_visits[b + 1] - c.block_visits[b]);
    };
    if (!dense_block &&
        std::ranges::all_of(walks, [&](const ChainTracks& c) { return visits(c).empty(); })) {
      continue;
    }
    // The block's V rows converted once for all rows and chains (key pairs
    // of bf16 on the dot product, unless one is not finite; else f32); every
    // row scored against the whole block at once (the rows in the vector
    // lanes), rather than one row against its kept keys at a time (a
    // matrix-vector loop with a horizontal sum per key).
    const std::int64_t n = k1 - k0;
    s.vp.resize(static_cast<std::size_t>(kKeyBlock / 2 * dv));
    s.pairs = in.dot && in.ops.walk_dot.pack_values(in.v, h, k0, k1, dv, s.vp.data());
    if (!s.pairs) {
      s.vb.resize(static_cast<std::size_t>(kKeyBlock * dv));
      in.ops.widen_rows(in.v, h, k0, n, s.vb.data());
    }
    score_block(in, h, k0, n, s);
    // Shared: the dense rows first, their maxima and weights the rings'.
    if (dense_block && hs.shared) dense_block_rows(in, dense_base, r, k0, dense_part, s);
    for (std::size_t c = 0; c < walks.size(); ++c) {
      for (const BlockVisit& visit : visits(walks[c])) {
        if (hs.shared) {
          walk_block_shared(in, walks[c], hs.base[c], dense_base, visit, s);
        } else {
          walk_block_own(in, walks[c], hs.base[c], visit, s);
        }
      }
    }
    if (dense_block && !hs.shared) dense_block_rows(in, dense_base, r, k0, dense_part, s);
  }
}

// Whether every ring the shared walk reached kept its precision: a sum of at
// least 2^-100 (every key of a ring below that lies more than 69 below its
// row's maximum, its weights closer to f32's subnormals than a ring on its
// own maximum ever is). Also false where a sum is NaN.
bool shared_rings_hold(std::size_t rings, const Scratch& s) {
  constexpr float kLeast = 0x1p-100f;
  for (std::size_t at = 0; at < rings; ++at) {
    if (s.max[at] != kNegInf && !(s.sum[at] >= kLeast)) return false;
  }
  return true;
}

// One head, every chain: each sampled row's rungs' squared errors into
// err[row * candidates + candidate]. The chains walk the keys together, so a
// block's K and V are converted and its scores computed once for all of them.
template <typename T>
void score_head(const Inputs& in, std::int64_t h, std::span<const std::vector<std::size_t>> chains,
                std::span<const ChainTracks> walks, Scratch& s, double* err,
                std::size_t candidates) {
  const std::int64_t dv = in.v.dim;
  // First the head's compensation terms: pooling streams its K and V, which
  // the walk then finds in cache.
  if (in.terms != nullptr) in.terms->fill_head(h);
  if (in.dot) {
    transpose_row_pairs(in, h, s);
  } else {
    transpose_rows<T>(in, h, s);
  }
  HeadStates hs;
  hs.base.assign(walks.size() + 1, 0);
  for (std::size_t c = 0; c < walks.size(); ++c) hs.base[c + 1] = hs.base[c] + walks[c].states;
  hs.dense = in.dense.out != nullptr && !in.dense.keys.empty();
  const IndexRange range = walk_range(walks, hs.dense ? in.dense.keys : IndexRange{});
  hs.shared = hs.dense && range.begin == in.dense.keys.begin && range.end == in.dense.keys.end;
  walk_head(in, h, walks, range, hs, s);
  if (hs.shared && !shared_rings_hold(hs.base.back(), s)) {
    hs.shared = false;  // rare (scores spread over more than 69): each ring on its own maximum
    walk_head(in, h, walks, range, hs, s);
  }
  if (hs.dense) write_dense_rows(in, h, hs.base.back(), s);  // before the chains read them
  for (std::size_t c = 0; c < walks.size(); ++c) {
    const std::vector<std::size_t>& chain = chains[c];
    for (const Track& t : walks[c].tracks) {
      const float* ref = in.reference + (h * in.reference_rows + t.row) * dv;
      s.rung_err.assign(t.rings, 0.0);
      merge_rings(s, hs.base[c], t, ref, dv, s.out, s.rung_err.data(),
                  {in.terms, h, t.row, &chain});
      double* slot = err + static_cast<std::size_t>(t.row) * candidates;
      for (std::size_t i = 0; i < t.rings; ++i)
        slot[chain[t.rings == 1 ? t.rung : i]] = s.rung_err[i];
    }
  }
}

}  // namespace

struct LadderWorkspace::State {
  std::vector<ChainTracks> tracks;  // per chain
  std::vector<Scratch> scratch;     // per worker
  std::vector<double> err;
};

LadderWorkspace::LadderWorkspace() : state_(std::make_unique<State>()) {}
LadderWorkspace::~LadderWorkspace() = default;
LadderWorkspace::LadderWorkspace(LadderWorkspace&&) noexcept = default;
LadderWorkspace& LadderWorkspace::operator=(LadderWorkspace&&) noexcept = default;

std::vector<std::vector<std::size_t>> ladder_chains(std::span<const MaskCandidate> candidates) {
  std::map<std::string, std::vector<std::pair<double, std::size_t>>> families;
  std::vector<std::string> order;
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    const MaskCandidate& candidate = candidates[c];
    if (candidate.family.empty() || !(candidate.rung > 0.0)) continue;  // not a ladder rung
    auto [it, added] = families.try_emplace(candidate.family);
    if (added) order.push_back(it->first);
    it->second.emplace_back(candidate.rung, c);
  }
  std::vector<std::vector<std::size_t>> chains;
  for (const std::string& family : order) {
    auto& rungs = families[family];
    if (rungs.size() < 2 || rungs.size() > 255) continue;  // rings are counted in a byte
    std::stable_sort(rungs.begin(), rungs.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::size_t> chain;
    for (const auto& rung : rungs) chain.push_back(rung.second);
    chains.push_back(std::move(chain));
  }
  return chains;
}

bool ladder_scoring_applies(const TensorView& q, const TensorView& k, const TensorView& v,
                            const AttentionOptions& options) {
  const auto host = [](const TensorView& t) { return t.device.type == DeviceType::kCpu; };
  return options.precision == Precision::kDefault && q.dtype == k.dtype && q.dtype == v.dtype &&
         (q.dtype == DType::kF32 || q.dtype == DType::kBF16) && host(q) && host(k) && host(v);
}

void score_ladders(ThreadingContext& context, int threads, const TensorView& q, const TensorView& k,
                   const TensorView& v, std::span<const Mask> masks,
                   std::span<const std::vector<std::size_t>> chains,
                   std::span<const std::int64_t> rows, float scale, const float* reference,
                   std::int64_t reference_rows, std::vector<std::vector<double>>& mse,
                   const WalkSetup& setup) {
  CompensationTerms* terms = setup.terms;
  const DenseRows dense = setup.dense;
  const std::int64_t heads = q.heads, r = static_cast<std::int64_t>(rows.size());
  const std::int64_t n_chains = static_cast<std::int64_t>(chains.size());
  const std::size_t candidates = masks.size();
  if ((n_chains == 0 && dense.out == nullptr) || r == 0) return;
  const Inputs in{kernel::active_target(),
                  q,
                  k,
                  v,
                  masks,
                  rows,
                  scale,
                  dense.out != nullptr ? dense.out : reference,
                  reference_rows,
                  terms,
                  dense,
                  setup.bf16_dot && q.dtype == DType::kBF16 && k.dtype == DType::kBF16 &&
                      v.dtype == DType::kBF16 &&
                      kernel::active_target().walk_dot.key_scores != nullptr && q.dim % 2 == 0 &&
                      v.dim % kernel::kDotMergePanel == 0};
  LadderWorkspace own;
  LadderWorkspace::State& state =
      setup.workspace != nullptr ? setup.workspace->state() : own.state();
  // Squared errors per (head, row, candidate): every item writes its own slots.
  std::vector<double>& err = state.err;
  err.assign(static_cast<std::size_t>(heads * r) * candidates, 0.0);
  // Every chain's tracks (hulls, rings, nesting per sampled row): one item per chain.
  std::vector<ChainTracks>& tracks = state.tracks;
  tracks.resize(chains.size());
  context.run(threads, n_chains, [&](std::int64_t c, int) {
    make_tracks(masks, rows, k.len, chains[static_cast<std::size_t>(c)],
                tracks[static_cast<std::size_t>(c)]);
  });
  // Which keys of each block every track keeps, by ring: the same for every
  // head, so scheduled once here rather than per head in the walk.
  const bool walks_dense = dense.out != nullptr && !dense.keys.empty();
  const IndexRange range = walk_range(tracks, walks_dense ? dense.keys : IndexRange{});
  context.run(threads, n_chains, [&](std::int64_t c, int) {
    schedule_blocks(tracks[static_cast<std::size_t>(c)], range);
  });
  std::vector<Scratch>& scratch = state.scratch;
  scratch.resize(static_cast<std::size_t>(context.resolve(threads)));
  context.run(threads, heads, [&](std::int64_t h, int worker) {
    Scratch& s = scratch[static_cast<std::size_t>(worker)];
    double* slots = err.data() + static_cast<std::size_t>(h * r) * candidates;
    if (q.dtype == DType::kF32) {
      score_head<float>(in, h, chains, tracks, s, slots, candidates);
    } else {
      score_head<std::uint16_t>(in, h, chains, tracks, s, slots, candidates);
    }
  });
  const double count = static_cast<double>(r * v.dim);
  for (std::int64_t h = 0; h < heads; ++h) {
    for (const std::vector<std::size_t>& chain : chains) {
      for (const std::size_t c : chain) {
        double sum = 0.0;  // rows in order: independent of the thread count
        for (std::int64_t j = 0; j < r; ++j) {
          sum += err[static_cast<std::size_t>(h * r + j) * candidates + c];
        }
        mse[static_cast<std::size_t>(h)][c] = sum / count;
      }
    }
  }
}

}  // namespace tilesplash::detail
