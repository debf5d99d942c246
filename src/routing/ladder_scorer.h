// Incremental scoring of a density ladder: the rungs of one family (e.g.
// spatial@0.05 ... spatial@0.4) are nested, a wider rung keeping every key a
// narrower one keeps. For each sampled row the keys of the widest rung are
// walked once: every kept key belongs to one "ring" (the first rung that
// keeps it), each ring gets its own softmax state (max, sum, weighted V), and
// rung i's output is the log-sum-exp merge of rings 0..i. The cost is that of
// the widest rung alone, not the sum of every rung's, and nothing is stacked
// per rung. A row on which a chain is not nested (checked on every row, key
// by key) scores each of its rungs on its own: still exact, never wrong.
// Where the walk computes the reference rows too (DenseRows) and they cover
// every key a ring keeps, the rings share their row's running maximum, the
// dense row's: each key's weight is exp'd (and on the dot product rounded to
// bf16) once for the row and every chain, and a ring only rescales and sums
// its keys' weights and values. A head whose scores spread so far that a
// ring's keys all lie more than 69 below their row's maximum (its weights
// near f32's subnormals) is walked again with every ring on its own maximum.
//
// The walk goes over keys in blocks of 64, each block visited by every
// sampled row of the head and every chain in turn (online softmax per ring),
// so K and V are read from memory, converted and scored once per head, not
// once per row or chain; which keys of a block each row's rings keep is the
// same for every head, so it is scheduled once per call
// (routing/ladder_tracks.h). Scores and weights are computed in f32 (Q.K^T in
// fixed-order partial sums, weights by the vector exp2), rings merged and
// errors summed in double. Every head is one work item writing its own slots,
// summed in a fixed order afterwards, so results do not depend on the thread
// count. Compared with the kernel's stacked scoring (every rung its own
// section) the errors agree to about 1e-4 of themselves
// (tests/ladder_scorer_test.cc). The block's keys are widened, scored
// against every sampled row at once (the rows in the vector lanes), turned
// into weights and summed by the active SIMD target's loops
// (TargetOps::widen_rows, key_scores, exp_weights, gather_axpy, rows_axpy;
// kernel/ladder_walk-inl.h, compiled per target); bf16 inputs whose product
// path is the bf16 dot product take its loops instead (TargetOps::walk_dot:
// K read in place, V as the kernel's key pairs, the weights rounded to bf16
// as the kernel rounds its probabilities). Inputs: f32 or bf16 q, k, v
// (ladder_scoring_applies()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "routing/compensation_terms.h"
#include "tilesplash/attention_args.h"
#include "tilesplash/candidates.h"
#include "tilesplash/mask.h"
#include "tilesplash/threading.h"

namespace tilesplash::detail {

// The ladders among candidates: indices of the ladder rungs
// (MaskCandidate::family set, rung > 0) of one family, in increasing rung
// density, for each family with at least two rungs. Other candidates belong
// to no chain.
std::vector<std::vector<std::size_t>> ladder_chains(std::span<const MaskCandidate> candidates);

// Whether score_ladders() takes these inputs: q, k and v in f32 or bf16 (all
// one dtype) and Precision::kDefault (int8 Q.K^T stays on the kernel, whose
// rounding the reference rows share).
bool ladder_scoring_applies(const TensorView& q, const TensorView& k, const TensorView& v,
                            const AttentionOptions& options);

// The reference rows computed by the walk itself instead of given: every
// sampled row against every key of `keys` (the dense mask, or the keys before
// the padding), written to `out` ([heads, reference_rows, dv], f32), in the
// walk's f32 arithmetic. The router takes this when every candidate is on a
// chain, so its call needs no kernel pass (nor the packing of every head's K
// and V) for 16 to 64 rows.
struct DenseRows {
  float* out = nullptr;  // null: the reference rows are given
  IndexRange keys{};
};

// What the walk allocates (each chain's tracks and schedule, each worker's
// buffers), kept between calls: the router's calls are alike from layer to
// layer, so the buffers keep their capacity instead of being allocated,
// touched and returned to the system every call (at 3,072 tokens that cost a
// tenth of the routing). One call at a time.
class LadderWorkspace {
 public:
  LadderWorkspace();
  ~LadderWorkspace();
  LadderWorkspace(LadderWorkspace&&) noexcept;
  LadderWorkspace& operator=(LadderWorkspace&&) noexcept;
  struct State;  // ladder_scorer.cc
  State& state() { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

// How a walk runs, beyond its inputs: terms (null: none), each rung's
// compensation term, merged into its output before the error; dense: compute
// the reference rows instead of taking them (then `reference` is ignored);
// bf16_dot: bf16 inputs on the target's bf16 dot product, where it has one
// (the product path the kernel resolved to kDot: the scores exact, the
// weights rounded to bf16 as the kernel rounds its probabilities);
// workspace: where the walk keeps its buffers (null: allocated for the call).
struct WalkSetup {
  CompensationTerms* terms = nullptr;
  DenseRows dense{};
  bool bf16_dot = false;
  LadderWorkspace* workspace = nullptr;
};

// For every head h and every candidate c of every chain: the MSE over the
// sampled rows and all dv channels of c's output against `reference`
// (f32, [heads, reference_rows, dv], row i of a head being rows[i]) into
// mse[h][c]; other entries are left alone. masks: every candidate's mask
// (indexed like mse[h]); scale: the softmax scale.
void score_ladders(ThreadingContext& context, int threads, const TensorView& q, const TensorView& k,
                   const TensorView& v, std::span<const Mask> masks,
                   std::span<const std::vector<std::size_t>> chains,
                   std::span<const std::int64_t> rows, float scale, const float* reference,
                   std::int64_t reference_rows, std::vector<std::vector<double>>& mse,
                   const WalkSetup& setup = {});

}  // namespace tilesplash::detail
